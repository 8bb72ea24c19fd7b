import http from 'node:http';
import v8 from 'node:v8';
import vm from 'node:vm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ContinuityMetrics, createContinuityServer } from '../../src/index.js';
import { freshSessionWorks } from '../support/fresh-session.js';
import { listenOnLoopback } from '../support/listen.js';
import { rawExchange } from '../support/raw-http.js';
import { type DemoWorld, demoMcpServer } from './harness.js';

/**
 * A fuzzer against a running server: fast-check makes raw HTTP requests (methods, targets, headers,
 * bodies, cursors, protocol versions, principals, framing) and sends them over raw sockets, a batch at a
 * time. After every batch: nothing answered 5xx, nothing reached `onError`, and a fresh session (the
 * SDK Client) works. After the run: every session is gone one TTL (plus a sweep) later, and the heap is
 * back near where it started.
 *
 * Budget: `MCPC_FUZZ_RUNS` batches (default 100, a few seconds); a long run: `MCPC_FUZZ_RUNS=1000`.
 */
const RUNS = Number(process.env.MCPC_FUZZ_RUNS ?? 100);
const BATCH = 12;
const LANES = 4;
// Long enough that a fresh SDK session outlives the gap between its initialize and its next request on a
// loaded machine (at 300 ms, load 25 expired one in between: a 404 to `notifications/initialized`).
const TTL_MS = 1_500;

/** A full GC before each heap reading, so the figure is what is retained, not garbage not yet collected. */
function collectGarbage(): () => void {
  if (global.gc) return global.gc;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

const INIT_PARAMS = {
  protocolVersion: '2025-11-25',
  capabilities: {},
  clientInfo: { name: 'fuzz', version: '1' },
};

/** A value that names something live at send time: an index into what earlier answers revealed. */
type Pick = { readonly pick: number };

/** Mostly what a working client sends, sometimes something hostile: requests get deep enough to matter. */
const mostly = <T>(usual: fc.Arbitrary<T>, hostile: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 6, arbitrary: usual }, { weight: 1, arbitrary: hostile });

const idArb = mostly<unknown>(
  fc.oneof(fc.integer({ min: 0, max: 40 }), fc.string({ minLength: 1, maxLength: 4 })),
  fc.constantFrom<unknown>(1.5, null, true, {}, [], 2 ** 53, -1, 'x'.repeat(300)),
);
const toolCall = fc.record({
  name: fc.constantFrom('echo', 'charge', 'chatty', 'slow', 'nope'),
  arguments: fc.oneof(
    fc.record({ text: fc.string({ maxLength: 8 }) }),
    fc.record({ key: fc.string({ maxLength: 4 }), ms: fc.integer({ min: 0, max: 150 }) }),
    fc.record({ count: fc.integer({ min: 0, max: 5 }), intervalMs: fc.integer({ min: 0, max: 20 }) }),
    fc.record({ ms: fc.integer({ min: 0, max: 150 }) }),
    fc.anything({ maxDepth: 2 }),
  ),
});
const message = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      jsonrpc: fc.constant('2.0'),
      id: idArb,
      method: fc.constant('initialize'),
      params: fc.constant<unknown>(INIT_PARAMS),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      jsonrpc: fc.constant('2.0'),
      id: idArb,
      method: fc.constant('tools/call'),
      params: toolCall,
    }),
  },
  fc.record({
    jsonrpc: fc.constant('2.0'),
    id: idArb,
    method: fc.constantFrom('tools/list', 'ping', 'nope/nope'),
  }),
  fc.record({ jsonrpc: fc.constant('2.0'), method: fc.constant('notifications/initialized') }),
  {
    weight: 2,
    arbitrary: fc.record({
      jsonrpc: fc.constant('2.0'),
      method: fc.constant('notifications/cancelled'),
      params: fc.record({ requestId: idArb, reason: fc.string({ maxLength: 4 }) }),
    }),
  },
  fc.record({ jsonrpc: fc.constant('2.0'), id: idArb, result: fc.anything({ maxDepth: 2 }) }),
  // Shapes the SDK's schema rejects.
  fc.record(
    {
      jsonrpc: fc.constantFrom<unknown>('2.0', '1.0', 2),
      id: idArb,
      method: fc.anything({ maxDepth: 1 }),
      params: fc.anything({ maxDepth: 2 }),
      extra: fc.anything({ maxDepth: 1 }),
    },
    { requiredKeys: [] },
  ),
);
const body = fc.oneof(
  { weight: 12, arbitrary: message.map((m) => JSON.stringify(m)) },
  { weight: 1, arbitrary: fc.array(message, { maxLength: 3 }).map((m) => JSON.stringify(m)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 100, max: 20_000 }).map((n) => `${'['.repeat(n)}${']'.repeat(n)}`),
  },
  { weight: 1, arbitrary: fc.constant('') },
);
const INHERIT = '(the session creator)';
const live = fc.record({ pick: fc.nat() }) as fc.Arbitrary<Pick | string>;

/** A request a working client would send: the base every hostile request is mutated from. */
const usual = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      method: fc.constant('POST'),
      session: fc.constant<Pick | string | undefined>(undefined),
      body: message.map((m) => JSON.stringify({ ...m, method: 'initialize', params: INIT_PARAMS, id: 1 })),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      method: fc.constant('POST'),
      session: live,
      body: message.map((m) => JSON.stringify(m)),
    }),
  },
  { weight: 1, arbitrary: fc.record({ method: fc.constant('GET'), session: live, body: fc.constant('') }) },
  {
    weight: 1,
    arbitrary: fc.record({ method: fc.constant('DELETE'), session: live, body: fc.constant('') }),
  },
);
const base = fc.record({
  usual,
  cursor: fc.oneof(
    { weight: 3, arbitrary: fc.constant<Pick | string | undefined>(undefined) },
    { weight: 1, arbitrary: live },
  ),
  /** Of an initialize; a request in a session is sent as its creator unless a mutation changes it. */
  principal: fc.constantFrom<string | undefined>('alice', 'bob', undefined),
  protocolVersion: fc.constantFrom<string | undefined>('2025-11-25', '2025-06-18', undefined),
  connection: fc.constantFrom('close', 'close', 'keep-alive'),
});
/** What a hostile client changes: one field at a time, up to three. */
const mutation = fc.oneof(
  fc.record({
    field: fc.constant('method'),
    value: fc.constantFrom('PUT', 'OPTIONS', 'HEAD', 'PATCH', 'BREW', 'GET', 'POST'),
  }),
  fc.record({
    field: fc.constant('target'),
    value: fc.constantFrom(
      '/mcp?x=1',
      '/other',
      '*',
      'http://[::1/mcp',
      'http://127.0.0.1/mcp',
      '//mcp',
      '/mcp/../mcp',
      '/%zz',
    ),
  }),
  fc.record({ field: fc.constant('version'), value: fc.constant('1.0') }),
  fc.record({
    field: fc.constant('host'),
    value: fc.constantFrom<string | null>(
      null,
      '127.0.0.1:abc',
      '[::1]evil',
      'localhost.evil',
      'localhost',
      '[::1]:1',
      '127.0.0.1:99999',
    ),
  }),
  fc.record({
    field: fc.constant('accept'),
    value: fc.constantFrom<string | null>(null, 'text/event-stream', 'application/json', '*/*', 'text/html'),
  }),
  fc.record({
    field: fc.constant('contentType'),
    value: fc.constantFrom<string | null>(
      null,
      'application/json; charset=utf-8',
      'application/jsonfoo',
      'text/plain',
    ),
  }),
  fc.record({ field: fc.constant('protocolVersion'), value: fc.constantFrom('1999-01-01', '') }),
  fc.record({
    field: fc.constant('session'),
    value: fc.oneof(live, fc.constantFrom<Pick | string | undefined>(undefined, 'nope', 'x'.repeat(200))),
  }),
  fc.record({ field: fc.constant('cursor'), value: fc.oneof(live, fc.string({ maxLength: 30 })) }),
  fc.record({ field: fc.constant('principal'), value: fc.constantFrom('deny', 'mallory', 'p'.repeat(500)) }),
  fc.record({
    field: fc.constant('origin'),
    value: fc.constantFrom('http://localhost:1', 'https://evil.example', 'null'),
  }),
  fc.record({ field: fc.constant('body'), value: body }),
  fc.record({
    field: fc.constant('framing'),
    value: fc.constantFrom('chunked', 'short-then-end', 'short-then-reset', 'broken-chunked'),
  }),
);
const spec = fc.tuple(base, fc.array(mutation, { maxLength: 3 })).map(([b, mutations]) => {
  const out: Record<string, unknown> = {
    method: b.usual.method,
    target: '/mcp',
    version: '1.1',
    host: 'own',
    accept: b.usual.method === 'POST' ? 'application/json, text/event-stream' : 'text/event-stream',
    contentType: b.usual.method === 'POST' ? 'application/json' : null,
    protocolVersion: b.protocolVersion,
    session: b.usual.session,
    cursor: b.usual.method === 'GET' ? b.cursor : undefined,
    principal: b.usual.session === undefined ? b.principal : INHERIT,
    origin: undefined,
    connection: b.connection,
    body: b.usual.body,
    framing: 'length',
  };
  for (const m of mutations) out[m.field] = m.value;
  return out as {
    method: string;
    target: string;
    version: string;
    host: string | null;
    accept: string | null;
    contentType: string | null;
    protocolVersion: string | undefined;
    session: Pick | string | undefined;
    cursor: Pick | string | undefined;
    principal: string | undefined;
    origin: string | undefined;
    connection: string;
    body: string;
    framing: string;
  };
});
/** A whole response arrived (chunked: the last chunk; else its Content-Length), so the next request need not wait. */
function responseComplete(raw: string): boolean {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return false;
  const head = raw.slice(0, end);
  if (/transfer-encoding: chunked/i.test(head)) return raw.endsWith('\r\n0\r\n\r\n');
  const length = /content-length: (\d+)/i.exec(head);
  return length !== null && raw.length - end - 4 >= Number(length[1]);
}

type Spec = typeof spec extends fc.Arbitrary<infer T> ? T : never;

describe('hostile input (fuzz)', () => {
  const errors: unknown[] = [];
  const world: DemoWorld = { effects: new Map(), servers: [] };
  const metrics = new ContinuityMetrics();
  const continuity = createContinuityServer({
    createMcpServer: () => demoMcpServer(world),
    heartbeatMs: 100,
    sessionIdleTtlMs: TTL_MS,
    metrics,
    onError: (e) => errors.push(e),
    authenticate: (r) => {
      const user = r.headers.get('x-user');
      return user === 'deny' ? null : { principal: user ?? 'anonymous' };
    },
  });
  const server = http.createServer(continuity.nodeHandler);
  let port = 0;
  const sessions: string[] = [];
  /** The principal each session was made by. */
  const creators = new Map<string, string | undefined>();
  const cursors: string[] = [];
  let seen = 0;
  const statuses = new Map<string, number>();
  beforeAll(async () => {
    port = await listenOnLoopback(server);
  });
  afterAll(async () => {
    await continuity.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  /** A picked session or cursor: one of the last few seen, most of which are still alive (TTL 1.5 s). */
  const resolve = (v: Pick | string | undefined, from: string[]): string | undefined =>
    typeof v === 'object' ? from[from.length - 1 - (v.pick % Math.min(4, Math.max(1, from.length)))] : v;

  function render(s: Spec): ReturnType<typeof frame> & { principal?: string } {
    const principal =
      s.principal === INHERIT ? creators.get(resolve(s.session, sessions) ?? '') : s.principal;
    return { ...frame(s, principal), principal };
  }

  function frame(
    s: Spec,
    principal: string | undefined,
  ): { head: string; rest?: string; after?: 'end' | 'destroy'; principal?: string } {
    const lines: string[] = [];
    const host = s.host === 'own' ? `127.0.0.1:${port}` : s.host;
    if (host !== null) lines.push(`Host: ${host}`);
    if (s.accept !== null) lines.push(`Accept: ${s.accept}`);
    if (s.contentType !== null) lines.push(`Content-Type: ${s.contentType}`);
    if (s.protocolVersion !== undefined) lines.push(`MCP-Protocol-Version: ${s.protocolVersion}`);
    const session =
      s.body.includes('"initialize"') && typeof s.session === 'object'
        ? undefined
        : resolve(s.session, sessions);
    if (session !== undefined) lines.push(`Mcp-Session-Id: ${session}`);
    const cursor = resolve(s.cursor, cursors);
    if (cursor !== undefined) lines.push(`Last-Event-ID: ${cursor}`);
    if (principal !== undefined) lines.push(`X-User: ${principal}`);
    if (s.origin !== undefined) lines.push(`Origin: ${s.origin}`);
    lines.push(`Connection: ${s.connection}`);
    const bytes = Buffer.from(s.body);
    const start = `${s.method} ${s.target} HTTP/${s.version}\r\n`;
    switch (s.framing) {
      case 'length':
        return {
          head: `${start}${[...lines, `Content-Length: ${bytes.length}`].join('\r\n')}\r\n\r\n${s.body}`,
        };
      case 'short-then-end':
      case 'short-then-reset':
        return {
          head: `${start}${[...lines, `Content-Length: ${bytes.length + 10}`].join('\r\n')}\r\n\r\n`,
          rest: s.body,
          after: s.framing === 'short-then-end' ? 'end' : 'destroy',
        };
      case 'chunked':
        return {
          head: `${start}${[...lines, 'Transfer-Encoding: chunked'].join('\r\n')}\r\n\r\n${bytes.length.toString(16)}\r\n${s.body}\r\n0\r\n\r\n`,
        };
      default:
        return {
          head: `${start}${[...lines, 'Transfer-Encoding: chunked'].join('\r\n')}\r\n\r\nzz\r\n${s.body}\r\n`,
        };
    }
  }

  async function send(s: Spec): Promise<number | undefined> {
    const r = render(s);
    const exchange = await rawExchange(port, r.head, {
      rest: r.rest,
      gapMs: 10,
      after: r.after,
      timeoutMs: 250,
      until: responseComplete,
    });
    for (const m of exchange.raw.matchAll(/mcp-session-id: (\S+)/gi))
      if (m[1] && !creators.has(m[1])) {
        sessions.push(m[1]);
        creators.set(m[1], r.principal);
        seen++;
      }
    if (sessions.length > 50)
      for (const gone of sessions.splice(0, sessions.length - 50)) creators.delete(gone);
    for (const m of exchange.raw.matchAll(/^id: (\S+)$/gm)) if (m[1]) cursors.push(m[1]);
    if (cursors.length > 50) cursors.splice(0, cursors.length - 50);
    const key = String(exchange.status ?? 'none');
    statuses.set(key, (statuses.get(key) ?? 0) + 1);
    return exchange.status;
  }

  it(`${RUNS} batches of ${BATCH} raw requests: never a 5xx or an error, a fresh session always works; afterwards no session and no heap is left`, async () => {
    await freshSessionWorks(port); // warm-up: the first session pays for loading code
    const gc = collectGarbage();
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    const started = Date.now();
    let batches = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(spec, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
        batches++;
        // Four lanes: concurrent requests, yet most picks find what an earlier request just made.
        const answered: (number | undefined)[] = [];
        const lanes = Array.from({ length: LANES }, async (_, lane) => {
          for (let i = lane; i < batch.length; i += LANES) answered.push(await send(batch[i] as Spec));
        });
        await Promise.all(lanes);
        for (const status of answered)
          expect(status === undefined || status < 500, `status ${status}`).toBe(true);
        expect(errors).toEqual([]);
        await freshSessionWorks(port);
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
    const fuzzMs = Date.now() - started;
    // Every session made during the run is gone one TTL and one sweep later (a generous margin for CI).
    const runEnded = Date.now();
    await vi.waitFor(() => expect(continuity.sessionCount()).toBe(0), {
      timeout: 4 * TTL_MS + 5_000,
      interval: 25,
    });
    const drainedMs = Date.now() - runEnded;
    world.servers.length = 0;
    await new Promise((r) => setTimeout(r, 50));
    gc();
    const heapAfter = process.memoryUsage().heapUsed;
    const created = seen;
    const line = `fuzz: ${batches} batches × ${BATCH} requests in ${fuzzMs} ms; ${created} sessions seen (≥), all gone ${drainedMs} ms after the run; heap ${(heapBefore / 2 ** 20).toFixed(1)} → ${(heapAfter / 2 ** 20).toFixed(1)} MiB after a full GC; statuses ${JSON.stringify(Object.fromEntries(statuses))}`;
    console.log(line);
    expect(batches).toBe(RUNS);
    // 1,000 batches retained 7 MiB, 100 batches 5 MiB (code, SDK and metrics caches): not per session.
    expect(heapAfter - heapBefore).toBeLessThan(20 * 2 ** 20);
  }, 600_000);
});
