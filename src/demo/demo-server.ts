import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';

/** The demo's tools: a slow payment (its side effects are counted outside the server) and a chatty one. */
export interface DemoLedger {
  readonly charges: Map<string, number>;
}

export function demoServer(ledger: DemoLedger): McpServer {
  const server = new McpServer({ name: 'mcp-continuity-demo', version: '1.0.0' });
  server.registerTool(
    'charge',
    {
      description: 'Charges a card; the provider answers slowly.',
      inputSchema: { key: z.string(), ms: z.number() },
    },
    async ({ key, ms }) => {
      ledger.charges.set(key, (ledger.charges.get(key) ?? 0) + 1);
      await new Promise((r) => setTimeout(r, ms));
      return { content: [{ type: 'text', text: `charged ${key}` }] };
    },
  );
  server.registerTool(
    'chatty',
    {
      description: 'Streams numbered progress notifications.',
      inputSchema: { count: z.number(), intervalMs: z.number() },
      annotations: { readOnlyHint: true },
    },
    async ({ count, intervalMs }, extra) => {
      for (let n = 1; n <= count; n++) {
        await new Promise((r) => setTimeout(r, intervalMs));
        await extra.sendNotification({
          method: 'notifications/progress',
          params: {
            progressToken: (extra._meta?.progressToken as string | number | undefined) ?? 0,
            progress: n,
            total: count,
          },
        });
      }
      return { content: [{ type: 'text', text: `sent ${count}` }] };
    },
  );
  return server;
}
