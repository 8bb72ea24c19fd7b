import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { JsonRpcCode } from '../../machines/codes.js';
import { ContinuityMetrics } from '../../src/index.js';
import { RawClient, startServer } from './harness.js';

/**
 * What a hostile or careless client may not do to the server: pin a session, touch another principal's
 * session, or make the server hold more than its limits. Real HTTP on 127.0.0.1, real SDK clients.
 */
type Started = Awaited<ReturnType<typeof startServer>>;
const opened: Started[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
});

async function started(options: Parameters<typeof startServer>[0] = {}) {
  const server = await startServer({ sessionIdleTtlMs: 300, ...options });
  opened.push(server);
  return server;
}

const byHeader = (request: Request) => {
  const user = request.headers.get('x-user');
  return user ? { principal: user } : null;
};

const LIMITED = 'mcp_continuity.server.limited_requests';

describe('a request the SDK server does not answer never holds its session', () => {
  it('a call the SDK Client timed out (it sends notifications/cancelled) settles: the session expires', async () => {
    const server = await started();
    const client = new Client({ name: 'impatient', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
    await expect(
      client.callTool({ name: 'slow', arguments: { ms: 60_000 } }, undefined, { timeout: 200 }),
    ).rejects.toThrow(/timed out/i);
    // The SDK server heard the cancellation (the tool was aborted) and sends no answer.
    await vi.waitFor(() => expect(server.effects.get('cancelled')).toBe(1), { timeout: 3_000 });
    await client.close();
    await vi.waitFor(() => expect(server.continuity.sessionCount()).toBe(0), {
      timeout: 5_000,
      interval: 50,
    });
  });

  it('a request reaching a closed SDK server is answered Internal error at once, and the session expires', async () => {
    const server = await started();
    const raw = new RawClient(server.url);
    await raw.initialize();
    await server.servers[0]?.close();
    const call = await raw.call('echo', { text: 'anyone?' });
    await call.untilEnd(3_000);
    expect(call.messages.at(-1)).toMatchObject({ error: { code: JsonRpcCode.INTERNAL_ERROR } });
    await vi.waitFor(() => expect(server.continuity.sessionCount()).toBe(0), {
      timeout: 5_000,
      interval: 50,
    });
  });

  it.each([
    ['a non-integer id', { id: 1.5 }],
    ['a non-string method', { method: 42 }],
    ['params that are not an object', { params: 'x' }],
    ['an unknown top-level member', { extra: true }],
  ])('%s inside a session → 400 JSON-RPC error, and the session still expires', async (_, change) => {
    const server = await started();
    const raw = new RawClient(server.url);
    await raw.initialize();
    const body = {
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'x' } },
    };
    const r = await raw.notify({ ...body, ...change });
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({ error: { code: JsonRpcCode.INVALID_REQUEST } });
    await vi.waitFor(() => expect(server.continuity.sessionCount()).toBe(0), {
      timeout: 5_000,
      interval: 50,
    });
  });
});

describe('another principal presenting a session id', () => {
  it('gets exactly the unknown-session answer and changes nothing: the session expires on time', async () => {
    const server = await started({ authenticate: byHeader, sessionIdleTtlMs: 400 });
    const alice = new RawClient(server.url, { 'X-User': 'alice' });
    await alice.initialize();
    const mallory = new RawClient(server.url, { 'X-User': 'mallory' });
    const unknown = new RawClient(server.url, { 'X-User': 'mallory' });
    unknown.sessionId = 'no-such-session';
    const answers = async (c: RawClient) => {
      const call = await c.call('echo', { text: 'x' });
      const get = await c.get();
      const resume = await c.get(`${'a'.repeat(12)}-1-0`);
      const note = await c.notify({ jsonrpc: '2.0', method: 'notifications/initialized' });
      return [
        [call.response.status, await call.response.text()],
        [get.response.status, await get.response.text()],
        [resume.response.status, await resume.response.text()],
        [note.status, await note.text()],
      ];
    };
    const expected = await answers(unknown);
    expect(expected.map(([status]) => status)).toEqual([404, 404, 404, 404]);
    mallory.sessionId = alice.sessionId;
    // Mallory keeps presenting the id: the session must expire all the same (it used to live on).
    const deadline = Date.now() + 5_000;
    let rounds = 0;
    while (server.continuity.sessionCount() > 0 && Date.now() < deadline && rounds < 500) {
      expect(await answers(mallory)).toEqual(expected);
      rounds++;
    }
    expect(rounds).toBeGreaterThan(0);
    expect(server.continuity.sessionCount()).toBe(0);
  });
});

describe('limits', () => {
  const initialize = (c: RawClient) =>
    c.notify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });

  it('maxSessions: one more session → 503 with Retry-After and the JSON-RPC error; counted', async () => {
    const metrics = new ContinuityMetrics();
    const server = await started({ limits: { maxSessions: 2, retryAfterSeconds: 7 }, metrics });
    await new RawClient(server.url).initialize();
    await new RawClient(server.url).initialize();
    const r = await initialize(new RawClient(server.url));
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('7');
    expect(await r.json()).toMatchObject({ id: null, error: { code: JsonRpcCode.LIMIT_EXCEEDED } });
    expect(metrics.figures()[`${LIMITED}{reason=max_sessions}`]).toBe(1);
    expect(server.continuity.sessionCount()).toBe(2);
    // Once they expire there is room again.
    await vi.waitFor(() => expect(server.continuity.sessionCount()).toBe(0), {
      timeout: 5_000,
      interval: 50,
    });
    await new RawClient(server.url).initialize();
  });

  it('maxSessionsPerPrincipal: one principal over its share → 429; another principal is served', async () => {
    const metrics = new ContinuityMetrics();
    const server = await started({ limits: { maxSessionsPerPrincipal: 1 }, authenticate: byHeader, metrics });
    await new RawClient(server.url, { 'X-User': 'alice' }).initialize();
    const again = await initialize(new RawClient(server.url, { 'X-User': 'alice' }));
    expect(again.status).toBe(429);
    expect(again.headers.get('retry-after')).toBe('5');
    expect(await again.json()).toMatchObject({ error: { code: JsonRpcCode.LIMIT_EXCEEDED } });
    await new RawClient(server.url, { 'X-User': 'bob' }).initialize();
    expect(server.continuity.sessionCount()).toBe(2);
    expect(metrics.figures()[`${LIMITED}{reason=max_sessions_per_principal}`]).toBe(1);
  });

  it('without authenticate, sessions count per remote address', async () => {
    const server = await started({ limits: { maxSessionsPerPrincipal: 1 } });
    await new RawClient(server.url).initialize();
    expect((await initialize(new RawClient(server.url))).status).toBe(429);
  });

  it('maxOpenRequestStreamsPerSession: a call beyond it → 429, and runs once one finished', async () => {
    const metrics = new ContinuityMetrics();
    const server = await started({ limits: { maxOpenRequestStreamsPerSession: 1 }, metrics });
    const raw = new RawClient(server.url);
    await raw.initialize();
    const first = await raw.call('charge', { key: 'a', ms: 300 });
    const second = await raw.call('charge', { key: 'b' });
    expect(second.response.status).toBe(429);
    expect(second.response.headers.get('retry-after')).toBe('5');
    expect(JSON.parse(await second.response.text())).toMatchObject({
      error: { code: JsonRpcCode.LIMIT_EXCEEDED },
    });
    expect(metrics.figures()[`${LIMITED}{reason=max_open_request_streams}`]).toBe(1);
    await first.untilEnd();
    expect(server.effects.get('b')).toBeUndefined();
    const later = await raw.call('charge', { key: 'b' }, 'b-again');
    await later.untilEnd();
    expect(server.effects.get('b')).toBe(1);
  });

  it('a limit that is not a positive number is refused when the server is made', async () => {
    await expect(started({ limits: { maxSessions: 0 } })).rejects.toThrow(RangeError);
  });
});
