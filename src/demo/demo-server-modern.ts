import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { DemoLedger } from './demo-server.js';

/** What the 2026-07-28 tool tells the demo's timeline (the server's side of the story). */
export interface ModernChargeEvents {
  /** A body started charging: the side effect is counted here, before the slow provider answers. */
  readonly onCharging?: (key: string) => void;
  /** A body finished (whether or not anyone is still listening). */
  readonly onCharged?: (key: string) => void;
}

/**
 * The demo's `charge` tool on the official v2 `McpServer`, for the 2026-07-28 part: the same ledger as
 * the 2025 server. Like a real payment provider it does not stop because a connection was cut: it ignores
 * the request's abort signal, so the spec's "closing the stream cancels the request" does not undo it.
 */
export function modernDemoServer(ledger: DemoLedger, events: ModernChargeEvents = {}): McpServer {
  const server = new McpServer({ name: 'mcp-continuity-demo', version: '1.0.0' });
  server.registerTool(
    'charge',
    {
      description: 'Charges a card; the provider answers slowly.',
      inputSchema: z.object({ key: z.string(), ms: z.number() }),
    },
    async ({ key, ms }) => {
      ledger.charges.set(key, (ledger.charges.get(key) ?? 0) + 1);
      events.onCharging?.(key);
      await new Promise((r) => setTimeout(r, ms));
      events.onCharged?.(key);
      return { content: [{ type: 'text', text: `charged ${key}` }] };
    },
  );
  return server;
}
