import { describe, expect, it } from 'vitest';
import { JsonRpcCode } from '../machines/codes.js';
import {
  ADVERTISED,
  activeClient,
  initialize,
  initResult,
  scriptedClient,
  toolCall,
} from './helpers/scripted-client.js';

const exchangeFor = (c: ReturnType<typeof activeClient>, id: number) =>
  c.exchanges.filter((e) => (e.request.body as { id?: unknown } | undefined)?.id === id);

describe('client session machine', () => {
  it('initializes: POST without a session id, adopts the id from the response, becomes active', () => {
    const c = scriptedClient();
    c.send(initialize);
    expect(c.actor.getSnapshot().value).toBe('initializing');
    expect(c.last().request).toMatchObject({ method: 'POST', sessionId: undefined, body: initialize });
    c.last().reply(
      { type: 'http.stream', sessionId: 'S1', advertisement: ADVERTISED },
      { type: 'sse.event', id: 'e-1-0' },
      { type: 'sse.event', id: 'e-1-1', message: initResult() },
    );
    expect(c.actor.getSnapshot().value).toBe('active');
    expect(c.actor.getSnapshot().context.sessionId).toBe('S1');
    expect(c.delivered).toEqual([initResult()]);
  });

  it('opens the standalone GET stream after notifications/initialized', () => {
    const c = activeClient();
    const gets = c.exchanges.filter((e) => e.request.method === 'GET');
    expect(gets).toHaveLength(1);
    expect(gets[0]?.request).toMatchObject({ sessionId: 'S1' });
    expect(gets[0]?.request.lastEventId).toBeUndefined();
  });

  /** @spec design-note "the trap is treating the first case like the second" */
  it('a reset mid-call resumes with Last-Event-ID on the same session; nothing is re-sent', () => {
    const c = activeClient();
    c.send(toolCall(1, 'charge'));
    const post = exchangeFor(c, 1)[0];
    post?.reply({ type: 'http.stream', sessionId: 'S1' }, { type: 'sse.event', id: 'e-2-0' });
    post?.reply({ type: 'net.failed', fault: 'reset' });
    expect(c.actor.getSnapshot().value).toBe('active');
    c.clock.increment(100);
    const resume = c.last();
    expect(resume.request).toMatchObject({ method: 'GET', sessionId: 'S1', lastEventId: 'e-2-0' });
    expect(resume.request.body).toBeUndefined();
    resume.reply(
      { type: 'http.stream', sessionId: 'S1' },
      { type: 'sse.event', id: 'e-2-1', message: { jsonrpc: '2.0', id: 1, result: { ok: true } } },
      { type: 'net.ended' },
    );
    expect(c.delivered.at(-1)).toEqual({ jsonrpc: '2.0', id: 1, result: { ok: true } });
    expect(exchangeFor(c, 1)).toHaveLength(1);
    expect(
      c.exchanges.filter((e) => (e.request.body as { method?: string })?.method === 'initialize'),
    ).toHaveLength(1);
    expect(c.actor.getSnapshot().context.sessionId).toBe('S1');
  });

  it.each([500, 502, 503, 504])(
    'a %i on resume is a transport fault too: back off and try again',
    (status) => {
      const c = activeClient();
      c.send(toolCall(1, 'charge'));
      exchangeFor(c, 1)[0]?.reply(
        { type: 'http.stream' },
        { type: 'sse.event', id: 'e-2-0' },
        { type: 'net.ended' },
      );
      c.clock.increment(100);
      c.last().reply({ type: 'http.response', status });
      c.clock.increment(200);
      expect(c.last().request).toMatchObject({ method: 'GET', lastEventId: 'e-2-0' });
      expect(c.actor.getSnapshot().value).toBe('active');
    },
  );

  /** @spec transports#session-management item 4; design-note "404 → re-initialize, unknown outcome" */
  it('404: re-initializes; a non-idempotent call ends outcome unknown, a read-only one is re-sent', () => {
    const c = activeClient();
    c.send({ jsonrpc: '2.0', id: 5, method: 'tools/list' });
    exchangeFor(c, 5)[0]?.reply(
      { type: 'http.stream' },
      {
        type: 'sse.event',
        id: 'e-3-1',
        message: {
          jsonrpc: '2.0',
          id: 5,
          result: { tools: [{ name: 'search', annotations: { readOnlyHint: true } }, { name: 'charge' }] },
        },
      },
    );
    c.send(toolCall(1, 'charge'));
    c.send(toolCall(2, 'search'));
    exchangeFor(c, 1)[0]?.reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-4-0' },
      { type: 'net.failed', fault: 'reset' },
    );
    c.clock.increment(100);
    c.last().reply({ type: 'http.response', status: 404 });

    expect(c.actor.getSnapshot().value).toBe('reinitializing');
    const unknown = c.delivered.find((m) => 'error' in m && m.id === 1);
    expect(unknown).toMatchObject({
      error: { code: JsonRpcCode.OUTCOME_UNKNOWN, data: { reason: 'session_lost' } },
    });
    expect(c.gaps.at(-1)).toMatchObject({ streamKey: 'standalone', reason: 'session_lost', sessionId: 'S1' });
    const reinit = c.last();
    expect(reinit.request).toMatchObject({
      method: 'POST',
      sessionId: undefined,
      body: { method: 'initialize' },
    });
    expect(reinit.request.body).not.toMatchObject({ id: 0 });

    reinit.reply(
      { type: 'http.stream', sessionId: 'S2' },
      { type: 'sse.event', id: 'f-1-1', message: initResult((reinit.request.body as { id: string }).id) },
    );
    expect(c.actor.getSnapshot().value).toBe('active');
    expect(c.actor.getSnapshot().context.sessionId).toBe('S2');
    const onS2 = c.exchanges.filter((e) => e.request.sessionId === 'S2').map((e) => e.request);
    expect(onS2).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          method: 'POST',
          body: { jsonrpc: '2.0', method: 'notifications/initialized' },
        }),
        expect.objectContaining({ method: 'GET' }),
        expect.objectContaining({ method: 'POST', body: toolCall(2, 'search') }),
      ]),
    );
    expect(onS2.some((r) => (r.body as { id?: unknown } | undefined)?.id === 1)).toBe(false);
    expect(onS2.find((r) => r.method === 'GET')?.lastEventId).toBeUndefined();
    // The initialize answer of the new session is the transport's business, not the application's.
    expect(c.delivered.filter((m) => 'result' in m && 'protocolVersion' in m.result)).toHaveLength(1);
  });

  it('a call whose own POST got 404 never ran: it is sent again on the new session, even a charge', () => {
    const c = activeClient();
    c.send(toolCall(3, 'charge'));
    exchangeFor(c, 3)[0]?.reply({ type: 'http.response', status: 404 });
    expect(c.delivered.some((m) => 'error' in m && m.id === 3)).toBe(false);
    const reinit = c.last();
    reinit.reply(
      { type: 'http.stream', sessionId: 'S2' },
      { type: 'sse.event', message: initResult((reinit.request.body as { id: string }).id) },
    );
    expect(exchangeFor(c, 3).map((e) => e.request.sessionId)).toEqual(['S1', 'S2']);
  });

  it('a POST re-sent after a reset and then answered 404 may have run the first time: outcome unknown, not re-sent', () => {
    const c = activeClient({}, { ...ADVERTISED, duplicateRequestProtection: true });
    c.send(toolCall(3, 'charge'));
    exchangeFor(c, 3)[0]?.reply({ type: 'net.failed', fault: 'reset' });
    c.clock.increment(100);
    exchangeFor(c, 3)[1]?.reply({ type: 'http.response', status: 404 });
    expect(c.delivered.at(-1)).toMatchObject({ id: 3, error: { data: { reason: 'session_lost' } } });
    const reinit = c.last();
    reinit.reply(
      { type: 'http.stream', sessionId: 'S2' },
      { type: 'sse.event', message: initResult((reinit.request.body as { id: string }).id) },
    );
    expect(exchangeFor(c, 3).map((e) => e.request.sessionId)).toEqual(['S1', 'S1']);
  });

  it('messages sent while re-initializing are held, then sent on the new session', () => {
    const c = activeClient();
    c.open()
      .find((e) => e.request.method === 'GET')
      ?.reply({ type: 'net.failed', fault: 'reset' });
    c.clock.increment(100);
    expect(c.last().request).toMatchObject({ method: 'GET', lastEventId: 'e-0-0' });
    c.last().reply({ type: 'http.response', status: 404 });
    expect(c.actor.getSnapshot().value).toBe('reinitializing');
    c.send(toolCall(9, 'x'));
    expect(exchangeFor(c, 9)).toHaveLength(0);
    const reinit = c.last();
    reinit.reply(
      { type: 'http.stream', sessionId: 'S2' },
      {
        type: 'sse.event',
        message: initResult((reinit.request.body as { id: string }).id),
      },
    );
    expect(exchangeFor(c, 9)[0]?.request.sessionId).toBe('S2');
  });

  /** @spec design-note condition 4: 409/410 → surface possible event loss */
  it('410: reports the gap with the server details and resumes at the oldest retained event', () => {
    const c = activeClient();
    c.send(toolCall(1, 'chatty'));
    const post = exchangeFor(c, 1)[0];
    post?.reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-0' },
      {
        type: 'sse.event',
        id: 'e-2-1',
        message: { jsonrpc: '2.0', method: 'notifications/progress', params: { n: 1 } },
      },
    );
    post?.reply({ type: 'net.failed', fault: 'reset' });
    c.clock.increment(100);
    c.last().reply({
      type: 'http.response',
      status: 410,
      body: {
        jsonrpc: '2.0',
        id: null,
        error: {
          code: -32052,
          message: 'gone',
          data: {
            reason: 'resume_window_exceeded',
            requestedId: 'e-2-1',
            oldestId: 'e-2-5',
            headId: 'e-2-9',
            lostCount: 3,
            resumeAfter: 'e-2-4',
            streamComplete: false,
          },
        },
      },
    });
    expect(c.gaps.at(-1)).toMatchObject({
      streamKey: 'n:1',
      lostCount: 3,
      requestedId: 'e-2-1',
      resumeAfter: 'e-2-4',
      sessionId: 'S1',
    });
    expect(c.last().request).toMatchObject({ method: 'GET', lastEventId: 'e-2-4' });
    expect(c.actor.getSnapshot().value).toBe('active');
  });

  it('410 where the response itself was evicted: the call ends outcome unknown, it does not hang', () => {
    const c = activeClient();
    c.send(toolCall(1, 'charge'));
    exchangeFor(c, 1)[0]?.reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'net.failed', fault: 'reset' },
    );
    c.clock.increment(100);
    c.last().reply({
      type: 'http.response',
      status: 410,
      body: {
        error: {
          data: {
            reason: 'resume_window_exceeded',
            lostCount: 1,
            resumeAfter: 'e-2-1',
            streamComplete: true,
          },
        },
      },
    });
    c.last().reply({ type: 'http.stream' }, { type: 'net.ended' });
    expect(c.delivered.at(-1)).toMatchObject({
      id: 1,
      error: { code: JsonRpcCode.OUTCOME_UNKNOWN, data: { reason: 'response_evicted' } },
    });
  });

  it('event: close → terminated: no reconnects, pending calls outcome unknown, later calls refused', () => {
    const c = activeClient();
    c.send(toolCall(1, 'charge'));
    c.open()
      .find((e) => e.request.method === 'GET')
      ?.reply({ type: 'sse.event', event: 'close', data: 'terminated' });
    expect(c.actor.getSnapshot().value).toBe('terminated');
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { data: { reason: 'server_closed_session' } } });
    expect(c.open()).toHaveLength(0);
    const before = c.exchanges.length;
    c.clock.increment(60_000);
    expect(c.exchanges.length).toBe(before);
    c.send(toolCall(2, 'x'));
    expect(c.delivered.at(-1)).toMatchObject({ id: 2, error: { code: JsonRpcCode.REQUEST_FAILED } });
  });

  it('app.close sends DELETE, forgets the cursor, stops every stream and timer', () => {
    const c = activeClient();
    c.send(toolCall(1, 'slow'));
    c.actor.send({ type: 'app.close' });
    expect(c.deletes).toEqual(['S1']);
    expect(c.persisted.at(-1)).toBeNull();
    expect(c.open()).toHaveLength(0);
    expect(c.actor.getSnapshot().status).toBe('done');
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { data: { reason: 'transport_closed' } } });
  });

  it('persists the cursor after each delivered event', () => {
    const c = activeClient();
    c.send(toolCall(1, 'chatty'));
    exchangeFor(c, 1)[0]?.reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'sse.event', id: 'e-2-1', message: { jsonrpc: '2.0', method: 'notifications/progress' } },
    );
    expect(c.persisted.at(-1)).toMatchObject({
      sessionId: 'S1',
      streams: { 'n:1': { kind: 'request', lastEventId: 'e-2-1' }, standalone: { lastEventId: 'e-0-0' } },
    });
  });

  it('a restored cursor resumes the same session and streams; replayed answers go to onOrphanResult', () => {
    const c = scriptedClient({
      restored: {
        sessionId: 'S1',
        streams: {
          'n:7': { kind: 'request', lastEventId: 'e-3-2' },
          standalone: { kind: 'standalone', lastEventId: 'e-0-4' },
        },
      },
    });
    expect(c.actor.getSnapshot().value).toBe('active');
    expect(c.exchanges.map((e) => e.request)).toEqual([
      expect.objectContaining({ method: 'GET', sessionId: 'S1', lastEventId: 'e-3-2' }),
      expect.objectContaining({ method: 'GET', sessionId: 'S1', lastEventId: 'e-0-4' }),
    ]);
    c.exchanges[0]?.reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-3-3', message: { jsonrpc: '2.0', id: 7, result: {} } },
    );
    expect(c.orphans).toEqual([{ jsonrpc: '2.0', id: 7, result: {} }]);
    expect(c.delivered).toEqual([]);
  });

  it('an unexpected status is an error carrying status and body, not a guess', () => {
    const c = activeClient();
    c.send(toolCall(1, 'charge'));
    exchangeFor(c, 1)[0]?.reply({ type: 'http.response', status: 403, body: 'forbidden' });
    expect(c.delivered.at(-1)).toMatchObject({
      id: 1,
      error: { code: JsonRpcCode.UNEXPECTED_STATUS, data: { status: 403, body: 'forbidden' } },
    });
    expect(c.actor.getSnapshot().value).toBe('active');
  });
});
