import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpHandler, McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { listenOnLoopback } from '../support/listen.js';
import { sdkSessionRouter } from '../support/sdk-session-router.js';

/**
 * The servers the probe is shown against, each on 127.0.0.1 with an ephemeral port, each with the same
 * read-only tool: `lookup` waits `ms` and answers with how many lookups this process ran (so a tool that
 * ran twice is visible in its answers).
 */
export interface ProbedServer {
  readonly url: string;
  /** How many times `lookup` ran. */
  readonly lookups: () => number;
  close(): Promise<void>;
}

/** Retention of our server in the probe tests: short, so the probe can wait past it. */
export const OUR_RETENTION_MS = 1_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function counter() {
  let n = 0;
  return { next: () => ++n, count: () => n };
}

function v1Server(lookups: ReturnType<typeof counter>): McpServerV1 {
  const server = new McpServerV1({ name: 'probe-target-v1', version: '1.0.0' });
  server.registerTool(
    'lookup',
    { inputSchema: { ms: z.number() }, annotations: { readOnlyHint: true } },
    async ({ ms }, extra) => {
      const n = lookups.next();
      // Progress when asked: the probe counts a stream's events against the advertised max-events.
      const progressToken = extra._meta?.progressToken;
      if (progressToken !== undefined)
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken, progress: 1 },
        });
      await sleep(ms);
      return { content: [{ type: 'text', text: `lookup #${n}` }] };
    },
  );
  return server;
}

function v2Server(lookups: ReturnType<typeof counter>): McpServerV2 {
  const server = new McpServerV2({ name: 'probe-target-v2', version: '1.0.0' });
  server.registerTool(
    'lookup',
    { inputSchema: z.object({ ms: z.number() }), annotations: { readOnlyHint: true } },
    async ({ ms }) => {
      const n = lookups.next();
      await sleep(ms);
      return { content: [{ type: 'text', text: `lookup #${n}` }] };
    },
  );
  return server;
}

async function serve(handler: http.RequestListener, close: () => Promise<void>, lookups: () => number) {
  const server = http.createServer(handler);
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    lookups,
    async close() {
      await close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  } satisfies ProbedServer;
}

/** Ours: createContinuityServer, both eras, the continuity extension on 2026-07-28. */
export async function startOurServer(): Promise<ProbedServer> {
  const lookups = counter();
  const continuity = createContinuityServer({
    createMcpServer: () => v1Server(lookups),
    // One event kept per stream: a tool call's progress is evicted by its response, so the probe can see
    // a 410 with the count of events lost.
    eventLog: new MemoryEventLog({
      retentionMs: OUR_RETENTION_MS,
      maxEventsPerStream: 1,
      sweepIntervalMs: 100,
    }),
    modern: {
      createServer: () => v2Server(lookups),
      keyed: createKeyedRequests({
        log: new MemoryEventLog(),
        memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
      }),
    },
  });
  return serve(continuity.nodeHandler, () => continuity.close(), lookups.count);
}

/**
 * The official SDK v1 (1.32) as its example `simpleStreamableHttp` wires it: a `StreamableHTTPServerTransport`
 * per session, with the SDK's own example `InMemoryEventStore` for resumability (or, `eventStore: false`,
 * without one: the transport's default).
 */
export async function startSdkV1Server({ eventStore = true } = {}): Promise<ProbedServer> {
  const lookups = counter();
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const router = sdkSessionRouter({
    lookup: (id) => transports.get(id),
    initialize: async () => {
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        ...(eventStore ? { eventStore: new InMemoryEventStore() } : {}),
        onsessioninitialized: (id) => {
          transports.set(id, transport);
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) transports.delete(transport.sessionId);
      };
      await v1Server(lookups).connect(transport);
      return transport;
    },
  });
  return serve(
    (req, res) => void router(req, res),
    async () => {
      for (const t of [...transports.values()]) await t.close();
    },
    lookups.count,
  );
}

/** The official v2 server (2.4), as its README serves it: `createMcpHandler` under `toNodeHandler`, defaults. */
export async function startSdkV2Server(): Promise<ProbedServer> {
  const lookups = counter();
  const handler = createMcpHandler(() => v2Server(lookups));
  const node = toNodeHandler(handler);
  return serve(
    (req, res) => void node(req, res),
    () => handler.close(),
    lookups.count,
  );
}
