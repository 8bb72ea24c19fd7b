import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import { ContinuityMetrics } from '../../src/index.js';
import { ServerMetric } from '../../src/metrics/names.js';
import { RedisMemoStore } from '../../src/redis.js';
import type { MemoStore } from '../../src/server/memo-store.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { SqliteMemoStore } from '../../src/sqlite.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { eventually, otelSdk } from './otel.js';

let redis: RedisServer | undefined;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.dispose();
});

/**
 * `mcp_continuity.server.memo_entries`: the memo's live entries as its store counts them, read through
 * an OTel SDK's gauge and `figures()`. A running entry counts, a finished one counts while inside its
 * window, and none counts once the window has passed (on a virtual clock). Redis counts asynchronously:
 * its gauge reports the count of the previous reading, so the test reads until it settles.
 */
const NAME = ServerMetric.memoEntries.name;

function entry(key: string, at: number): MemoEntry {
  return {
    memoKey: `0:|${key}`,
    principal: '',
    fingerprint: 'f',
    state: 'running',
    owner: 'here',
    logId: `keyed-${key}`,
    epoch: 'e',
    createdAt: at,
  };
}

const stores: Record<string, (now: () => number) => MemoStore> = {
  memory: (now) => new MemoryMemoStore({ memoWindowMs: 1_000, now }),
  sqlite: (now) => new SqliteMemoStore({ path: ':memory:', memoWindowMs: 1_000, now }),
  redis: (now) =>
    new RedisMemoStore({
      url: redis?.url as string,
      keyPrefix: `gauge-${Math.random().toString(36).slice(2)}:`,
      memoWindowMs: 1_000,
      now,
    }),
};

/** The gauge's figure once it reads `n` (at once for stores that count synchronously). */
async function settles(metrics: ContinuityMetrics, n: number): Promise<void> {
  await eventually(() => metrics.figures()[NAME] === n, 5_000, `${NAME} = ${n}`);
}

describe('the memo entries gauge', () => {
  for (const [name, make] of Object.entries(stores)) {
    it(`counts the live entries of a ${name} store`, async () => {
      let clock = 10_000;
      const memo = make(() => clock);
      const sdk = otelSdk();
      const metrics = new ContinuityMetrics({ meter: sdk.meter });
      try {
        metrics.server.observeMemo(memo);
        metrics.server.observeMemo(memo); // observed twice, counted once
        await settles(metrics, 0);
        const a = entry('a', clock);
        expect((await memo.create(a, 10)).kind).toBe('created');
        expect((await memo.create(entry('b', clock), 10)).kind).toBe('created');
        await settles(metrics, 2);
        expect((await sdk.collect()).gauge(NAME)).toBe(2);
        // Finished: still live inside its window…
        await memo.replace({ ...a, state: 'committed', finishedAt: clock }, a);
        clock += 999;
        await settles(metrics, 2);
        // …and gone once it has passed (the running one stays).
        clock += 2;
        await memo.sweep();
        await settles(metrics, 1);
        expect((await sdk.collect()).gauge(NAME)).toBe(1);
      } finally {
        await memo.close();
        await sdk.shutdown();
      }
    });
  }

  it('is not reported for a store that cannot count without waiting', async () => {
    const metrics = new ContinuityMetrics();
    const memo = new MemoryMemoStore({ memoWindowMs: 1_000 });
    const uncounted: MemoStore = new Proxy(memo, {
      get: (target, key) => (key === 'liveEntries' ? undefined : Reflect.get(target, key)),
    });
    metrics.server.observeMemo(uncounted);
    expect(NAME in metrics.figures()).toBe(false);
    await memo.close();
  });
});
