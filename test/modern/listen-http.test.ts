import http from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import type { ReconnectPolicy } from '../../machines/backoff.js';
import { RELIST_META_KEY, SUBSCRIPTION_ID_META_KEY } from '../../machines/client/listen.machine.js';
import { type ListenGap, reopeningListen } from '../../src/client/modern/listen.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { listenOnLoopback } from '../support/listen.js';
import { until as waitUntil } from '../support/until.js';

/**
 * The listen stream over real HTTP on 127.0.0.1: the official v2 server (`createMcpHandler`, served by
 * `@modelcontextprotocol/node`), a v2 `Client` pinned to 2026-07-28 whose `fetch` sends listen POSTs
 * through `reopeningListen`, and the FaultProxy between them to cut the stream.
 */

const POLICY: ReconnectPolicy = {
  initialDelayMs: 50,
  maxDelayMs: 400,
  factor: 2,
  maxRetries: 4,
  jitter: 'full',
};
/** Every wait is bounded; generous, the machine is shared. */
const WAIT_MS = 10_000;

interface World {
  handler: ReturnType<typeof createMcpHandler>;
  proxy: FaultProxy;
  close: () => Promise<void>;
  /** Listen POSTs that reached the fetch (first attempt and re-opens), with their ids. */
  listenIds: string[];
}

const worlds: World[] = [];
afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close();
});

async function startWorld(keepAliveMs = 0): Promise<World> {
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: 'listen-test', version: '1.0.0' });
      server.registerTool('echo', { description: 'echo' }, async () => ({
        content: [{ type: 'text', text: 'ok' }],
      }));
      return server;
    },
    { legacy: 'reject', keepAliveMs },
  );
  const node = toNodeHandler(handler);
  const httpServer = http.createServer((req, res) => void node(req, res));
  const port = await listenOnLoopback(httpServer);
  const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port } });
  const world: World = {
    handler,
    proxy,
    listenIds: [],
    close: async () => {
      await proxy.close();
      await handler.close().catch(() => undefined);
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
  worlds.push(world);
  return world;
}

/** The wrapper the real `continuityFetch` replaces at merge: listen POSTs go through `reopeningListen`. */
function listenFetch(
  world: World,
  hooks: {
    onGap?: (gap: ListenGap) => void;
    onRelist?: (what: readonly string[]) => void;
    stallTimeoutMs?: number;
  },
): typeof fetch {
  const counted: typeof fetch = async (input, init) => {
    const body = typeof init?.body === 'string' ? safeJson(init.body) : undefined;
    if (body?.method === 'subscriptions/listen') world.listenIds.push(String(body.id));
    return fetch(input, init);
  };
  return (input, init) =>
    reopeningListen({ input, init, fetch: counted, policy: POLICY, jitterSeed: 7, ...hooks });
}

const until = <T>(what: string, probe: () => T | undefined | false, ms = WAIT_MS) =>
  waitUntil(what, probe, ms);

describe('subscriptions/listen survives a cut (official v2 client and server, 2026-07-28)', () => {
  it('re-opens after a bounded delay, reports an unknown gap, re-lists, then delivers what the server publishes', async () => {
    const world = await startWorld();
    const gaps: ListenGap[] = [];
    const relists: (readonly string[])[] = [];
    const changes: string[][] = [];
    const client = new Client(
      { name: 'listen-client', version: '1.0.0' },
      {
        versionNegotiation: { mode: { pin: '2026-07-28' } },
        listChanged: {
          tools: {
            debounceMs: 0,
            onChanged: (error, tools) => {
              if (error === null && tools !== null) changes.push(tools.map((t) => t.name));
            },
          },
        },
      },
    );
    const transport = new StreamableHTTPClientTransport(world.proxy.url(), {
      fetch: listenFetch(world, { onGap: (g) => gaps.push(g), onRelist: (w) => relists.push(w) }),
    });
    const errors: Error[] = [];
    client.onerror = (e) => errors.push(e);
    await client.connect(transport);
    const subscription = client.autoOpenedSubscription;
    expect(subscription?.honoredFilter).toEqual({ toolsListChanged: true });
    let closedAs: string | undefined;
    void subscription?.closed.then((c) => {
      closedAs = c;
    });

    // Before the cut: a real list_changed is delivered and the SDK re-lists.
    world.handler.notify.toolsChanged();
    await until('the first re-list', () => changes.length >= 1);

    const cutAt = Date.now();
    expect(world.proxy.reset()).toBeGreaterThan(0);
    const gap = await until('onGap', () => gaps[0]);
    const reopenMs = gap.reopenedAt - cutAt;
    expect(gap.missed).toEqual({ kind: 'unknown' });
    expect(gap.relist).toEqual(['tools']);
    expect(gap.subscriptionId).toBe(world.listenIds[0]);
    expect(gap.attempts).toBeGreaterThanOrEqual(1);
    // The first re-open waits at most the first ceiling (50 ms) plus a connection: bounded well under 5 s.
    expect(reopenMs).toBeLessThan(5_000);
    expect(relists).toEqual([['tools']]);
    // The re-open is a new request with a new id.
    expect(world.listenIds.length).toBeGreaterThanOrEqual(2);
    expect(new Set(world.listenIds).size).toBe(world.listenIds.length);
    // The application was told to re-list, through its own handler: the SDK listed the tools again.
    await until('the re-list after the gap', () => changes.length >= 2);

    // After the re-open, what the server publishes is delivered on the same subscription.
    world.handler.notify.toolsChanged();
    await until('a list_changed published after the re-open', () => changes.length >= 3);
    expect(changes.every((names) => names.includes('echo'))).toBe(true);
    expect(closedAs).toBeUndefined();

    // Closing by the application ends it without re-opening.
    const before = world.listenIds.length;
    await subscription?.close();
    expect(await subscription?.closed).toBe('local');
    world.proxy.reset();
    // Past the longest backoff ceiling twice over, no listen POST was made.
    await new Promise((r) => setTimeout(r, 2 * POLICY.maxDelayMs));
    expect(world.listenIds.length).toBe(before);
    // The v2 client never saw the break: no transport error, no stream end.
    expect(errors.map((e) => e.message)).toEqual([]);
    await client.close();
    console.log(`listen re-opened ${reopenMs} ms after the cut; ${world.listenIds.length} listen POSTs`);
  });

  it('a black-holed listen stream (no reset, just silence) is re-opened once the keep-alives stop', async () => {
    const world = await startWorld(100);
    const gaps: ListenGap[] = [];
    const changes: number[] = [];
    const client = new Client(
      { name: 'listen-client', version: '1.0.0' },
      {
        versionNegotiation: { mode: { pin: '2026-07-28' } },
        listChanged: { tools: { debounceMs: 0, onChanged: () => changes.push(Date.now()) } },
      },
    );
    await client.connect(
      new StreamableHTTPClientTransport(world.proxy.url(), {
        fetch: listenFetch(world, { onGap: (g) => gaps.push(g), stallTimeoutMs: 1_000 }),
      }),
    );
    // Past several keep-alives, the stream is not taken for dead.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(world.listenIds).toHaveLength(1);
    const holedAt = Date.now();
    expect(world.proxy.blackhole()).toBeGreaterThan(0);
    const gap = await until('onGap after the stall', () => gaps[0]);
    const reopenMs = gap.reopenedAt - holedAt;
    expect(gap.missed).toEqual({ kind: 'unknown' });
    // At least the stall timeout, then at most a ceiling and a connection (generous under load).
    expect(reopenMs).toBeGreaterThanOrEqual(1_000);
    expect(reopenMs).toBeLessThan(8_000);
    await until('the re-list', () => changes.length >= 1);
    world.handler.notify.toolsChanged();
    await until('a list_changed after the re-open', () => changes.length >= 2);
    await client.autoOpenedSubscription?.close();
    await client.close();
    console.log(
      `black-holed listen stream re-opened ${reopenMs} ms after the black hole (stall 1000 ms, ${gap.attempts} attempts)`,
    );
  });

  it('one body across the cut: the ack once, the re-list marked as ours, everything stamped with the first id', async () => {
    const world = await startWorld();
    const gaps: ListenGap[] = [];
    const abort = new AbortController();
    const listen = {
      jsonrpc: '2.0',
      id: 'listen:first',
      method: 'subscriptions/listen',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1.0.0' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
        notifications: { toolsListChanged: true },
      },
    };
    const response = await reopeningListen({
      input: world.proxy.url(),
      init: {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'subscriptions/listen',
        },
        body: JSON.stringify(listen),
        signal: abort.signal,
      },
      fetch: (input, init) => {
        const body = typeof init?.body === 'string' ? safeJson(init.body) : undefined;
        if (body?.method === 'subscriptions/listen') world.listenIds.push(String(body.id));
        return fetch(input, init);
      },
      policy: POLICY,
      jitterSeed: 3,
      onGap: (g) => gaps.push(g),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const messages = readMessages(response);

    await until('the ack', () => messages.list.length >= 1);
    world.proxy.reset();
    await until('onGap', () => gaps[0]);
    world.handler.notify.toolsChanged();
    await until('three messages', () => messages.list.length >= 3);
    abort.abort();
    await until('the body to end', () => messages.ended);

    const [ack, relist, published] = messages.list;
    expect(ack?.method).toBe('notifications/subscriptions/acknowledged');
    expect(relist?.method).toBe('notifications/tools/list_changed');
    expect(relist?.params?._meta?.[RELIST_META_KEY]).toBe(true);
    expect(published?.method).toBe('notifications/tools/list_changed');
    expect(published?.params?._meta?.[RELIST_META_KEY]).toBeUndefined();
    for (const m of messages.list) expect(m.params?._meta?.[SUBSCRIPTION_ID_META_KEY]).toBe('listen:first');
    // The server saw the re-open under a new id; the body never showed it.
    expect(world.listenIds[0]).toBe('listen:first');
    expect(world.listenIds[1]).toMatch(/^listen:first~reopen-\d+$/);
    expect(messages.list.filter((m) => m.method === 'notifications/subscriptions/acknowledged')).toHaveLength(
      1,
    );
  });

  it('a first attempt that is refused is passed through unchanged, and nothing is retried', async () => {
    const world = await startWorld();
    world.proxy.failNext(1, 503);
    const response = await reopeningListen({
      input: world.proxy.url(),
      init: {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 'l',
          method: 'subscriptions/listen',
          params: { notifications: {} },
        }),
      },
      fetch: (input, init) => {
        world.listenIds.push('l');
        return fetch(input, init);
      },
      policy: POLICY,
    });
    expect(response.status).toBe(503);
    await response.text();
    expect(world.listenIds).toEqual(['l']);
  });
});

interface Seen {
  method?: string;
  params?: { _meta?: Record<string, unknown> };
}

function readMessages(response: Response): { list: Seen[]; ended: boolean } {
  const out = { list: [] as Seen[], ended: false };
  void (async () => {
    const reader = response.body?.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    try {
      for (let i = 0; reader !== undefined && i < 10_000; i++) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = block
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trim())
            .join('\n');
          if (data !== '') out.list.push(JSON.parse(data) as Seen);
        }
      }
    } catch {
      // Aborted: the end of the body.
    }
    out.ended = true;
  })();
  return out;
}

function safeJson(text: string): { method?: string; id?: unknown } | undefined {
  try {
    return JSON.parse(text) as { method?: string; id?: unknown };
  } catch {
    return undefined;
  }
}
