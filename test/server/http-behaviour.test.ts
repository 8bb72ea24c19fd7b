import { afterEach, describe, expect, it } from 'vitest';
import { parseEventId } from '../../machines/event-id.js';
import { RawClient, startServer } from './harness.js';

/**
 * The server's behaviour over real HTTP on 127.0.0.1, one clause at a time. A raw fetch + SSE client
 * speaks the protocol by hand so nothing between the test and the server can hide a mistake.
 */
type Started = Awaited<ReturnType<typeof startServer>>;
let server: Started | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function started(options: Parameters<typeof startServer>[0] = {}) {
  server = await startServer(options);
  const client = new RawClient(server.url);
  return { server, client };
}

describe('sessions', () => {
  /** @spec transports#session-management item 1 */
  it('ids come from a CSPRNG: at least 128 bits, visible ASCII only, all distinct', async () => {
    const { server } = await started();
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const c = new RawClient(server.url);
      await c.initialize();
      ids.add(c.sessionId as string);
    }
    expect(ids.size).toBe(20);
    for (const id of ids) {
      expect(id).toMatch(/^[\x21-\x7E]+$/);
      expect(Buffer.from(id, 'base64url').length).toBeGreaterThanOrEqual(16);
    }
  });

  it('advertises retention, TTL, gap signalling and de-duplication in a header and in the initialize result', async () => {
    const { client } = await started({ sessionIdleTtlMs: 60_000 });
    const init = await client.initialize();
    expect(init.response.headers.get('mcp-continuity')).toBe(
      'retention-ms=600000, max-events=1000, idle-ttl-ms=60000, gaps=410, dedupe=1',
    );
    const result = init.messages[0]?.result as { capabilities: { experimental: Record<string, unknown> } };
    expect(result.capabilities.experimental['mcp-continuity']).toEqual({
      retentionMs: 600_000,
      maxEventsPerStream: 1000,
      idleTtlMs: 60_000,
      gapSignalling: true,
      duplicateRequestProtection: true,
    });
  });

  /** @spec transports#session-management items 2-3 */
  it('unknown session → 404 with a JSON-RPC error; no session id → 400', async () => {
    const { server, client } = await started();
    client.sessionId = 'no-such-session';
    const r = await client.notify({ jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(r.status).toBe(404);
    expect(await r.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32001 } });
    const anonymous = new RawClient(server.url);
    const r2 = await anonymous.notify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(r2.status).toBe(400);
    expect(await r2.json()).toMatchObject({ error: { code: -32600 } });
  });

  it('DELETE: attached streams get event: close with the reason, then end; later requests get 404', async () => {
    const { client } = await started();
    await client.initialize();
    const standalone = await client.get();
    await standalone.until(() => standalone.events.length >= 1, 5_000, 'priming');
    const del = await fetch(client.url, { method: 'DELETE', headers: client.headers() });
    expect(del.status).toBe(200);
    await standalone.untilEnd();
    expect(standalone.events.at(-1)).toEqual({
      id: undefined,
      event: 'close',
      data: '{"reason":"terminated"}',
    });
    const after = await client.notify({ jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(after.status).toBe(404);
  });

  it('idle TTL: a session with nothing attached and nothing running expires, then answers 404', async () => {
    const { server, client } = await started({ sessionIdleTtlMs: 150 });
    await client.initialize();
    expect(server.continuity.sessionCount()).toBe(1);
    await new Promise((r) => setTimeout(r, 400));
    expect(server.continuity.sessionCount()).toBe(0);
    expect((await client.notify({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(404);
  });

  it('an idle session sleeps (its actor a snapshot), wakes on the next request with everything it knew, and still expires on time', async () => {
    const { server, client } = await started({ sessionIdleTtlMs: 2_000 });
    await client.initialize();
    const first = await client.call('charge', { key: 'card' }, 'pay-1');
    await first.untilEnd();
    // Idle for a sweep or two (TTL/4, here 500 ms): asleep.
    await new Promise((r) => setTimeout(r, 1_200));
    expect(server.continuity.sleepingSessionCount()).toBe(1);
    // Woken by a re-sent call: its id is still known, so it is not run again.
    const again = await client.call('charge', { key: 'card' }, 'pay-1');
    await again.untilEnd();
    expect(again.messages.at(-1)).toMatchObject({
      id: 'pay-1',
      result: { content: [{ text: 'charged card' }] },
    });
    expect(server.effects.get('card')).toBe(1);
    expect(server.continuity.sleepingSessionCount()).toBe(0);
    // Asleep again, then past its TTL while asleep: it expires (404), late by one sweep at most.
    await new Promise((r) => setTimeout(r, 2_700));
    expect(server.continuity.sessionCount()).toBe(0);
    expect((await client.notify({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(404);
  });

  it('a running call keeps the session alive past its idle TTL', async () => {
    const { client } = await started({ sessionIdleTtlMs: 100 });
    await client.initialize();
    const call = await client.call('slow', { ms: 400 });
    await call.untilEnd();
    expect(call.messages.at(-1)).toMatchObject({ result: { content: [{ text: 'slept 400' }] } });
  });
});

describe('streams', () => {
  /** @spec transports#sending-messages-to-the-server item 6 */
  it('a POST answers with an SSE stream that starts with a priming event and a retry field', async () => {
    const { client } = await started({ retryMs: 1234 });
    await client.initialize();
    const call = await client.call('echo', { text: 'hi' });
    expect(call.response.headers.get('content-type')).toBe('text/event-stream');
    await call.untilEnd();
    expect(call.events[0]).toMatchObject({ data: '' });
    expect(parseEventId(call.events[0]?.id ?? '')?.seq).toBe(0);
    expect(call.retry).toBe(1234);
    expect(call.messages).toEqual([
      { jsonrpc: '2.0', id: expect.anything(), result: { content: [{ type: 'text', text: 'hi' }] } },
    ]);
  });

  it('notifications and responses from the client get 202', async () => {
    const { client } = await started();
    await client.initialize();
    const r = await client.notify({
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 1 },
    });
    expect(r.status).toBe(202);
    expect(await r.text()).toBe('');
  });

  it('event ids name their stream and are dense per stream', async () => {
    const { client } = await started();
    await client.initialize();
    const call = await client.call('chatty', { count: 5, intervalMs: 0 });
    await call.untilEnd();
    const ids = call.events.map((e) => parseEventId(e.id ?? ''));
    expect(ids.map((c) => c?.seq)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(new Set(ids.map((c) => c?.stream)).size).toBe(1);
  });

  /** @spec transports#resumability-and-redelivery; design-note "disposable viewport onto a durable log" */
  it('resume: a cut stream is replayed after the cursor, in order, then continues live — no duplicate, no gap', async () => {
    const { client } = await started();
    await client.initialize();
    const call = await client.call('chatty', { count: 60, intervalMs: 3 });
    await call.until(() => call.messages.length >= 5, 5_000, 'five notifications');
    call.cut();
    const cursor = call.events.at(-1)?.id as string;
    // Events keep being appended while no stream is attached, and while the resume is being set up.
    await new Promise((r) => setTimeout(r, 30));
    const resumed = await client.get(cursor);
    expect(resumed.response.status).toBe(200);
    await resumed.untilEnd(10_000);
    const seqs = [...call.events, ...resumed.events]
      .filter((e) => e.id)
      .map((e) => parseEventId(e.id as string)?.seq as number)
      .filter((s) => s > 0);
    expect(seqs).toEqual(Array.from({ length: 61 }, (_, i) => i + 1));
    expect(resumed.messages.at(-1)).toMatchObject({ result: { content: [{ text: 'sent 60' }] } });
  });

  it('store, then send: messages produced while no stream is attached are retained and replayed', async () => {
    const { client } = await started();
    await client.initialize();
    const call = await client.call('chatty', { count: 10, intervalMs: 20 });
    await call.until(() => call.events.length >= 1, 5_000, 'priming');
    const priming = call.events[0]?.id as string;
    call.cut();
    await new Promise((r) => setTimeout(r, 400));
    const resumed = await client.get(priming);
    await resumed.untilEnd();
    expect(resumed.messages.filter((m) => m.method === 'notifications/progress')).toHaveLength(10);
    expect(resumed.messages.at(-1)).toMatchObject({ result: {} });
  });

  it('the standalone GET stream is resumable, and the first GET replays what was sent before it opened', async () => {
    const { server, client } = await started();
    await client.initialize();
    const mcp = server.servers[0];
    await mcp?.server.sendLoggingMessage({ level: 'info', data: 'before any GET' });
    const first = await client.get();
    await first.until(() => first.messages.length >= 1, 5_000, 'retained message');
    expect(first.messages[0]).toMatchObject({
      method: 'notifications/message',
      params: { data: 'before any GET' },
    });
    const cursor = first.events.at(-1)?.id as string;
    first.cut();
    await mcp?.server.sendLoggingMessage({ level: 'info', data: 'while away' });
    const again = await client.get(cursor);
    await again.until(() => again.messages.length >= 1, 5_000, 'replayed message');
    expect(again.messages).toEqual([
      expect.objectContaining({ params: { level: 'info', data: 'while away' } }),
    ]);
    again.cut();
  });

  it('heartbeat comments arrive every heartbeatMs on an open stream', async () => {
    const { client } = await started({ heartbeatMs: 40 });
    await client.initialize();
    const call = await client.call('slow', { ms: 300 });
    await call.untilEnd();
    expect(call.comments.length).toBeGreaterThanOrEqual(3);
  });

  it('a repeated request id is never executed again: the client gets the original stream replayed', async () => {
    const { server, client } = await started();
    await client.initialize();
    const first = await client.call('charge', { key: 'k1' }, 77);
    await first.untilEnd();
    const again = await client.call('charge', { key: 'k1' }, 77);
    await again.untilEnd();
    expect(server.effects.get('k1')).toBe(1);
    expect(again.messages).toEqual(first.messages);
  });
});

describe('cursors the server cannot honour', () => {
  /** @spec design-note condition 3 */
  it('an evicted cursor → 410 resume_window_exceeded with the exact lost count, never a silent resume', async () => {
    const { MemoryEventLog } = await import('../../src/index.js');
    const { client } = await started({ eventLog: new MemoryEventLog({ maxEventsPerStream: 5 }) });
    await client.initialize();
    const call = await client.call('chatty', { count: 12, intervalMs: 0 });
    await call.untilEnd();
    const cursor = call.events[2]?.id as string; // seq 2
    const r = await client.get(cursor);
    expect(r.response.status).toBe(410);
    const body = await r.response.json();
    const c = parseEventId(cursor);
    const id = (seq: number) => `${c?.epoch}-${c?.stream}-${seq}`;
    expect(body).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32052,
        message: expect.stringContaining('resume_window_exceeded'),
        data: {
          kind: 'gone',
          reason: 'resume_window_exceeded',
          stream: c?.stream,
          requestedId: cursor,
          oldestId: id(9),
          headId: id(13),
          lostCount: 6,
          resumeAfter: id(8),
          streamComplete: true,
        },
      },
    });
  });

  it('a malformed cursor, or one from another session or stream → 400; never another session’s events', async () => {
    const { server, client } = await started();
    await client.initialize();
    const other = new RawClient(server.url);
    await other.initialize();
    const theirs = await other.call('echo', { text: 'secret' });
    await theirs.untilEnd();
    const foreign = theirs.events[1]?.id as string;
    for (const cursor of ['garbage', foreign, `${parseEventId(foreign)?.epoch}-99-1`]) {
      const r = await client.get(cursor);
      expect(r.response.status, cursor).toBe(400);
      expect(await r.response.json()).toMatchObject({ error: { code: -32052 } });
    }
  });
});

describe('bad input gets a clear error and loses nothing', () => {
  it.each([
    ['invalid JSON', { body: '{nope' }, 400, -32700],
    ['a batch', { body: '[]' }, 400, -32600],
    ['not JSON-RPC', { body: '{"hello":1}' }, 400, -32600],
    ['a wrong Accept', { headers: { Accept: 'application/json' } }, 406, -32600],
    ['a wrong Content-Type', { headers: { 'Content-Type': 'text/plain' } }, 415, -32600],
    ['an unsupported protocol version', { headers: { 'MCP-Protocol-Version': '1999-01-01' } }, 400, -32600],
    ['a bad Origin', { headers: { Origin: 'http://evil.example' } }, 403, -32600],
  ] as const)('%s gets its status and a JSON-RPC error', async (_, input, status, code) => {
    const { server, client } = await started();
    await client.initialize();
    const call = await client.call('chatty', { count: 3, intervalMs: 30 });
    const headers = client.headers('headers' in input ? input.headers : {});
    const body =
      'body' in input ? input.body : JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' });
    const r = await fetch(server.url, { method: 'POST', headers, body });
    expect(r.status).toBe(status);
    expect(await r.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code } });
    await call.untilEnd();
    expect(call.messages.filter((m) => m.method === 'notifications/progress')).toHaveLength(3);
    expect(server.continuity.sessionCount()).toBe(1);
  });

  /** @spec transports#security-warning: DNS rebinding */
  it('a rebinding Host on a loopback bind → 403', async () => {
    const { server, client } = await started();
    await client.initialize();
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.port,
          path: '/mcp',
          method: 'POST',
          headers: { ...client.headers(), Host: 'evil.example' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }));
    });
    expect(status).toBe(403);
  });

  it('a body over the limit → 413, the session unharmed', async () => {
    const { server, client } = await started({ maxBodyBytes: 1024 });
    await client.initialize();
    const big = JSON.stringify({
      jsonrpc: '2.0',
      method: 'notifications/x',
      params: { pad: 'x'.repeat(5000) },
    });
    const r = await fetch(server.url, { method: 'POST', headers: client.headers(), body: big });
    expect(r.status).toBe(413);
    expect(await r.json()).toMatchObject({ error: { code: -32600 } });
    const ok = await client.call('echo', { text: 'still here' });
    await ok.untilEnd();
    expect(ok.messages.at(-1)).toMatchObject({ result: { content: [{ text: 'still here' }] } });
  });

  it('a GET without text/event-stream in Accept → 406', async () => {
    const { server, client } = await started();
    await client.initialize();
    const r = await fetch(server.url, { headers: { ...client.headers(), Accept: 'application/json' } });
    expect(r.status).toBe(406);
  });

  it('a loopback origin is allowed by default; configured origins replace the default', async () => {
    const { server, client } = await started();
    await client.initialize();
    const ok = await client.notify(
      { jsonrpc: '2.0', method: 'notifications/x' },
      { Origin: `http://localhost:${server.port}` },
    );
    expect(ok.status).toBe(202);
    await server.close();
    const s2 = await started({ allowedOrigins: ['https://app.example'] });
    await s2.client.initialize();
    expect(
      (await s2.client.notify({ jsonrpc: '2.0', method: 'n' }, { Origin: 'https://app.example' })).status,
    ).toBe(202);
    expect(
      (await s2.client.notify({ jsonrpc: '2.0', method: 'n' }, { Origin: 'http://localhost' })).status,
    ).toBe(403);
  });
});

describe('authentication', () => {
  const authenticate = (request: Request) => {
    const token = request.headers.get('authorization');
    return token ? { principal: token.replace('Bearer ', '') } : null;
  };

  it('no credentials → 401', async () => {
    const { server } = await started({ authenticate });
    const r = await new RawClient(server.url).notify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {},
    });
    expect(r.status).toBe(401);
    expect(server.continuity.sessionCount()).toBe(0);
  });

  it('a session is bound to its creator: another principal presenting its id gets 404', async () => {
    const { server } = await started({ authenticate });
    const alice = new RawClient(server.url, { Authorization: 'Bearer alice' });
    await alice.initialize();
    const mallory = new RawClient(server.url, { Authorization: 'Bearer mallory' });
    mallory.sessionId = alice.sessionId;
    const call = await mallory.call('echo', { text: 'x' });
    expect(call.response.status).toBe(404);
    expect((await mallory.get()).response.status).toBe(404);
    expect((await fetch(server.url, { method: 'DELETE', headers: mallory.headers() })).status).toBe(404);
    const mine = await alice.call('echo', { text: 'mine' });
    await mine.untilEnd();
    expect(mine.messages.at(-1)).toMatchObject({ result: { content: [{ text: 'mine' }] } });
  });

  it('an authenticate that takes its time gets the Request, and the body (100 KB here) still arrives whole', async () => {
    const slow = async (request: Request) => {
      await new Promise((r) => setTimeout(r, 20));
      return authenticate(request);
    };
    const { server } = await started({ authenticate: slow });
    const alice = new RawClient(server.url, { Authorization: 'Bearer alice' });
    await alice.initialize();
    const text = 'b'.repeat(100_000);
    const call = await alice.call('echo', { text });
    await call.untilEnd();
    expect(call.messages.at(-1)).toMatchObject({ result: { content: [{ text }] } });
  });
});

describe('protocol versions and handlers', () => {
  it.each(['2025-11-25', '2025-06-18', '2025-03-26'])('serves a %s client', async (version) => {
    const { server } = await started();
    const init = await fetch(server.url, {
      method: 'POST',
      headers: { Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'old', version: '1' } },
      }),
    });
    expect(init.status).toBe(200);
    expect(await init.text()).toContain(`"protocolVersion":"${version}"`);
    const client = new RawClient(server.url, { 'MCP-Protocol-Version': version });
    client.sessionId = init.headers.get('mcp-session-id') ?? undefined;
    const call = await client.call('echo', { text: version });
    await call.untilEnd();
    expect(call.messages.at(-1)).toMatchObject({ result: { content: [{ text: version }] } });
  });

  it('the Web-standard fetch handler serves the same protocol without a socket', async () => {
    const { server } = await started();
    const post = (body: unknown, sessionId?: string) =>
      server.continuity.fetch(
        new Request('http://localhost/mcp', {
          method: 'POST',
          headers: {
            Accept: 'application/json, text/event-stream',
            'Content-Type': 'application/json',
            ...(sessionId ? { 'Mcp-Session-Id': sessionId } : {}),
          },
          body: JSON.stringify(body),
        }),
      );
    const init = await post({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'f', version: '1' } },
    });
    const sessionId = init.headers.get('mcp-session-id') as string;
    expect(await init.text()).toContain('"serverInfo"');
    const call = await post(
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'web' } } },
      sessionId,
    );
    expect(call.headers.get('content-type')).toBe('text/event-stream');
    expect(await call.text()).toContain('"text":"web"');
    expect((await server.continuity.fetch(new Request('http://localhost/elsewhere'))).status).toBe(404);
  });
});

describe('graceful close', () => {
  it('with the memory log, open streams receive event: close (shutdown) and end', async () => {
    const { server, client } = await started();
    await client.initialize();
    const standalone = await client.get();
    await standalone.until(() => standalone.events.length >= 1, 5_000, 'priming');
    await server.continuity.close();
    await standalone.untilEnd();
    expect(standalone.events.at(-1)).toMatchObject({ event: 'close', data: '{"reason":"shutdown"}' });
  });
});
