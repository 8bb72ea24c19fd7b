import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';

/** What the servers did, counted outside them so a restart does not reset it. */
export interface World {
  /** Non-idempotent side effects of `charge`, by key. */
  readonly charges: Map<string, number>;
  /** Tool executions, by tool name. */
  readonly runs: Map<string, number>;
  /** Sessions created: one per initialize the server accepted. */
  sessions: number;
}

export function newWorld(): World {
  return { charges: new Map(), runs: new Map(), sessions: 0 };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The same demo tools on both stacks (the pattern of test/server/harness.ts): `charge` makes its side
 * effect first and answers after `ms`, `chatty` sends `count` numbered progress notifications.
 */
export function toolServer(world: World): McpServer {
  const server = new McpServer({ name: 'compare', version: '1.0.0' }, { capabilities: { logging: {} } });
  const ran = (tool: string) => world.runs.set(tool, (world.runs.get(tool) ?? 0) + 1);
  server.registerTool(
    'echo',
    { inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } },
    async ({ text }) => {
      ran('echo');
      return { content: [{ type: 'text', text }] };
    },
  );
  server.registerTool(
    'charge',
    { inputSchema: { key: z.string(), ms: z.number().optional() } },
    async ({ key, ms }) => {
      ran('charge');
      world.charges.set(key, (world.charges.get(key) ?? 0) + 1);
      // The payment provider answers slowly: the charge is made, the result takes `ms` to come back.
      if (ms) await sleep(ms);
      return { content: [{ type: 'text', text: `charged ${key}` }] };
    },
  );
  server.registerTool(
    'chatty',
    { inputSchema: { count: z.number(), intervalMs: z.number() }, annotations: { readOnlyHint: true } },
    async ({ count, intervalMs }, extra) => {
      ran('chatty');
      for (let n = 1; n <= count; n++) {
        if (intervalMs > 0) await sleep(intervalMs);
        await extra.sendNotification({
          method: 'notifications/progress',
          params: {
            progressToken: (extra._meta?.progressToken as string | number | undefined) ?? 'chatty',
            progress: n,
          },
        });
      }
      return { content: [{ type: 'text', text: `sent ${count}` }] };
    },
  );
  return server;
}
