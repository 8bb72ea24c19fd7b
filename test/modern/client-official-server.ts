import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

/**
 * The OFFICIAL v2 server (`createMcpHandler`, served with `toNodeHandler`) on 127.0.0.1, with the tools the
 * client tests need: `charge` (a 1.5 s side effect, counted), `charge_with_progress` (a progress
 * notification first, then the same charge), and `lookup` (annotated `readOnlyHint`, counted too; its
 * first run is slower than the balancer's idle timeout, the next ones fast).
 * No continuity extension: this is the server an application meets today.
 */
export interface OfficialServer {
  readonly port: number;
  readonly url: URL;
  /** Charges that completed their side effect (a cancelled charge that ignored its signal counts). */
  readonly charges: () => number;
  /** Charges that started (a second start is a second side effect on its way). */
  readonly chargeStarts: () => number;
  /** Runs of the read-only tool. */
  readonly lookups: () => number;
  close(): Promise<void>;
}

export async function startOfficialServer(
  options: { chargeMs?: number; coldLookupMs?: number; warmLookupMs?: number } = {},
): Promise<OfficialServer> {
  const chargeMs = options.chargeMs ?? 1_500;
  let charges = 0;
  let chargeStarts = 0;
  let lookups = 0;
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const factory = () => {
    const server = new McpServer({ name: 'official-v2', version: '2.4.0' });
    // A payment provider does not stop because the caller hung up: the side effect happens regardless.
    server.registerTool(
      'charge',
      { description: 'Charge a card (1.5 s)', inputSchema: z.object({ cents: z.number() }) },
      async ({ cents }) => {
        chargeStarts++;
        await wait(chargeMs);
        charges++;
        return { content: [{ type: 'text', text: `charged ${cents}` }] };
      },
    );
    server.registerTool(
      'charge_with_progress',
      { description: 'Progress first, then charge', inputSchema: z.object({ cents: z.number() }) },
      async ({ cents }, ctx) => {
        const token = ctx.mcpReq._meta?.progressToken;
        if (token !== undefined) {
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken: token, progress: 0, total: 1 },
          });
        }
        chargeStarts++;
        await wait(chargeMs);
        charges++;
        return { content: [{ type: 'text', text: `charged ${cents}` }] };
      },
    );
    server.registerTool(
      'lookup',
      {
        description: 'Read a balance',
        inputSchema: z.object({ account: z.string() }),
        annotations: { readOnlyHint: true },
      },
      async ({ account }) => {
        // The first lookup is slow (a cold cache, longer than the balancer's idle timeout), the next fast.
        const ms = lookups === 0 ? (options.coldLookupMs ?? 600) : (options.warmLookupMs ?? 20);
        lookups++;
        await wait(ms);
        return { content: [{ type: 'text', text: `balance of ${account}: 42` }] };
      },
    );
    return server;
  };
  const handler = toNodeHandler(createMcpHandler(factory));
  const server = http.createServer((req, res) => {
    void handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    charges: () => charges,
    chargeStarts: () => chargeStarts,
    lookups: () => lookups,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
