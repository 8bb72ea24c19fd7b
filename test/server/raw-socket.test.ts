import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ContinuityMetrics, createContinuityServer } from '../../src/index.js';
import { serveFetch } from '../support/fetch-adapter.js';
import { freshSessionWorks } from '../support/fresh-session.js';
import { listenOnLoopback } from '../support/listen.js';
import { rawExchange } from '../support/raw-http.js';
import { type DemoWorld, demoMcpServer } from './harness.js';

/**
 * Requests no HTTP client library would send, over raw sockets on 127.0.0.1, to the Node handler and to
 * the fetch handler (behind a minimal Node-to-fetch adapter, as a platform would run it). Each gets a
 * 4xx (or a closed connection when the client itself broke off); nothing reaches `onError`, and the
 * process serves a fresh session after each.
 */
const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

interface Shape {
  readonly method?: string;
  readonly target?: string;
  readonly version?: string;
  /** Header lines; `Host: 127.0.0.1`, Accept, Content-Type and `Connection: close` unless replaced (null drops one). */
  readonly headers?: Record<string, string | null>;
  readonly body?: string;
}

function request(port: number, s: Shape): string {
  const body = s.body ?? JSON.stringify(INIT);
  const headers: Record<string, string | null> = {
    Host: `127.0.0.1:${port}`,
    Accept: 'application/json, text/event-stream',
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(body)),
    'X-User': 'raw',
    Connection: 'close',
    ...s.headers,
  };
  const lines = Object.entries(headers).flatMap(([k, v]) => (v === null ? [] : [`${k}: ${v}`]));
  return `${s.method ?? 'POST'} ${s.target ?? '/mcp'} HTTP/${s.version ?? '1.1'}\r\n${lines.join('\r\n')}\r\n\r\n${body}`;
}

type Stack = 'node' | 'fetch';
type Expected = number | 'closed' | ((status: number | undefined, stack: Stack) => boolean);

interface Case {
  readonly name: string;
  readonly send: (port: number) => string;
  readonly options?: Parameters<typeof rawExchange>[2];
  readonly expected: Expected | Record<Stack, Expected>;
  /** The rejected_requests reason this case must count (where our handler, not the platform, answers). */
  readonly counted?: string;
}

const cases: Case[] = [
  {
    name: 'HTTP/1.0, no Host, an absolute target that is not a URL',
    send: (p) => request(p, { target: 'http://[::1/mcp', version: '1.0', headers: { Host: null } }),
    expected: 400,
  },
  {
    name: 'HTTP/1.0 without Host, origin-form target',
    send: (p) =>
      request(p, { method: 'GET', version: '1.0', headers: { Host: null, Accept: 'text/event-stream' } }),
    expected: 400,
  },
  {
    name: 'Host with a port that is not a number (authenticate builds a Request)',
    send: (p) => request(p, { headers: { Host: '127.0.0.1:abc' } }),
    expected: 400,
  },
  {
    name: 'Host [::1]evil',
    send: (p) => request(p, { headers: { Host: '[::1]evil' } }),
    expected: 400,
  },
  {
    name: 'Host with a port beyond 65535',
    send: (p) => request(p, { headers: { Host: '127.0.0.1:99999' } }),
    expected: 400,
  },
  {
    // The fetch handler is not bound to a socket: without allowedHosts it has no loopback rule.
    name: 'Host localhost.evil',
    send: (p) => request(p, { headers: { Host: 'localhost.evil' } }),
    expected: { node: 403, fetch: 200 },
  },
  {
    name: 'Host 127.0.0.1evil',
    send: (p) => request(p, { headers: { Host: '127.0.0.1evil' } }),
    expected: { node: 403, fetch: 200 },
  },
  { name: 'OPTIONS *', send: (p) => request(p, { method: 'OPTIONS', target: '*' }), expected: 404 },
  {
    name: 'an absolute-form target naming another host',
    send: (p) => request(p, { target: 'http://elsewhere.example/mcp' }),
    expected: 200,
  },
  {
    name: 'a target with dot segments and a query',
    send: (p) => request(p, { target: '/x/../mcp?a=%zz' }),
    expected: 200,
  },
  {
    name: 'broken chunked framing',
    send: (p) =>
      request(p, {
        headers: { 'Content-Length': null, 'Transfer-Encoding': 'chunked' },
        body: 'zz\r\n{}\r\n0\r\n\r\n',
      }),
    expected: (status) => status === undefined || status === 400,
  },
  {
    name: 'a body shorter than its Content-Length, then the client half-closes',
    send: (p) => request(p, { headers: { 'Content-Length': '1000' } }),
    options: { after: 'end' },
    expected: (status) => status === undefined || status === 400,
  },
  {
    name: 'a body cut off by a reset',
    send: (p) => request(p, { headers: { 'Content-Length': '1000' } }),
    options: { rest: '{"jsonrpc":', gapMs: 20, after: 'destroy' },
    expected: (status) => status === undefined,
  },
  {
    name: 'JSON nested 10,000 deep',
    send: (p) => request(p, { body: `${'['.repeat(10_000)}${']'.repeat(10_000)}` }),
    expected: 400,
    counted: 'too_deep',
  },
  {
    name: 'Content-Type application/jsonfoo',
    send: (p) => request(p, { headers: { 'Content-Type': 'application/jsonfoo' } }),
    expected: 415,
    counted: 'unsupported_media_type',
  },
  {
    name: 'Content-Type with a charset parameter',
    send: (p) => request(p, { headers: { 'Content-Type': 'application/json; charset=utf-8' } }),
    expected: 200,
  },
  {
    name: 'initialize with a non-integer id',
    send: (p) => request(p, { body: JSON.stringify({ ...INIT, id: 1.5 }) }),
    expected: 400,
    counted: 'invalid_message',
  },
  {
    name: 'initialize with an unknown top-level member',
    send: (p) => request(p, { body: JSON.stringify({ ...INIT, extra: 1 }) }),
    expected: 400,
    counted: 'invalid_message',
  },
  {
    name: 'initialize with params that are not an object',
    send: (p) => request(p, { body: JSON.stringify({ ...INIT, params: [1] }) }),
    expected: 400,
  },
  {
    name: 'a 60 KB request id',
    send: (p) => request(p, { body: JSON.stringify({ ...INIT, id: 'x'.repeat(60_000) }) }),
    expected: 400,
    counted: 'id_too_long',
  },
  {
    name: 'not JSON',
    send: (p) => request(p, { body: '{"jsonrpc":' }),
    expected: 400,
    counted: 'parse_error',
  },
  {
    name: 'an unknown session with a nonsense cursor',
    send: (p) =>
      request(p, {
        method: 'GET',
        body: '',
        headers: {
          Accept: 'text/event-stream',
          'Mcp-Session-Id': 'nope',
          'Last-Event-ID': '\u00ff'.repeat(100),
        },
      }),
    expected: 404,
  },
  {
    name: 'TRACE',
    send: (p) => request(p, { method: 'TRACE', body: '' }),
    expected: { node: 405, fetch: 400 },
  },
  {
    name: 'garbage instead of a request line',
    send: () => '\u0000\u0001 GARBAGE\r\n\r\n',
    expected: (status) => status === undefined || status === 400,
  },
];

for (const stack of ['node', 'fetch'] as const) {
  describe(`hostile requests over raw sockets: the ${stack} handler`, () => {
    const errors: unknown[] = [];
    const world: DemoWorld = { effects: new Map(), servers: [] };
    const metrics = new ContinuityMetrics();
    const continuity = createContinuityServer({
      createMcpServer: () => demoMcpServer(world),
      heartbeatMs: 0,
      sessionIdleTtlMs: 300,
      metrics,
      onError: (e) => errors.push(e),
      // Always someone: it makes every request build a Web Request, the path a bad Host used to break.
      authenticate: (r) => ({ principal: r.headers.get('x-user') ?? 'nobody' }),
    });
    const server =
      stack === 'node' ? http.createServer(continuity.nodeHandler) : serveFetch(continuity.fetch, errors);
    let port = 0;
    beforeAll(async () => {
      port = await listenOnLoopback(server);
    });
    afterAll(async () => {
      await continuity.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    });

    it.each(cases)('$name', async (c) => {
      const before = metrics.figures();
      const exchange = await rawExchange(port, c.send(port), c.options);
      const expected = typeof c.expected === 'object' ? c.expected[stack] : c.expected;
      if (typeof expected === 'number') expect(exchange.status, exchange.raw.slice(0, 300)).toBe(expected);
      else if (expected === 'closed') expect(exchange.closedByServer).toBe(true);
      else expect(expected(exchange.status, stack), exchange.raw.slice(0, 300)).toBe(true);
      if (exchange.status !== undefined && exchange.status >= 400 && exchange.status !== 404) {
        // Our answers carry the JSON-RPC error; the platform's own refusals (Node's parser, the adapter) do not.
        if (/content-type: application\/json/i.test(exchange.raw))
          expect(exchange.raw).toMatch(/"error":\{"code":-32\d{3}/);
      }
      if (c.counted) {
        const key = `mcp_continuity.server.rejected_requests{reason=${c.counted}}`;
        expect(metrics.figures()[key] ?? 0).toBe((before[key] ?? 0) + 1);
      }
      await freshSessionWorks(port);
      expect(errors).toEqual([]);
    });

    it('a client that sends Connection: close gets its event stream, then the connection closes', async () => {
      const exchange = await rawExchange(port, request(port, {}), { timeoutMs: 5_000 });
      expect(exchange.status).toBe(200);
      expect(exchange.raw).toMatch(/content-type: text\/event-stream/i);
      expect(exchange.raw).toContain('"protocolVersion"');
      expect(exchange.closedByServer).toBe(true);
      if (stack === 'node') expect(exchange.raw).toMatch(/\r\nconnection: close\r\n/i);
    });

    it('an aborted upload is counted, never reported as an error', async () => {
      const key = 'mcp_continuity.server.rejected_requests{reason=aborted_body}';
      const before = metrics.figures()[key] ?? 0;
      await rawExchange(port, request(port, { headers: { 'Content-Length': '1000' } }), {
        rest: '{"jsonrpc":',
        after: 'destroy',
      });
      await vi.waitFor(() => expect(metrics.figures()[key]).toBe(before + 1), { timeout: 3_000 });
      expect(errors).toEqual([]);
    });

    it('every session made here is gone one TTL (and a sweep) later', async () => {
      await vi.waitFor(() => expect(continuity.sessionCount()).toBe(0), { timeout: 5_000, interval: 50 });
    });
  });
}
