import { createServer } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { JsonRpcCode } from '../../machines/codes.js';
import {
  type ContinuityClientOptions,
  ContinuityClientTransport,
  type GapReport,
  isContinuityError,
  MemoryCursorStore,
} from '../../src/index.js';
import { listenOnLoopback } from '../support/listen.js';
import { event, hostileServer, type Misbehave, sse } from './hostile-server.js';

/**
 * The SDK Client over ContinuityClientTransport against small loopback servers that speak just enough
 * MCP, then misbehave (issue 13, client side). Each test shows one bound holding over real HTTP.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const POLICY = { initialDelayMs: 20, maxDelayMs: 200, factor: 2, maxRetries: 3, jitter: 'full' } as const;

async function server(misbehave: Misbehave, sessionId?: string) {
  const s = await hostileServer(misbehave, sessionId);
  cleanups.push(s.close);
  return s;
}

async function connect(url: URL, options: ContinuityClientOptions = {}) {
  const transport = new ContinuityClientTransport(url, { reconnect: POLICY, ...options });
  const client = new Client({ name: 'hostile-test', version: '1.0.0' });
  await client.connect(transport);
  const errors: Error[] = [];
  let closed = 0;
  transport.onerror = (e) => errors.push(e);
  const sdkOnClose = transport.onclose;
  transport.onclose = () => {
    closed++;
    sdkOnClose?.();
  };
  cleanups.push(() => client.close());
  const codes = () => errors.map((e) => (isContinuityError(e) ? e.code : e.message));
  return { client, transport, errors, codes, closed: () => closed };
}

const noStandalone: Misbehave = ({ res }) => {
  res.writeHead(405).end();
};
const call = (client: Client, timeout?: number) =>
  client.callTool({ name: 'anything', arguments: {} }, undefined, timeout ? { timeout } : undefined);
const elapsed = async (p: Promise<unknown>) => {
  const start = Date.now();
  const outcome = await p.then(
    (value) => ({ value, error: undefined }),
    (error: unknown) => ({ value: undefined, error: error as { code?: number; message: string } }),
  );
  return { ...outcome, ms: Date.now() - start };
};

describe('client against a hostile server (loopback)', () => {
  it('404 to everything after initialize: a bounded number of re-initializes, then onerror + onclose', async () => {
    const s = await server(({ res }) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }),
      );
    });
    // A session proves itself by staying active for maxDelayMs: long here, so a slow machine cannot.
    const c = await connect(s.url, { reconnect: { ...POLICY, maxDelayMs: 10_000 } });
    const outcome = await elapsed(call(c.client));
    expect(outcome.error).toBeDefined();
    await vi.waitFor(() => expect(c.closed()).toBe(1), { timeout: 5_000 });
    expect(c.codes()).toContain('MCPC_REINITIALIZE_GIVEN_UP');
    // The first initialize, one immediate re-initialize, one per retry.
    expect(s.count('initialize')).toBe(1 + 1 + POLICY.maxRetries);
    expect(s.count('tools/call')).toBeLessThanOrEqual(1 + 1 + POLICY.maxRetries);
    const after = s.seen.length;
    await expect(call(c.client)).rejects.toThrow();
    expect(s.seen.length).toBe(after);
  });

  it.each([307, 308])(
    'a %i to another origin is refused: the other origin never sees a byte',
    async (status) => {
      const other = await server(({ res }) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"jsonrpc":"2.0","id":1,"result":{"content":[]}}');
      });
      const s = await server(({ res }) => {
        res.writeHead(status, { location: other.url.href }).end();
      });
      const c = await connect(s.url, { requestInit: { headers: { 'x-api-key': 'secret' } } });
      const outcome = await elapsed(call(c.client));
      expect(outcome.error?.message).toMatch(/redirect/);
      expect(outcome.error?.code).toBe(JsonRpcCode.UNEXPECTED_STATUS);
      expect(other.seen).toHaveLength(0);
      expect(s.seen.some((r) => r.headers['x-api-key'] === 'secret')).toBe(true);
    },
  );

  it('an initialize redirected to another origin fails to connect; the other origin sees nothing', async () => {
    const other = await server(noStandalone);
    const redirector = createServer((_req, res) => res.writeHead(307, { location: other.url.href }).end());
    const port = await listenOnLoopback(redirector);
    cleanups.push(() => new Promise((r) => redirector.close(() => r())));
    const transport = new ContinuityClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
      reconnect: POLICY,
      requestInit: { headers: { authorization: 'Bearer secret' } },
    });
    const client = new Client({ name: 'hostile-test', version: '1.0.0' });
    cleanups.push(() => client.close());
    await expect(client.connect(transport)).rejects.toThrow(/redirect/);
    expect(other.seen).toHaveLength(0);
  });

  it('a black hole before the headers ends at stallTimeoutMs', async () => {
    const s = await server(({ req, res }) => {
      if (req.method === 'GET') res.writeHead(405).end();
      // A call is never answered: not even headers.
    });
    const c = await connect(s.url, { stallTimeoutMs: 300 });
    const outcome = await elapsed(call(c.client));
    expect(outcome.error?.code).toBe(JsonRpcCode.OUTCOME_UNKNOWN);
    expect(outcome.ms).toBeGreaterThanOrEqual(250);
    expect(outcome.ms).toBeLessThan(5_000);
  });

  it('a JSON body trickling a byte at a time ends at stallTimeoutMs after the headers', async () => {
    const s = await server(({ req, res }) => {
      if (req.method === 'GET') return void res.writeHead(405).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{');
      const timer = setInterval(() => res.write(' '), 50);
      res.on('close', () => clearInterval(timer));
    });
    const c = await connect(s.url, { stallTimeoutMs: 400 });
    const outcome = await elapsed(call(c.client));
    expect(outcome.error?.code).toBe(JsonRpcCode.OUTCOME_UNKNOWN);
    expect(outcome.ms).toBeLessThan(5_000);
  });

  it('a large answer arriving steadily is not stalled, though no event completes for longer than the timeout', async () => {
    const chunk = 'a'.repeat(64 * 1024);
    const chunks = 15;
    const s = await server(({ req, res, body }) => {
      if (req.method === 'GET') return void res.writeHead(405).end();
      sse(res);
      res.write(
        `data: {"jsonrpc":"2.0","id":${JSON.stringify(body?.id)},"result":{"content":[{"type":"text","text":"`,
      );
      let sent = 0;
      const timer = setInterval(() => {
        res.write(chunk);
        if (++sent < chunks) return;
        clearInterval(timer);
        res.end('"}]}}\n\n');
      }, 80);
      res.on('close', () => clearInterval(timer));
    });
    const c = await connect(s.url, { stallTimeoutMs: 800 });
    const outcome = await elapsed(call(c.client));
    expect(outcome.error).toBeUndefined();
    expect((outcome.value as { content: Array<{ text: string }> }).content[0]?.text.length).toBe(
      chunks * chunk.length,
    );
    // Longer than the stall timeout: only bytes kept it alive.
    expect(outcome.ms).toBeGreaterThan(800);
  });

  it('an event larger than maxMessageBytes is cut and reported; the call ends', async () => {
    const s = await server(({ req, res }) => {
      if (req.method === 'GET') return void res.writeHead(405).end();
      sse(res);
      res.write('data: ');
      let writes = 0;
      const timer = setInterval(() => {
        res.write('a'.repeat(50_000));
        if (++writes > 200) clearInterval(timer);
      }, 5);
      res.on('close', () => clearInterval(timer));
    });
    const c = await connect(s.url, { maxMessageBytes: 100_000 });
    const outcome = await elapsed(call(c.client));
    expect(outcome.error?.code).toBe(JsonRpcCode.OUTCOME_UNKNOWN);
    expect(c.errors.some((e) => /maxMessageBytes/.test(e.message))).toBe(true);
  });

  it('a JSON body larger than maxMessageBytes is cut and reported; the call ends', async () => {
    const s = await server(({ req, res, body }) => {
      if (req.method === 'GET') return void res.writeHead(405).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: body?.id, result: { pad: 'a'.repeat(200_000) } }));
    });
    const c = await connect(s.url, { maxMessageBytes: 100_000 });
    const outcome = await elapsed(call(c.client));
    expect(outcome.error?.code).toBe(JsonRpcCode.OUTCOME_UNKNOWN);
    expect(c.errors.some((e) => /response body exceeded maxMessageBytes/.test(e.message))).toBe(true);
  });

  it('an over-long event id is never stored nor sent back as Last-Event-ID', async () => {
    const s = await server(({ req, res, body }) => {
      if (req.method === 'GET' && req.headers['last-event-id'] === undefined)
        return void res.writeHead(405).end();
      if (req.method === 'GET') {
        sse(res);
        res.end(event({ jsonrpc: '2.0', id: callId, result: { content: [] } }, 'p2'));
        return;
      }
      callId = body?.id;
      sse(res);
      res.write('id: p1\ndata:\n\n');
      res.write(
        event(
          { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 1 } },
          'x'.repeat(100_000),
        ),
      );
      setTimeout(() => res.destroy(), 20);
    });
    let callId: string | number | undefined;
    const c = await connect(s.url);
    const outcome = await elapsed(call(c.client));
    expect(outcome.error).toBeUndefined();
    const resumes = s.seen.filter((r) => r.headers['last-event-id'] !== undefined);
    expect(resumes.map((r) => r.headers['last-event-id'])).toEqual(['p1']);
    expect(c.codes()).toContain('MCPC_MALFORMED_EVENT');
  });

  it('data that is not JSON-RPC is reported, not delivered; the real answer still arrives', async () => {
    const s = await server(({ req, res, body }) => {
      if (req.method === 'GET') return void res.writeHead(405).end();
      sse(res);
      res.write(event({ foo: 1 }));
      res.write(event([1, 2]));
      res.write(event('"just a string"'));
      res.end(event({ jsonrpc: '2.0', id: body?.id, result: { content: [] } }));
    });
    const c = await connect(s.url);
    const outcome = await elapsed(call(c.client));
    expect(outcome.error).toBeUndefined();
    expect(c.codes().filter((code) => code === 'MCPC_MALFORMED_EVENT')).toHaveLength(3);
  });

  it('a malformed answer to our own call ends it at once with a clear error (not the SDK timeout)', async () => {
    const s = await server(({ req, res, body }) => {
      if (req.method === 'GET') return void res.writeHead(405).end();
      sse(res);
      res.write(event({ jsonrpc: '2.0', id: body?.id, result: 5 }));
    });
    const c = await connect(s.url);
    const outcome = await elapsed(call(c.client));
    expect(outcome.error?.code).toBe(JsonRpcCode.MALFORMED_ANSWER);
    expect(outcome.ms).toBeLessThan(5_000);
  });

  it('a call the SDK timed out releases its stream and ledger entry', async () => {
    const s = await server(({ req, res }) => {
      if (req.method === 'GET') return void res.writeHead(405).end();
      sse(res);
      res.write('id: p1\ndata:\n\n');
    });
    const c = await connect(s.url);
    await expect(call(c.client, 200)).rejects.toThrow(/timed out/i);
    await vi.waitFor(() => expect(s.count('notifications/cancelled')).toBe(1), { timeout: 5_000 });
    const ctx = c.transport.actor.getSnapshot().context;
    expect(Object.keys(ctx.streams).filter((k) => k !== 'standalone')).toEqual([]);
    expect(ctx.ledger).toEqual({});
  });

  it('a cursor record of another server is not used: its session id never reaches this one', async () => {
    const a = await server(({ req, res }) => {
      if (req.method === 'GET') {
        sse(res);
        res.write('id: a1\ndata:\n\n');
      }
    }, 'session-of-a');
    const store = new MemoryCursorStore();
    await connect(a.url, { cursorStore: store });
    await vi.waitFor(async () => expect((await store.load())?.streams.standalone?.lastEventId).toBe('a1'));
    // The same record, handed to a client of another server (a copied cursor file, say).
    const copied = new MemoryCursorStore();
    await copied.save(await store.load());
    const b = await server(noStandalone, 'session-of-b');
    const c = await connect(b.url, { cursorStore: copied });
    expect(c.transport.sessionId).toBe('session-of-b');
    expect(b.seen.some((r) => r.headers['mcp-session-id'] === 'session-of-a')).toBe(false);
    expect(b.seen.some((r) => r.headers['last-event-id'] !== undefined)).toBe(false);
  });

  it('retry: 3000000000 is clamped, never turned into a 1 ms timer', async () => {
    const s = await server(({ req, res }) => {
      if (req.method !== 'GET') return void res.writeHead(400).end();
      sse(res);
      res.end('retry: 3000000000\nid: g1\ndata:\n\n');
    });
    await connect(s.url);
    await vi.waitFor(() => expect(s.count('GET')).toBe(1));
    await new Promise((r) => setTimeout(r, 1_000));
    // Unclamped, Node would have fired the timer after 1 ms: hundreds of GETs in a second.
    expect(s.count('GET')).toBe(1);
  });

  it('a 410 with resumeAfter answered to every resume: the call ends, onGap is bounded', async () => {
    const gaps: GapReport[] = [];
    const s = await server(({ req, res }) => {
      if (req.method === 'GET' && req.headers['last-event-id'] === undefined)
        return void res.writeHead(405).end();
      if (req.method === 'GET') {
        res.writeHead(410, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id: null,
            error: {
              code: -32052,
              message: 'gone',
              data: { reason: 'resume_window_exceeded', lostCount: 1, resumeAfter: 'p9' },
            },
          }),
        );
        return;
      }
      sse(res);
      res.end('id: p1\ndata:\n\n');
    });
    const c = await connect(s.url, { onGap: (g) => gaps.push(g) });
    const outcome = await elapsed(call(c.client));
    expect(outcome.error?.code).toBe(JsonRpcCode.OUTCOME_UNKNOWN);
    expect(gaps.length).toBeGreaterThan(0);
    expect(gaps.length).toBeLessThanOrEqual(POLICY.maxRetries + 2);
  });

  it('a standalone stream that opens and closes at once is re-opened at a growing delay', async () => {
    const s = await server(({ req, res }) => {
      if (req.method !== 'GET') return void res.writeHead(400).end();
      sse(res);
      res.end();
    });
    await connect(s.url);
    await new Promise((r) => setTimeout(r, 2_000));
    const gets = s.seen.filter((r) => r.method === 'GET').map((r) => r.at);
    // Delays of up to 20, 40, 80, 160, then 200 ms (full jitter): about 20 in 2 s, never a constant spin.
    expect(gets.length).toBeGreaterThan(3);
    expect(gets.length).toBeLessThan(60);
  });
});
