import { describe, expect, it } from 'vitest';
import {
  DEFAULT_STALL_TIMEOUT_MS,
  MAX_DERIVED_STALL_MS,
  MAX_EVENT_ID_LENGTH,
  MAX_SERVER_RETRY_MS,
  MAX_TIMER_MS,
  MIN_DERIVED_STALL_MS,
} from '../machines/client/limits.js';
import { stallTimeoutFor } from '../machines/client/session.machine.js';
import { JsonRpcCode } from '../machines/codes.js';
import { DEFAULT_RECONNECT_POLICY, defaultRetryPolicy, reconnectDelay } from '../machines/index.js';
import {
  ADVERTISED,
  activeClient,
  initResult,
  type ScriptedExchange,
  scriptedClient,
  toolCall,
} from './helpers/scripted-client.js';

/**
 * The client machines against a hostile server (issue 13, client side): every loop bounded, every delay
 * the server picks clamped, every byte it sends bounded, nothing it sends decides for the client.
 * The scripted client's policy: 100 ms initial, ×2, 1 s max, 3 retries, no jitter.
 */
type Client = ReturnType<typeof scriptedClient>;

const methodOf = (e: ScriptedExchange) => (e.request.body as { method?: string } | undefined)?.method;
const isInitialize = (e: ScriptedExchange) => methodOf(e) === 'initialize';
const bodyId = (e: ScriptedExchange) => (e.request.body as { id?: string | number } | undefined)?.id;

/**
 * A server that speaks just enough MCP (initialize, initialized) and answers everything else with
 * `other`, from the exchange at index `from` on. Runs `ms` of virtual time in 10 ms steps; fails if the
 * client ever sends more than `cap` requests (a loop with no backoff would).
 */
function serve(
  c: Client,
  ms: number,
  other: (e: ScriptedExchange) => void,
  from = c.exchanges.length,
  cap = 200,
) {
  let seen = from;
  let sessions = 1;
  const initializedAt: number[] = [];
  for (let t = 0; t < ms; t += 10) {
    while (seen < c.exchanges.length) {
      if (seen > cap) throw new Error(`more than ${cap} requests: an unbounded loop`);
      const e = c.exchanges[seen++] as ScriptedExchange;
      if (e.aborted) continue;
      if (isInitialize(e)) {
        initializedAt.push(c.clock.now());
        sessions++;
        e.reply(
          { type: 'http.stream', sessionId: `S${sessions}`, advertisement: ADVERTISED },
          { type: 'sse.event', id: 'e-1-0' },
          { type: 'sse.event', id: 'e-1-1', message: initResult(bodyId(e)) },
          { type: 'net.ended' },
        );
      } else if (methodOf(e) === 'notifications/initialized') e.reply({ type: 'http.response', status: 202 });
      else other(e);
    }
    c.clock.increment(10);
  }
  return { initializedAt, requests: seen };
}

const notFound = (e: ScriptedExchange) => e.reply({ type: 'http.response', status: 404 });

describe('client against a hostile server: bounded loops', () => {
  it('404 to everything after initialize: re-initializes back off, then the transport fails', () => {
    const c = activeClient();
    const from = c.exchanges.length;
    c.send(toolCall(1, 'charge'));
    const { initializedAt, requests } = serve(c, 20_000, notFound, from);
    // One immediate re-initialize, then one per retry (3), each after its backoff: 100, 200, 400 ms.
    expect(initializedAt).toHaveLength(4);
    const waits = initializedAt.slice(1).map((t, i) => t - (initializedAt[i] as number));
    expect(waits[0]).toBeGreaterThanOrEqual(100);
    expect(waits[1]).toBeGreaterThanOrEqual(200);
    expect(waits[2]).toBeGreaterThanOrEqual(400);
    expect(requests).toBeLessThan(40);
    expect(c.actor.getSnapshot().value).toBe('failed');
    expect(c.failures).toHaveLength(1);
    expect(c.failures[0]).toMatch(/gave up re-initializing/);
    // The call ended exactly once, and nothing is left running.
    expect(c.delivered.filter((m) => 'id' in m && m.id === 1)).toHaveLength(1);
    expect(c.delivered.find((m) => 'id' in m && m.id === 1)).toMatchObject({
      error: { code: JsonRpcCode.OUTCOME_UNKNOWN },
    });
    expect(c.open()).toHaveLength(0);
    expect(c.actor.getSnapshot().context.ledger).toEqual({});
    expect(c.persisted.at(-1)).toBeNull();
    c.send(toolCall(2, 'later'));
    expect(c.delivered.at(-1)).toMatchObject({ id: 2, error: { code: JsonRpcCode.REQUEST_FAILED } });
  });

  it('a new session whose initialize fails: the transport fails clearly, every call ends', () => {
    const c = activeClient();
    c.send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    notFound(c.last());
    expect(isInitialize(c.last())).toBe(true);
    c.last().reply({ type: 'http.response', status: 400 });
    expect(c.actor.getSnapshot().value).toBe('failed');
    expect(c.failures).toEqual(['the session was lost and re-initializing it failed']);
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { code: JsonRpcCode.OUTCOME_UNKNOWN } });
    expect(c.actor.getSnapshot().context.ledger).toEqual({});
  });

  it('a session that stayed active for the longest backoff delay has proved itself: the count starts over', () => {
    const standaloneOk = (e: ScriptedExchange) =>
      e.reply({ type: 'http.stream', sessionId: e.request.sessionId });
    const c = activeClient();
    // The session is lost when the resume of its standalone stream is answered 404.
    const loseSession = () => {
      c.open()
        .findLast((e) => e.request.method === 'GET')
        ?.reply({ type: 'net.failed', fault: 'reset' });
      c.clock.increment(100);
      notFound(c.last());
    };
    loseSession();
    expect(isInitialize(c.last())).toBe(true);
    serve(c, 50, standaloneOk, c.exchanges.length - 1);
    expect(c.actor.getSnapshot().value).toBe('active');
    // Lost again at once: waits a backoff before the next initialize.
    loseSession();
    expect(isInitialize(c.last())).toBe(false);
    c.clock.increment(100);
    expect(isInitialize(c.last())).toBe(true);
    serve(c, 1_100, standaloneOk, c.exchanges.length - 1);
    expect(c.actor.getSnapshot().value).toBe('active');
    // Lost after a second of life: immediate again.
    loseSession();
    expect(isInitialize(c.last())).toBe(true);
  });

  it('a stream that opens and closes at once is backed off like a refused one, and a call gives up', () => {
    const c = activeClient();
    c.send(toolCall(1, 'slow'));
    c.last().reply({ type: 'http.stream' }, { type: 'sse.event', id: 'e-2-0' }, { type: 'net.ended' });
    const resumesAt: number[] = [];
    for (let t = 0; t < 10_000; t += 10) {
      const e = c.last();
      if (!e.aborted && e.request.method === 'GET' && e.request.lastEventId === 'e-2-0') {
        if (resumesAt.at(-1) !== c.clock.now()) {
          resumesAt.push(c.clock.now());
          e.reply({ type: 'http.stream' }, { type: 'net.ended' });
        }
      }
      c.clock.increment(10);
    }
    // 100 ms after the priming event (progress), then 200 and 400: no constant rate, then given up.
    expect(resumesAt.map((t, i) => t - (i === 0 ? 0 : (resumesAt[i - 1] as number)))).toEqual([
      100, 200, 400,
    ]);
    expect(c.delivered.at(-1)).toMatchObject({
      id: 1,
      error: { code: JsonRpcCode.OUTCOME_UNKNOWN, data: { reason: 'reconnect_given_up' } },
    });
  });

  it('the standalone stream that opens and closes at once polls at a growing delay, up to the longest', () => {
    const c = activeClient();
    const getsAt: number[] = [];
    for (let t = 0; t < 10_000; t += 10) {
      const e = c.last();
      if (!e.aborted && e.request.method === 'GET' && !getsAt.includes(c.clock.now())) {
        getsAt.push(c.clock.now());
        e.reply({ type: 'http.stream', sessionId: 'S1' }, { type: 'net.ended' });
      }
      c.clock.increment(10);
    }
    const waits = getsAt.slice(1).map((t, i) => t - (getsAt[i] as number));
    expect(waits.slice(0, 5)).toEqual([100, 200, 400, 800, 1_000]);
    expect(getsAt.length).toBeLessThanOrEqual(15);
  });

  it('a 410 with resumeAfter answered to every resume: the policy retries, then the call ends', () => {
    const c = activeClient();
    c.send(toolCall(1, 'chatty'));
    c.last().reply({ type: 'http.stream' }, { type: 'sse.event', id: 'e-2-0' }, { type: 'net.ended' });
    const gone = {
      type: 'http.response' as const,
      status: 410,
      body: { error: { data: { reason: 'resume_window_exceeded', lostCount: 1, resumeAfter: 'e-2-5' } } },
    };
    const from = c.exchanges.length;
    const { requests } = serve(c, 20_000, (e) => e.reply(gone), from);
    expect(c.gaps.length).toBeLessThanOrEqual(DEFAULT_RECONNECT_POLICY.maxRetries + 2);
    expect(requests - from).toBeLessThanOrEqual(6);
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { data: { reason: 'reconnect_given_up' } } });
    expect(c.actor.getSnapshot().context.streams['n:1']).toBeUndefined();
  });
});

describe('client against a hostile server: delays clamped', () => {
  it.each([
    [3_000_000_000, MAX_SERVER_RETRY_MS],
    [99_999_999, MAX_SERVER_RETRY_MS],
    [5_000, 5_000],
  ])('retry: %i waits %i ms before the resume', (retry, expected) => {
    const c = activeClient();
    c.send(toolCall(1, 'slow'));
    c.last().reply(
      { type: 'http.stream' },
      { type: 'sse.retry', ms: retry },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'net.ended' },
    );
    const before = c.exchanges.length;
    c.clock.increment(expected - 1);
    expect(c.exchanges.length).toBe(before);
    c.clock.increment(1);
    expect(c.last().request).toMatchObject({ method: 'GET', lastEventId: 'e-2-0' });
  });

  it('every reconnect delay fits a timer, whatever the policy or the server say', () => {
    const huge = {
      initialDelayMs: 1e12,
      maxDelayMs: 1e15,
      factor: 10,
      maxRetries: 3,
      jitter: 'none' as const,
    };
    expect(reconnectDelay(5, huge, undefined, 1)).toBe(MAX_TIMER_MS);
    expect(reconnectDelay(0, DEFAULT_RECONNECT_POLICY, Number.POSITIVE_INFINITY, 1)).toBeLessThanOrEqual(
      MAX_SERVER_RETRY_MS,
    );
  });

  it('the stall timeout: the application wins (fit to a timer), else three heartbeats within bounds, else 300 s', () => {
    const config = { policy: DEFAULT_RECONNECT_POLICY, retryPolicy: defaultRetryPolicy, seed: 1 };
    const withHeartbeat = (heartbeatMs: number) => ({ ...ADVERTISED, heartbeatMs });
    expect(stallTimeoutFor({ ...config, stallTimeoutMs: 150 }, undefined)).toBe(150);
    expect(stallTimeoutFor({ ...config, stallTimeoutMs: 1e12 }, undefined)).toBe(MAX_TIMER_MS);
    expect(stallTimeoutFor({ ...config, stallTimeoutMs: undefined }, withHeartbeat(15_000))).toBe(45_000);
    expect(stallTimeoutFor({ ...config, stallTimeoutMs: undefined }, withHeartbeat(3_000_000_000))).toBe(
      MAX_DERIVED_STALL_MS,
    );
    expect(stallTimeoutFor({ ...config, stallTimeoutMs: undefined }, withHeartbeat(1))).toBe(
      MIN_DERIVED_STALL_MS,
    );
    expect(stallTimeoutFor({ ...config, stallTimeoutMs: undefined }, ADVERTISED)).toBe(
      DEFAULT_STALL_TIMEOUT_MS,
    );
  });
});

describe('client against a hostile server: the stall timer covers the whole exchange', () => {
  it('a black hole before the headers ends at the default stall timeout; the call ends', () => {
    const c = activeClient();
    c.send(toolCall(1, 'charge'));
    const post = c.last();
    c.clock.increment(DEFAULT_STALL_TIMEOUT_MS - 1);
    expect(post.aborted).toBe(false);
    c.clock.increment(1);
    expect(post.aborted).toBe(true);
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { code: JsonRpcCode.OUTCOME_UNKNOWN } });
  });

  it('bytes before the answer restart the timer; silence after them stalls', () => {
    const c = activeClient({ stallTimeoutMs: 1_000 });
    c.send(toolCall(1, 'x'));
    const post = c.last();
    for (let i = 0; i < 5; i++) {
      c.clock.increment(900);
      post.reply({ type: 'sse.activity' });
    }
    expect(post.aborted).toBe(false);
    c.clock.increment(1_000);
    expect(post.aborted).toBe(true);
  });
});

describe('client against a hostile server: what it sends is bounded and checked', () => {
  it(`an event id longer than ${MAX_EVENT_ID_LENGTH} characters is never kept nor sent back`, () => {
    const c = activeClient();
    c.send(toolCall(1, 'x'));
    const long = 'x'.repeat(MAX_EVENT_ID_LENGTH + 1);
    const note = { jsonrpc: '2.0' as const, method: 'notifications/progress', params: { n: 1 } };
    c.last().reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'sse.event', id: long, message: note },
      { type: 'net.failed', fault: 'reset' },
    );
    expect(c.delivered.at(-1)).toEqual(note);
    const ids = c.persisted.map((r) => r?.streams['n:1']?.lastEventId);
    expect(ids).not.toContain(long);
    c.clock.increment(100);
    expect(c.last().request).toMatchObject({ method: 'GET', lastEventId: 'e-2-0' });
  });

  it('an answer to our own call that is not JSON-RPC ends the call at once with a clear error', () => {
    const c = activeClient();
    c.send(toolCall(1, 'x'));
    c.last().reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'sse.event', id: 'e-2-1', data: '{"id":1,"result":5}', invalid: { id: 1 } },
    );
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { code: JsonRpcCode.MALFORMED_ANSWER } });
    expect(c.actor.getSnapshot().context.streams['n:1']).toBeUndefined();
    expect(c.actor.getSnapshot().context.ledger).toEqual({});
  });

  it('a 200 JSON body that is not JSON-RPC ends the call with an error, not silence', () => {
    const c = activeClient();
    c.send(toolCall(1, 'x'));
    c.last().reply({ type: 'http.response', status: 200, body: { jsonrpc: '2.0', id: 1, result: 'no' } });
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { code: JsonRpcCode.UNEXPECTED_STATUS } });
  });

  it('a 202 to a call, or a 204 to its resume, still ends the call (nothing else would)', () => {
    const c = activeClient();
    c.send(toolCall(1, 'x'));
    c.last().reply({ type: 'http.response', status: 202 });
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { code: JsonRpcCode.OUTCOME_UNKNOWN } });
    c.send(toolCall(2, 'y'));
    c.last().reply({ type: 'http.stream' }, { type: 'sse.event', id: 'e-3-0' }, { type: 'net.ended' });
    c.clock.increment(100);
    c.last().reply({ type: 'http.response', status: 204 });
    expect(c.delivered.at(-1)).toMatchObject({ id: 2, error: { code: JsonRpcCode.OUTCOME_UNKNOWN } });
    expect(c.actor.getSnapshot().context.ledger).toEqual({});
  });

  it('a call the application cancelled (the SDK timed it out) releases its stream and ledger entry', () => {
    const c = activeClient();
    c.send(toolCall(1, 'slow'));
    const post = c.last();
    post.reply({ type: 'http.stream' }, { type: 'sse.event', id: 'e-2-0' });
    const n = c.delivered.length;
    c.send({
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 1, reason: 'timeout' },
    });
    expect(post.aborted).toBe(true);
    const ctx = c.actor.getSnapshot().context;
    expect(ctx.streams['n:1']).toBeUndefined();
    expect(ctx.ledger).toEqual({});
    expect(c.persisted.at(-1)?.streams['n:1']).toBeUndefined();
    // The notification still goes to the server; nothing is delivered for the call.
    expect(c.last().request.body).toMatchObject({ method: 'notifications/cancelled' });
    expect(c.delivered.length).toBe(n);
  });

  it('a cancelled initialize (the SDK timed out connect) keeps its stream: the session is not the call', () => {
    const c = scriptedClient();
    c.send({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {} });
    const post = c.last();
    c.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 0 } });
    expect(post.aborted).toBe(false);
    post.reply(
      { type: 'http.stream', sessionId: 'S1' },
      { type: 'sse.event', id: 'e-1-1', message: initResult() },
    );
    expect(c.actor.getSnapshot().value).toBe('active');
  });

  it('a call cancelled while the session is re-established is not re-sent', () => {
    const c = activeClient();
    c.send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    notFound(c.last());
    expect(c.actor.getSnapshot().context.resendQueue).toHaveLength(1);
    const from = c.exchanges.length - 1;
    c.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } });
    expect(c.actor.getSnapshot().context.resendQueue).toHaveLength(0);
    serve(c, 50, notFound, from);
    expect(c.exchanges.filter((e) => methodOf(e) === 'tools/list')).toHaveLength(1);
  });

  it('a cursor record of another server is not used: its session id and cursors are never sent', () => {
    const record = {
      serverUrl: 'http://127.0.0.1:1111/mcp',
      sessionId: 'OLD',
      streams: { standalone: { kind: 'standalone' as const, lastEventId: 'e-0-3' } },
    };
    const other = scriptedClient({ restored: record, serverUrl: 'http://127.0.0.1:2222/mcp' });
    expect(other.actor.getSnapshot().value).toBe('uninitialized');
    expect(other.exchanges).toHaveLength(0);
    expect(other.errors[0]).toMatch(/another server/);
    const same = scriptedClient({ restored: record, serverUrl: 'http://127.0.0.1:1111/mcp' });
    expect(same.actor.getSnapshot().value).toBe('active');
    expect(same.last().request).toMatchObject({ sessionId: 'OLD', lastEventId: 'e-0-3' });
    expect(same.persisted.at(-1)).toMatchObject({ serverUrl: 'http://127.0.0.1:1111/mcp' });
  });

  it('a session id that is too long or not visible ASCII is not adopted', () => {
    const c = scriptedClient();
    c.send({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {} });
    c.last().reply(
      { type: 'http.stream', sessionId: 'a b' },
      { type: 'sse.event', id: 'e-1-1', message: initResult() },
    );
    expect(c.actor.getSnapshot().context.sessionId).toBeUndefined();
    expect(c.errors.some((e) => /session id/.test(e))).toBe(true);
  });
});
