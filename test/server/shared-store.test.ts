import { createClient } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisEventLog } from '../../src/redis.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { RawClient, startServer } from './harness.js';

/**
 * Two server instances in one process, each with its own connection to one Redis, addressed directly:
 * the decisions and hand-offs of a shared session, one at a time. (test/multi-instance runs them as
 * separate processes behind a balancer, with kill -9.) The poll that backs up the change feed is set
 * far beyond each test, so what arrives from the other instance arrived through the feed.
 */
let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.dispose();
});
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function pair(options: { idleTtlMs?: number } = {}) {
  const keyPrefix = `shared-${Math.random().toString(36).slice(2)}:`;
  const start = () =>
    startServer({
      eventLog: new RedisEventLog({ url: redis.url, keyPrefix }),
      sharedStorePollMs: 600_000,
      instanceLeaseMs: 5_000,
      ...(options.idleTtlMs ? { sessionIdleTtlMs: options.idleTtlMs } : {}),
    });
  const a = await start();
  const b = await start();
  cleanups.push(
    () => a.close(),
    () => b.close(),
  );
  const onA = new RawClient(a.url);
  await onA.initialize();
  const onB = new RawClient(b.url);
  onB.sessionId = onA.sessionId;
  return { a, b, onA, onB };
}

const progressOf = (messages: Array<Record<string, unknown>>) =>
  messages
    .filter((m) => m.method === 'notifications/progress')
    .map((m) => (m.params as { progress: number }).progress);

describe('a session shared by two instances through Redis', () => {
  it('a resume on the other instance replays, then tails the live appends through the change feed', async () => {
    const { a, b, onA, onB } = await pair();
    const call = await onA.call('chatty', { count: 30, intervalMs: 15 }, 'c1');
    await call.until(() => progressOf(call.messages).length >= 5, 5_000, 'five progress events');
    call.cut();
    const cursor = call.events.filter((e) => e.id).at(-1)?.id as string;
    const resumed = await onB.get(cursor);
    expect(resumed.response.status).toBe(200);
    await resumed.untilEnd(10_000);
    const seen = [...progressOf(call.messages), ...progressOf(resumed.messages)];
    expect(seen).toEqual(Array.from({ length: 30 }, (_, n) => n + 1));
    expect(resumed.messages.at(-1)).toMatchObject({ id: 'c1', result: { content: [{ text: 'sent 30' }] } });
    // The call ran on A only; B served the stream without an SDK server call of its own.
    expect(a.servers).toHaveLength(1);
    expect(b.servers).toHaveLength(1); // B re-created the session's SDK server, initialized as the client did
  });

  it('a request id re-sent to the other instance is not run again: it gets the original stream', async () => {
    const { a, b, onA, onB } = await pair();
    const first = await onA.call('charge', { key: 'card', ms: 300 }, 42);
    const again = await onB.call('charge', { key: 'card', ms: 300 }, 42);
    await first.untilEnd(5_000);
    await again.untilEnd(5_000);
    expect(a.effects.get('card')).toBe(1);
    expect(b.effects.get('card')).toBeUndefined();
    expect(again.messages.at(-1)).toMatchObject({ id: 42, result: { content: [{ text: 'charged card' }] } });
  });

  it('calls alternating between the instances do not take turns on the record: two scripts per call, as on one', async () => {
    const { onA, onB } = await pair();
    const stats = createClient({ url: redis.url });
    await stats.connect();
    // Script calls so far, for the whole server (this file's tests run one at a time).
    const scripts = async () => {
      const info = await stats.info('commandstats');
      return (
        Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0) +
        Number(/cmdstat_eval:calls=(\d+)/.exec(info)?.[1] ?? 0)
      );
    };
    try {
      for (const [i, on] of [onA, onB, onA, onB].entries())
        await (await on.call('echo', { text: `w${i}` })).untilEnd();
      const before = await scripts();
      const calls = 20;
      for (let i = 0; i < calls; i++) {
        const call = await (i % 2 === 0 ? onA : onB).call('echo', { text: `t${i}` });
        await call.untilEnd();
        expect(call.messages.at(-1)).toMatchObject({ result: { content: [{ text: `t${i}` }] } });
      }
      // Each call: its admission's commit (rebased after the other instance's, not refused, read and
      // made again) and its answer's append. Refused and re-read, it was four; the slack is lease renewals.
      expect((await scripts()) - before).toBeLessThanOrEqual(calls * 2 + 6);
    } finally {
      await stats.close();
    }
  });

  it('the answer to a server-to-client request, POSTed to the other instance, reaches the instance that asked', async () => {
    const { a, b, onA, onB } = await pair();
    const call = await onA.call('ask-client', {}, 'asking');
    await call.until(() => call.messages.some((m) => m.method === 'ping'), 5_000, 'the server asking');
    const ping = call.messages.find((m) => m.method === 'ping') as { id: string };
    // Tagged with the asking instance, so two instances' SDK servers (both counting from 0) never collide.
    expect(ping.id).toMatch(/^mcpc~[0-9a-f]+~0$/);
    const answered = await onB.notify({ jsonrpc: '2.0', id: ping.id, result: {} });
    expect(answered.status).toBe(202);
    await call.untilEnd(5_000);
    expect(call.messages.at(-1)).toMatchObject({
      id: 'asking',
      result: { content: [{ text: 'the client answered' }] },
    });
    expect(a.servers.length + b.servers.length).toBe(2);
  });

  it('a cancellation POSTed to the other instance reaches the instance running the call', async () => {
    const { a, b, onA, onB } = await pair();
    const call = await onA.call('slow', { ms: 5_000 }, 'long');
    await new Promise((r) => setTimeout(r, 100));
    const cancelled = await onB.notify({
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 'long', reason: 'changed my mind' },
    });
    expect(cancelled.status).toBe(202);
    // The SDK server on A, which runs the call, aborts it; B's copy never heard of the request.
    const deadline = Date.now() + 3_000;
    while (a.effects.get('cancelled') === undefined && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(a.effects.get('cancelled')).toBe(1);
    expect(b.effects.get('cancelled')).toBeUndefined();
    // A cancelled call gets no answer (the SDK sends none).
    expect(call.messages.filter((m) => m.id === 'long')).toEqual([]);
    call.cut();
  });

  it('DELETE on one instance ends the streams attached on the other with event: close', async () => {
    const { b, onA, onB } = await pair();
    const standalone = await onA.get();
    expect(standalone.response.status).toBe(200);
    const deleted = await fetch(b.url, { method: 'DELETE', headers: onB.headers() });
    expect(deleted.status).toBe(200);
    await standalone.untilEnd(5_000);
    expect(standalone.events.at(-1)).toMatchObject({ event: 'close' });
    expect(JSON.parse(standalone.events.at(-1)?.data ?? '{}')).toEqual({ reason: 'terminated' });
    const afterOnA = await onA.call('echo', { text: 'x' });
    expect(afterOnA.response.status).toBe(404);
  });

  it('idle expiry counts activity on every instance, then ends the session on both', async () => {
    const { onA, onB } = await pair({ idleTtlMs: 600 });
    // Busy on B for twice the TTL: A, where the session began and then sat idle, must not expire it.
    const until = Date.now() + 1_300;
    while (Date.now() < until) {
      const r = await onB.call('echo', { text: 'ping' });
      await r.untilEnd();
      expect(r.response.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    const stillThere = await onA.call('echo', { text: 'on A' });
    await stillThere.untilEnd();
    expect(stillThere.response.status).toBe(200);
    // Idle everywhere for well over the TTL: gone on both.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect((await onA.call('echo', { text: 'x' })).response.status).toBe(404);
    expect((await onB.call('echo', { text: 'x' })).response.status).toBe(404);
  });
});
