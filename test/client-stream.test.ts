import { describe, expect, it } from 'vitest';
import { alreadyDelivered } from '../machines/client/absorb.js';
import { JsonRpcCode } from '../machines/codes.js';
import { activeClient, toolCall } from './helpers/scripted-client.js';

const progress = (n: number) =>
  ({ jsonrpc: '2.0', method: 'notifications/progress', params: { n } }) as const;

describe('client stream machine', () => {
  it('stall detection: no byte for stallTimeoutMs is a reset; heartbeats keep the stream', () => {
    const c = activeClient({ stallTimeoutMs: 1_000 });
    c.send(toolCall(1, 'slow'));
    const post = c.last();
    post.reply({ type: 'http.stream' }, { type: 'sse.event', id: 'e-2-0' });
    for (let i = 0; i < 5; i++) {
      c.clock.increment(900);
      post.reply({ type: 'sse.activity' });
    }
    expect(post.aborted).toBe(false);
    c.clock.increment(1_000);
    expect(post.aborted).toBe(true);
    c.clock.increment(100);
    expect(c.last().request).toMatchObject({ method: 'GET', lastEventId: 'e-2-0' });
  });

  it('replay overlap: an event id already delivered is never delivered again', () => {
    const c = activeClient();
    c.send(toolCall(1, 'chatty'));
    c.last().reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'sse.event', id: 'e-2-1', message: progress(1) },
      { type: 'sse.event', id: 'e-2-2', message: progress(2) },
      { type: 'net.failed', fault: 'reset' },
    );
    c.clock.increment(100);
    c.last().reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-1', message: progress(1) },
      { type: 'sse.event', id: 'e-2-2', message: progress(2) },
      { type: 'sse.event', id: 'e-2-3', message: progress(3) },
    );
    expect(c.delivered.filter((m) => 'method' in m && m.method === 'notifications/progress')).toEqual([
      progress(1),
      progress(2),
      progress(3),
    ]);
  });

  it('opaque ids (another server) are de-duplicated by memory', () => {
    expect(alreadyDelivered({ lastEventId: 'x', recentIds: ['a', 'b'] }, 'a')).toBe(true);
    expect(alreadyDelivered({ lastEventId: 'x', recentIds: ['a', 'b'] }, 'c')).toBe(false);
    expect(alreadyDelivered({ lastEventId: 'e-1-5', recentIds: [] }, 'e-1-5')).toBe(true);
    expect(alreadyDelivered({ lastEventId: 'e-1-5', recentIds: [] }, 'e-1-6')).toBe(false);
    expect(alreadyDelivered({ lastEventId: 'e-1-5', recentIds: [] }, 'f-1-2')).toBe(false);
  });

  it('honours the server retry field as a floor on the reconnect delay', () => {
    const c = activeClient();
    c.send(toolCall(1, 'slow'));
    const post = c.last();
    post.reply(
      { type: 'http.stream' },
      { type: 'sse.retry', ms: 3_000 },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'net.ended' },
    );
    const before = c.exchanges.length;
    c.clock.increment(2_999);
    expect(c.exchanges.length).toBe(before);
    c.clock.increment(1);
    expect(c.last().request).toMatchObject({ method: 'GET', lastEventId: 'e-2-0' });
  });

  it('a POST reset before any event, to a server without duplicate protection: outcome unknown, not re-sent', () => {
    const c = activeClient();
    c.send(toolCall(1, 'charge'));
    c.last().reply({ type: 'net.failed', fault: 'reset' });
    c.clock.increment(10_000);
    expect(c.exchanges.filter((e) => (e.request.body as { id?: unknown })?.id === 1)).toHaveLength(1);
    expect(c.delivered.at(-1)).toMatchObject({
      id: 1,
      error: { code: JsonRpcCode.OUTCOME_UNKNOWN, data: { reason: 'stream_unresumable' } },
    });
  });

  it('a POST reset before any event, to a server that de-duplicates: re-sent with the same id', () => {
    const c = activeClient(
      {},
      { retentionMs: 60_000, gapSignalling: true, duplicateRequestProtection: true },
    );
    c.send(toolCall(1, 'charge'));
    c.last().reply({ type: 'net.failed', fault: 'timeout' });
    c.clock.increment(100);
    expect(c.last().request).toMatchObject({ method: 'POST', body: toolCall(1, 'charge') });
  });

  it('a refused connection never carried the request: re-sent even without duplicate protection', () => {
    const c = activeClient();
    c.send(toolCall(1, 'charge'));
    c.last().reply({ type: 'net.failed', fault: 'refused' });
    c.clock.increment(100);
    expect(c.last().request).toMatchObject({ method: 'POST', body: toolCall(1, 'charge') });
  });

  it('bounded retries: a request stream gives up, and its call ends outcome unknown', () => {
    const c = activeClient();
    c.send(toolCall(1, 'slow'));
    c.last().reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'net.failed', fault: 'reset' },
    );
    for (let i = 0; i < 3; i++) {
      c.clock.increment(1_000);
      c.last().reply({ type: 'http.response', status: 503 });
    }
    expect(c.delivered.at(-1)).toMatchObject({ id: 1, error: { data: { reason: 'reconnect_given_up' } } });
    expect(c.actor.getSnapshot().value).toBe('active');
  });

  it('the standalone stream never gives up while the session lives; it polls at the longest delay', () => {
    const c = activeClient();
    const get = c.open().find((e) => e.request.method === 'GET');
    get?.reply({ type: 'net.failed', fault: 'reset' });
    for (let i = 0; i < 10; i++) {
      c.clock.increment(1_000);
      c.last().reply({ type: 'http.response', status: 503 });
    }
    c.clock.increment(1_000);
    expect(c.last().request).toMatchObject({ method: 'GET', lastEventId: 'e-0-0' });
    expect(c.last().aborted).toBe(false);
  });

  it('after a 410 it resumes at once; a second 410 before any stream opened waits for backoff (no spinning)', () => {
    const c = activeClient();
    c.send(toolCall(1, 'chatty'));
    c.last().reply(
      { type: 'http.stream' },
      { type: 'sse.event', id: 'e-2-0' },
      { type: 'net.failed', fault: 'reset' },
    );
    c.clock.increment(100);
    const gone = {
      type: 'http.response' as const,
      status: 410,
      body: { error: { data: { reason: 'resume_window_exceeded', lostCount: 2, resumeAfter: 'e-2-2' } } },
    };
    c.last().reply(gone);
    const immediate = c.last();
    expect(immediate.request).toMatchObject({ method: 'GET', lastEventId: 'e-2-2' });
    immediate.reply(gone);
    const before = c.exchanges.length;
    c.clock.increment(50);
    expect(c.exchanges.length).toBe(before);
    c.clock.increment(200);
    expect(c.exchanges.length).toBe(before + 1);
    expect(c.gaps).toHaveLength(2);
  });

  it('a priming event moves the cursor but delivers nothing', () => {
    const c = activeClient();
    const n = c.delivered.length;
    c.send(toolCall(1, 'x'));
    c.last().reply({ type: 'http.stream' }, { type: 'sse.event', id: 'e-2-0' });
    expect(c.delivered.length).toBe(n);
    expect(c.persisted.at(-1)?.streams['n:1']?.lastEventId).toBe('e-2-0');
  });

  it('a JSON (non-SSE) answer to a POST is delivered and ends the stream', () => {
    const c = activeClient();
    c.send(toolCall(1, 'x'));
    c.last().reply({
      type: 'http.response',
      status: 200,
      body: { jsonrpc: '2.0', id: 1, result: { ok: 1 } },
    });
    expect(c.delivered.at(-1)).toEqual({ jsonrpc: '2.0', id: 1, result: { ok: 1 } });
    expect(Object.keys(c.actor.getSnapshot().context.streams)).not.toContain('n:1');
  });
});
