import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'vitest';

/**
 * After hostile traffic the server still serves: a new SDK session on 127.0.0.1:`port` initializes, calls
 * the demo server's `echo` and is deleted again (so it leaves no session behind).
 */
export async function freshSessionWorks(port: number): Promise<void> {
  const client = new Client({ name: 'fresh', version: '1' });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
    requestInit: { headers: { 'X-User': 'fresh' } },
  });
  await client.connect(transport);
  const result = await client.callTool({ name: 'echo', arguments: { text: 'alive' } });
  expect(result.content).toEqual([{ type: 'text', text: 'alive' }]);
  await transport.terminateSession();
  await client.close();
}
