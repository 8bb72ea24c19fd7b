import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ContinuityErrorCode } from '../../machines/continuity-extension.js';
import { RedisEventLog } from '../../src/server/redis-event-log.js';
import { RedisMemoStore } from '../../src/server/redis-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { startRoundRobinProxy } from '../support/round-robin-proxy.js';
import {
  CHARGE_PROGRESS_AT,
  callWithReissues,
  cancelFor,
  keyedCall,
  type Ledger,
  post,
  startKeyedServer,
} from './keyed-harness.js';

// One throwaway redis-server for the file. Without redis-server installed this fails, never skips.
let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer({ appendfsync: 'always' });
});
afterAll(async () => {
  await redis?.dispose();
});

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

let prefixes = 0;
async function fleet(leaseMs = 3000) {
  const keyPrefix = `keyed-${process.pid}-${++prefixes}:`;
  const ledger: Ledger = { charges: 0, aborted: 0, started: 0 };
  const one = async () => {
    const log = new RedisEventLog({ url: redis.url, keyPrefix });
    const memo = new RedisMemoStore({ url: redis.url, keyPrefix, memoWindowMs: 60_000 });
    const s = await startKeyedServer({ log, memo, ledger, leaseMs, pollMs: 50 });
    let stopped = false;
    const stop = async (kill = false) => {
      if (stopped) return;
      stopped = true;
      if (kill) memo.kill();
      await s.close();
      await memo.close();
      await log.close();
    };
    cleanup.push(() => stop());
    return { s, log, memo, stop };
  };
  return { a: await one(), b: await one(), ledger };
}

const progressOf = (events: { message: unknown }[]) =>
  events
    .map((e) => e.message as { method?: string; params?: { progress?: number; progressToken?: unknown } })
    .filter((m) => m.method === 'notifications/progress');

describe('keyed requests on Redis: instances share the memo and the key logs', () => {
  it('a re-issue landing on the other instance attaches there: one charge, the missing events, the result', async () => {
    const { a, b, ledger } = await fleet();
    const proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port: a.s.port },
      idleTimeoutMs: 300,
    });
    cleanup.push(() => proxy.close());
    const first = await post(
      proxy.url().toString(),
      keyedCall(1, 'charge', { amount: 2 }, 'key-fleet', { progressToken: 'a' }),
    );
    expect(first.cut).toBe(true);
    // On a busy machine the cut may come before the first event: then the re-issue names no last event
    // and must get every event; otherwise exactly the ones after it.
    const last = first.events.at(-1)?.id;
    const r = await post(
      b.s.url,
      keyedCall(2, 'charge', { amount: 2 }, 'key-fleet', {
        ...(last === undefined ? {} : { lastEventId: last }),
        progressToken: 'b',
      }),
    );
    expect(r.response).toMatchObject({ id: 2, result: { content: [{ text: 'charged 2 (#1)' }] } });
    const all = [...progressOf(first.events), ...progressOf(r.events)].map((m) => m.params?.progress);
    expect(all).toEqual(CHARGE_PROGRESS_AT.map((_, i) => i + 1));
    expect(progressOf(r.events).every((m) => m.params?.progressToken === 'b')).toBe(true);
    expect(ledger.started).toBe(1);
    expect(ledger.charges).toBe(1);
  }, 20_000);

  it('a balancer cutting every 300 ms idle, round robin over two instances: one charge, one result, each progress once', async () => {
    const { a, b, ledger } = await fleet();
    const rr = await startRoundRobinProxy([a.s.port, b.s.port]);
    cleanup.push(() => rr.close());
    const proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port: Number(new URL(rr.url).port) },
      idleTimeoutMs: 300,
    });
    cleanup.push(() => proxy.close());
    const r = await callWithReissues(
      proxy.url(new URL(rr.url).pathname).toString(),
      'charge',
      { amount: 6 },
      'key-rr',
    );
    expect(r.response).toMatchObject({ result: { content: [{ text: 'charged 6 (#1)' }] } });
    expect(r.attempts.length).toBeGreaterThan(1);
    expect(rr.routed.every((n) => n > 0)).toBe(true);
    expect(ledger.started).toBe(1);
    expect(ledger.charges).toBe(1);
    expect(progressOf(r.events).map((m) => m.params?.progress)).toEqual(
      CHARGE_PROGRESS_AT.map((_, i) => i + 1),
    );
    console.log(
      `[keyed redis] ${r.attempts.length} attempts, routed ${rr.routed.join('/')}, charges ${ledger.charges}`,
    );
  }, 30_000);

  it('two first attempts of one key racing on two instances run it once; both get the result', async () => {
    const { a, b, ledger } = await fleet();
    const [x, y] = await Promise.all([
      post(a.s.url, keyedCall(1, 'charge', { amount: 8 }, 'key-race')),
      post(b.s.url, keyedCall(2, 'charge', { amount: 8 }, 'key-race')),
    ]);
    expect(x.response).toMatchObject({ id: 1, result: { content: [{ text: 'charged 8 (#1)' }] } });
    expect(y.response).toMatchObject({ id: 2, result: { content: [{ text: 'charged 8 (#1)' }] } });
    expect(ledger.started).toBe(1);
  }, 20_000);

  it('the instance running it dies: its lease lapses, the watcher on the other instance and later re-issues get -32012', async () => {
    const { a, b, ledger } = await fleet(600);
    const first = post(a.s.url, keyedCall(1, 'charge', { amount: 4 }, 'key-death'));
    const deadline = Date.now() + 5000;
    while (ledger.started === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const watcher = post(b.s.url, keyedCall(2, 'charge', { amount: 4 }, 'key-death', { lastEventId: null }));
    await new Promise((r) => setTimeout(r, 150));
    const died = Date.now();
    await a.stop(true);
    await first;
    const w = await watcher;
    expect(w.response).toMatchObject({ id: 2, error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } });
    // Not before the lease could lapse (600 ms after its last renewal, at most 200 ms before the death).
    expect(Date.now() - died).toBeGreaterThanOrEqual(350);
    const again = await post(
      b.s.url,
      keyedCall(3, 'charge', { amount: 4 }, 'key-death', { lastEventId: null }),
    );
    expect(again.response).toMatchObject({ id: 3, error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } });
    expect(ledger.started).toBe(1);
  }, 20_000);

  it('an explicit cancel on the other instance aborts the body where it runs; every attempt gets -32013', async () => {
    const { a, b, ledger } = await fleet(600);
    const first = post(a.s.url, keyedCall(1, 'charge', { amount: 5 }, 'key-xcancel'));
    const deadline = Date.now() + 5000;
    while (ledger.started === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const c = await fetch(b.s.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(cancelFor(1, 'key-xcancel')),
    });
    expect(c.status).toBe(202);
    expect((await first).response).toMatchObject({ id: 1, error: { code: ContinuityErrorCode.CANCELLED } });
    while (ledger.aborted === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(ledger.aborted).toBe(1);
    expect(ledger.charges).toBe(0);
    const again = await post(
      b.s.url,
      keyedCall(2, 'charge', { amount: 5 }, 'key-xcancel', { lastEventId: null }),
    );
    expect(again.response).toMatchObject({ id: 2, error: { code: ContinuityErrorCode.CANCELLED } });
  }, 20_000);

  it('finished entries survive every instance: a new instance on the same Redis answers with the recorded result', async () => {
    const { a, b, ledger } = await fleet();
    const r = await post(
      a.s.url,
      keyedCall(1, 'chatty', { count: 3 }, 'key-durable', { progressToken: 't' }),
    );
    expect(r.response).toMatchObject({ result: {} });
    await a.stop();
    const again = await post(
      b.s.url,
      keyedCall(2, 'chatty', { count: 3 }, 'key-durable', {
        lastEventId: r.events[0]?.id as string,
        progressToken: 'u',
      }),
    );
    expect(progressOf(again.events).map((m) => [m.params?.progress, m.params?.progressToken])).toEqual([
      [2, 'u'],
      [3, 'u'],
    ]);
    expect(again.response).toMatchObject({ id: 2, result: { content: [{ text: 'said 3' }] } });
    void ledger;
  }, 20_000);
});
