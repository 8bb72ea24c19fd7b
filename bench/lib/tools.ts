import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';

/**
 * The same McpServer on every stack: `echo {text}` answers at once; `stream {count}` sends `count`
 * small `notifications/progress` on its request's stream (awaiting each send, as a tool would), then answers.
 */
export function benchMcpServer(): McpServer {
  const server = new McpServer({ name: 'bench', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  server.registerTool('stream', { inputSchema: { count: z.number() } }, async ({ count }, extra) => {
    const progressToken = (extra._meta?.progressToken as string | number | undefined) ?? 'stream';
    for (let n = 1; n <= count; n++) {
      await extra.sendNotification({
        method: 'notifications/progress',
        params: { progressToken, progress: n },
      });
    }
    return { content: [{ type: 'text', text: `sent ${count}` }] };
  });
  return server;
}

/** An McpServer with no tools at all: the least an application can hand each session. */
export function bareMcpServer(): McpServer {
  return new McpServer({ name: 'bare', version: '1.0.0' });
}

/** The frame a stack writes for progress notification `n` (what the raw ceiling writes too). */
export function progressMessage(progressToken: string | number, n: number) {
  return {
    jsonrpc: '2.0',
    method: 'notifications/progress',
    params: { progressToken, progress: n },
  } as const;
}
