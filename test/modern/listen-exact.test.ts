import { createServer, type Server as HttpServer } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { ReconnectPolicy } from '../../machines/backoff.js';
import {
  CONTINUITY_EXTENSION,
  DEFAULT_CONTINUITY_SETTINGS,
  ListenMeta,
} from '../../machines/continuity-extension.js';
import type { ListenLogLimits } from '../../machines/server/listen-log.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import type { ListenGap } from '../../src/client/modern/listen.js';
import { ContinuityMetrics } from '../../src/metrics/index.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { listenOnLoopback } from '../support/listen.js';
import { listenRequestInit } from '../support/listen-request.js';
import { until as waitUntil } from '../support/until.js';

/**
 * Exact listen gaps (docs/continuity-extension.md §12), end to end over real HTTP on 127.0.0.1: the
 * official v2 `Client` pinned to 2026-07-28 with `continuityFetch()` (it opens `subscriptions/listen` for
 * its list-changed handlers), the FaultProxy, and `createContinuityServer` serving 2026-07-28 with the
 * continuity extension on the official v2 `McpServer`. Changes are published while the stream is down
 * (the proxy answers 503 to every re-open for the outage), so they can only be counted, not delivered.
 */

const POLICY: ReconnectPolicy = {
  initialDelayMs: 50,
  maxDelayMs: 300,
  factor: 2,
  maxRetries: 4,
  jitter: 'full',
};
/** Every wait is bounded and generous: the machine is shared. */
const WAIT_MS = 15_000;
const OUTAGE_MS = 600;

function modernServer(): McpServer {
  const server = new McpServer({ name: 'listen-exact', version: '1.0.0' });
  server.registerTool('echo', { description: 'echo' }, async () => ({
    content: [{ type: 'text', text: 'ok' }],
  }));
  // Prompts change too, but the client subscribes to tools only: those changes are not its to count.
  server.registerPrompt('hello', { description: 'hello' }, async () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }],
  }));
  return server;
}

interface World {
  continuity: ContinuityServer;
  proxy: FaultProxy;
  gaps: ListenGap[];
  relists: (readonly string[])[];
  /** Each time the SDK re-listed the tools (its list-changed handler ran). */
  lists: number;
  /** Listen POSTs as the server got them: their `_meta`. */
  listenMetas: Record<string, unknown>[];
  /** The client's figures (`continuityFetch({ metrics })`). */
  metrics: ContinuityMetrics;
  client: Client;
  restart(): Promise<void>;
  close(): Promise<void>;
}

const worlds: World[] = [];
afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close();
});

async function startWorld(listenLog?: Partial<ListenLogLimits>): Promise<World> {
  const listenMetas: Record<string, unknown>[] = [];
  const build = () =>
    createContinuityServer({
      createMcpServer: () => new McpServerV1({ name: 'legacy', version: '1.0.0' }),
      heartbeatMs: 0,
      modern: {
        createServer: modernServer,
        keyed: createKeyedRequests({
          log: new MemoryEventLog(),
          memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
        }),
        ...(listenLog ? { listenLog } : {}),
      },
    });
  let continuity = build();
  // The HTTP server stays; a restart swaps the continuity server behind it (a new process's state).
  const http: HttpServer = createServer((req, res) => {
    if (req.method === 'POST') {
      let text = '';
      req.on('data', (c) => {
        text += c;
      });
      req.on('end', () => {
        try {
          const body = JSON.parse(text) as { method?: string; params?: { _meta?: Record<string, unknown> } };
          if (body.method === 'subscriptions/listen') listenMetas.push(body.params?._meta ?? {});
        } catch {
          // Not JSON: the server answers it.
        }
      });
    }
    continuity.nodeHandler(req, res);
  });
  const port = await listenOnLoopback(http);
  const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port } });
  const world: World = {
    get continuity() {
      return continuity;
    },
    proxy,
    gaps: [],
    relists: [],
    lists: 0,
    listenMetas,
    metrics: new ContinuityMetrics(),
    client: undefined as unknown as Client,
    restart: async () => {
      const old = continuity;
      continuity = build();
      proxy.reset();
      await old.close();
    },
    close: async () => {
      await world.client.close().catch(() => undefined);
      await proxy.close();
      await continuity.close();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    },
  };
  world.client = new Client(
    { name: 'listen-exact', version: '1.0.0' },
    {
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      listChanged: {
        tools: {
          debounceMs: 0,
          onChanged: (error) => {
            if (error === null) world.lists++;
          },
        },
      },
    },
  );
  await world.client.connect(
    new StreamableHTTPClientTransport(proxy.url(), {
      fetch: continuityFetch({
        listenPolicy: POLICY,
        metrics: world.metrics,
        onListenGap: (g) => world.gaps.push(g),
        onRelist: (w) => world.relists.push(w),
      }),
    }),
  );
  worlds.push(world);
  expect(world.client.autoOpenedSubscription?.honoredFilter).toEqual({ toolsListChanged: true });
  return world;
}

const until = <T>(what: string, probe: () => T | undefined | false, ms = WAIT_MS) =>
  waitUntil(what, probe, ms);

/** Cuts the listen stream and keeps every re-open away for the outage, publishing `during` meanwhile. */
async function gapWith(w: World, during: (c: ContinuityServer) => void): Promise<ListenGap> {
  const before = w.gaps.length;
  w.proxy.outage(OUTAGE_MS);
  during(w.continuity);
  return until('the gap report', () => w.gaps[before]);
}

describe('subscriptions/listen with the continuity extension: the gap is exact', () => {
  it('counts what was published while the stream was down (only what the filter accepts), re-lists only then', async () => {
    const w = await startWorld();
    // Live: delivered on the stream, the SDK re-lists; its position is what the re-open will start from.
    w.continuity.notifyModern.toolsChanged();
    await until('the live change', () => w.lists >= 1);

    const gap = await gapWith(w, (c) => {
      c.notifyModern.toolsChanged();
      c.notifyModern.promptsChanged();
      c.notifyModern.toolsChanged();
      c.notifyModern.toolsChanged();
      c.notifyModern.promptsChanged();
    });
    expect(gap.missed).toEqual({ kind: 'exact', count: 3 });
    expect(gap.relist).toEqual(['tools']);
    expect(w.relists).toEqual([['tools']]);
    // The application was told once, through its own handler: the SDK listed the tools again.
    await until('the re-list after the gap', () => w.lists >= 2);
    // The re-open said where its predecessor stopped.
    expect(w.listenMetas.at(-1)?.[ListenMeta.lastPosition]).toMatch(/\.\d+$/);

    // A cut with nothing published: an exact 0, and no re-list is asked for.
    const quiet = await gapWith(w, () => undefined);
    expect(quiet.missed).toEqual({ kind: 'exact', count: 0 });
    expect(quiet.relist).toEqual([]);
    expect(w.relists).toEqual([['tools']]);
    // The figures saw both re-opens, as exact gaps, and the changes they missed.
    const figures = w.metrics.figures();
    expect(figures['mcp_continuity.client.listen_gaps{reason=exact}']).toBe(2);
    expect(figures['mcp_continuity.client.listen_missed_changes']).toBe(3);
    expect(figures['mcp_continuity.client.listen_reopen_attempts']).toBeGreaterThanOrEqual(2);

    // The subscription still delivers what is published after the re-open, on the same SDK subscription.
    const lists = w.lists;
    w.continuity.notifyModern.toolsChanged();
    await until('a change after the re-opens', () => w.lists > lists);
    expect(w.client.autoOpenedSubscription?.honoredFilter).toEqual({ toolsListChanged: true });
    console.log(
      `exact listen gaps: ${w.gaps.map((g) => (g.missed.kind === 'exact' ? g.missed.count : '?')).join(', ')}; ` +
        `re-opened ${w.gaps.map((g) => g.reopenedAt - g.brokenAt).join(', ')} ms after the cut`,
    );
  });

  it('a restarted server (another log) cannot vouch: the gap is unknown and everything is re-listed', async () => {
    const w = await startWorld();
    await w.restart();
    const gap = await until('the gap report', () => w.gaps[0]);
    expect(gap.missed).toEqual({ kind: 'unknown' });
    expect(w.relists).toEqual([['tools']]);
    await until('the re-list after the gap', () => w.lists >= 1);
  });

  it('more changes than the log keeps since the last position: unknown, not a wrong count', async () => {
    const w = await startWorld({ maxChanges: 2 });
    const gap = await gapWith(w, (c) => {
      for (let i = 0; i < 4; i++) c.notifyModern.toolsChanged();
    });
    expect(gap.missed).toEqual({ kind: 'unknown' });
    expect(gap.relist).toEqual(['tools']);
    // Within the log's reach again: exact.
    const next = await gapWith(w, (c) => c.notifyModern.toolsChanged());
    expect(next.missed).toEqual({ kind: 'exact', count: 1 });
  });
});

describe('the listen part on the wire (raw POSTs to createContinuityServer)', () => {
  const declared = {
    'io.modelcontextprotocol/clientCapabilities': { extensions: { [CONTINUITY_EXTENSION]: {} } },
  };
  const undeclared = { 'io.modelcontextprotocol/clientCapabilities': {} };

  /** POSTs a listen request; returns a reader of its SSE messages (bounded waits). */
  async function listen(url: URL, meta: Record<string, unknown>, id = 'L1') {
    const abort = new AbortController();
    const response = await fetch(url, listenRequestInit(id, meta, abort.signal));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    const next = async (): Promise<{ method?: string; params?: { _meta?: Record<string, unknown> } }> => {
      for (let i = 0; i < 1_000; i++) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = event.split('\n').find((l) => l.startsWith('data:'));
          if (data) return JSON.parse(data.slice(5));
          continue;
        }
        const chunk = await Promise.race([
          reader.read(),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no event in 10 s')), 10_000)),
        ]);
        if (chunk.done) throw new Error('the stream ended');
        buffer += decoder.decode(chunk.value, { stream: true });
      }
      throw new Error('too many frames');
    };
    return { next, close: () => abort.abort() };
  }

  let continuity: ContinuityServer | undefined;
  let http: HttpServer | undefined;
  afterEach(async () => {
    await continuity?.close();
    http?.closeAllConnections();
    if (http) await new Promise((r) => http?.close(r));
  });

  /** When set, the next modern request's server is built only once it resolves (the SDK awaits it). */
  let gate: Promise<void> | undefined;
  async function start(): Promise<{ url: URL; server: ContinuityServer }> {
    const server = createContinuityServer({
      createMcpServer: () => new McpServerV1({ name: 'legacy', version: '1.0.0' }),
      heartbeatMs: 0,
      modern: {
        createServer: async () => {
          const wait = gate;
          gate = undefined;
          await wait;
          return modernServer();
        },
        keyed: createKeyedRequests({
          log: new MemoryEventLog(),
          memo: new MemoryMemoStore({ memoWindowMs: 60_000 }),
        }),
      },
    });
    continuity = server;
    http = createServer(server.nodeHandler);
    const port = await listenOnLoopback(http);
    return { url: new URL(`http://127.0.0.1:${port}/mcp`), server };
  }

  it('positions only for a request that declared the extension; the SDK’s own _meta kept', async () => {
    const { url, server } = await start();
    const withExt = await listen(url, declared, 'with');
    const without = await listen(url, undeclared, 'without');
    const ackWith = await withExt.next();
    const ackWithout = await without.next();
    expect(ackWith.method).toBe('notifications/subscriptions/acknowledged');
    expect(ackWith.params?._meta).toMatchObject({ 'io.modelcontextprotocol/subscriptionId': 'with' });
    expect(ackWith.params?._meta?.[ListenMeta.position]).toMatch(/^[A-Za-z0-9_-]+\.0$/);
    expect(ackWithout.params?._meta).toEqual({ 'io.modelcontextprotocol/subscriptionId': 'without' });

    server.notifyModern.toolsChanged();
    const changeWith = await withExt.next();
    const changeWithout = await without.next();
    expect(changeWith.method).toBe('notifications/tools/list_changed');
    expect(changeWith.params?._meta?.[ListenMeta.position]).toMatch(/\.1$/);
    expect(changeWithout.params?._meta).toEqual({ 'io.modelcontextprotocol/subscriptionId': 'without' });
    withExt.close();
    without.close();
  });

  it.each([
    ['another epoch', 'someone-else.0'],
    ['a long string', 'a'.repeat(10_000)],
    ['an object', { seq: 1 }],
    ['null', null],
  ])('a lastPosition that is %s is served, without a missed count', async (_, lastPosition) => {
    const { url, server } = await start();
    const stream = await listen(url, { ...declared, [ListenMeta.lastPosition]: lastPosition });
    const ack = await stream.next();
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    expect(ack.params?._meta?.[ListenMeta.position]).toMatch(/\.0$/);
    expect(ack.params?._meta).not.toHaveProperty(ListenMeta.missed);
    server.notifyModern.toolsChanged();
    expect((await stream.next()).method).toBe('notifications/tools/list_changed');
    stream.close();
  });

  it('a lastPosition of this log but ahead of its head is served, without a missed count', async () => {
    const { url } = await start();
    const first = await listen(url, declared, 'a');
    const position = String((await first.next()).params?._meta?.[ListenMeta.position]);
    first.close();
    const epoch = position.slice(0, position.lastIndexOf('.'));
    const ahead = await listen(url, { ...declared, [ListenMeta.lastPosition]: `${epoch}.99` }, 'b');
    const ack = await ahead.next();
    expect(ack.params?._meta?.[ListenMeta.position]).toBe(`${epoch}.0`);
    expect(ack.params?._meta).not.toHaveProperty(ListenMeta.missed);
    ahead.close();
  });

  it('a re-open from its own position is told the exact count, from the SDK’s subscribe on', async () => {
    const { url, server } = await start();
    const first = await listen(url, declared, 'a');
    await first.next();
    server.notifyModern.toolsChanged();
    const seen = await first.next();
    const last = seen.params?._meta?.[ListenMeta.position];
    first.close();
    server.notifyModern.toolsChanged();
    server.notifyModern.promptsChanged();
    server.notifyModern.toolsChanged();
    const second = await listen(url, { ...declared, [ListenMeta.lastPosition]: last }, 'b');
    const ack = await second.next();
    expect(ack.params?._meta?.[ListenMeta.missed]).toEqual({ count: 2, relist: ['tools'] });
    expect(ack.params?._meta?.[ListenMeta.position]).toMatch(/\.4$/);
    second.close();
  });

  it('a change published after the re-open arrived but before the SDK subscribed it is counted, not lost', async () => {
    const { url, server } = await start();
    const first = await listen(url, declared, 'a');
    const ack = await first.next();
    const last = ack.params?._meta?.[ListenMeta.position];
    first.close();
    let open: () => void = () => undefined;
    gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    // The re-open arrives; the SDK is still building its server when the change is published.
    const reopening = listen(url, { ...declared, [ListenMeta.lastPosition]: last }, 'b');
    await until('the re-open to reach the factory', () => gate === undefined);
    server.notifyModern.toolsChanged();
    open();
    const second = await reopening;
    const reack = await second.next();
    // The stream subscribed after the change, so the change is not on it: it is in the count.
    expect(reack.params?._meta?.[ListenMeta.position]).toMatch(/\.1$/);
    expect(reack.params?._meta?.[ListenMeta.missed]).toEqual({ count: 1, relist: ['tools'] });
    second.close();
  });
});
