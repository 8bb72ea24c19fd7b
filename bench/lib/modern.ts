import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { continuityFetch, createContinuityServer, type EventLog, MemoryEventLog } from '../../src/index.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import type { MemoStore } from '../../src/server/memo-store.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { closeHttp, listen, type RunningServer } from './stacks.js';

/**
 * MCP 2026-07-28 for the bench: the official v2 server (`createMcpHandler`, defaults, on `node:http`
 * through `toNodeHandler`) and the official v2 `Client` pinned to 2026-07-28, with the same two tools as
 * `benchMcpServer` (`echo {text}`, `stream {count}`) and `peek {text}`, a read-only `echo`. mcp-continuity's 2026-07-28 stack (the v2 `Client`
 * with `fetch: continuityFetch()`, `createContinuityServer` serving 2026-07-28) joins here once merged.
 */
export const PROTOCOL_2026 = '2026-07-28';

export function modernBenchServer(): McpServer {
  const server = new McpServer({ name: 'bench-2026', version: '1.0.0' });
  server.registerTool(
    'echo',
    { description: 'echoes its text', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  // The same tool marked read-only: `continuityFetch` leaves its calls unkeyed (no memo entry, no key).
  server.registerTool(
    'peek',
    {
      description: 'echoes its text; read-only',
      inputSchema: z.object({ text: z.string() }),
      annotations: { readOnlyHint: true },
    },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  server.registerTool(
    'stream',
    { description: 'sends count progress notifications', inputSchema: z.object({ count: z.number() }) },
    async ({ count }, ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken ?? 'stream';
      for (let n = 1; n <= count; n++) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: n } });
      }
      return { content: [{ type: 'text', text: `sent ${count}` }] };
    },
  );
  return server;
}

/** The official v2 server on 127.0.0.1, ephemeral port. */
export async function startModernOfficial(): Promise<RunningServer> {
  const errors: string[] = [];
  const handler = createMcpHandler(() => modernBenchServer(), { onerror: (e) => errors.push(String(e)) });
  const node = toNodeHandler(handler);
  const { server, port } = await listen((req, res) => {
    void node(req, res);
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    http: server,
    errors,
    sessionCount: () => 0, // no sessions on 2026-07-28
    async close() {
      await Promise.race([handler.close(), new Promise((r) => setTimeout(r, 2_000).unref())]);
      await closeHttp(server);
    },
  };
}

/**
 * mcp-continuity serving 2026-07-28 with the continuity extension (library defaults; memory stores
 * unless `log` and `memo` are given; `maxKeys` raises the per-address and per-principal key bounds).
 */
export async function startModernOurs(
  options: { maxEventsPerStream?: number; log?: EventLog; memo?: MemoStore; maxKeys?: number } = {},
): Promise<RunningServer> {
  const errors: string[] = [];
  const log =
    options.log ??
    new MemoryEventLog(
      options.maxEventsPerStream === undefined ? {} : { maxEventsPerStream: options.maxEventsPerStream },
    );
  const memo = options.memo ?? new MemoryMemoStore({ memoWindowMs: 10 * 60_000 });
  const continuity = createContinuityServer({
    createMcpServer: () => {
      throw new Error('no 2025 sessions in this bench');
    },
    eventLog: log,
    onError: (e) => errors.push(String(e)),
    modern: {
      createServer: () => modernBenchServer(),
      keyed: createKeyedRequests({
        log,
        memo,
        // Row 1 streams 100,000 progress notifications (~7.6 MiB) on one keyed call: past the default
        // 1 MiB per key the body's further events are neither kept nor delivered (machines/server/keyed-events.ts).
        maxEventBytesPerKey: 64 * 1024 * 1024,
        ...(options.maxKeys === undefined
          ? {}
          : { maxEntriesPerAddress: options.maxKeys, maxEntriesPerPrincipal: options.maxKeys }),
      }),
    },
  });
  const { server, port } = await listen(continuity.nodeHandler);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    http: server,
    errors,
    sessionCount: () => 0,
    async close() {
      await Promise.race([continuity.close(), new Promise((r) => setTimeout(r, 2_000).unref())]);
      await closeHttp(server);
    },
  };
}

/** The official v2 `Client`, pinned to 2026-07-28 (connect = `server/discover`); `ours`: with `continuityFetch()`. */
export async function connectModernClient(
  url: string,
  ours = false,
): Promise<{ client: Client; errors: string[]; close(): Promise<void> }> {
  const errors: string[] = [];
  const client = new Client(
    { name: 'bench-2026', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: PROTOCOL_2026 } } },
  );
  client.onerror = (e) => errors.push(e.message);
  const transport = new StreamableHTTPClientTransport(
    new URL(url),
    ours ? { fetch: continuityFetch() } : undefined,
  );
  const ok = await Promise.race([
    client.connect(transport).then(() => true),
    new Promise<false>((r) => setTimeout(() => r(false), 10_000).unref()),
  ]);
  if (!ok) throw new Error('v2 client: connect got no answer within 10 s');
  return {
    client,
    errors,
    async close() {
      await Promise.race([client.close(), new Promise((r) => setTimeout(r, 3_000).unref())]);
    },
  };
}
