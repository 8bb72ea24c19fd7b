import { describe, expect, it } from 'vitest';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import { ContinuityMetrics } from '../../src/index.js';
import { ServerMetric } from '../../src/metrics/names.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { otelSdk } from './otel.js';

/**
 * A keyed call whose instance died is declared outcome unknown by whichever runtime finds it first, and
 * `mcp_continuity.server.outcome_unknown{reason=instance_lost}` counts that declaration once per key:
 * two runtimes on one memo, both finding the orphan as they start, race their compare-and-sets, and only
 * the winner's counts.
 */
const NAME = ServerMetric.outcomeUnknown.name;

function orphan(key: string): MemoEntry {
  return {
    memoKey: `0:|${key}`,
    principal: '',
    fingerprint: 'f',
    state: 'running',
    // An instance that holds no lease: it died while running the key.
    owner: 'an-instance-long-gone',
    logId: `keyed-${key}`,
    epoch: 'e',
    createdAt: Date.now(),
  };
}

describe('keyed outcome unknown declarations', () => {
  it('are counted once per key, by reason, whichever of two racing runtimes declares them', async () => {
    const memo = new MemoryMemoStore({ memoWindowMs: 60_000 });
    const log = new MemoryEventLog();
    const sdk = otelSdk();
    const metrics = new ContinuityMetrics({ meter: sdk.meter });
    for (const key of ['a', 'b']) expect((await memo.create(orphan(key), 10)).kind).toBe('created');
    // Both start at once: each renews its lease, lists the running entries and declares the orphans.
    const runtimes = [
      createKeyedRequests({ log, memo, metrics }),
      createKeyedRequests({ log, memo, metrics }),
    ];
    try {
      await declared(memo, ['a', 'b']);
      // Let the losing compare-and-sets come back too.
      await new Promise((r) => setTimeout(r, 100));
      const f = metrics.figures();
      expect(f[NAME]).toBe(2);
      expect(f[`${NAME}{reason=instance_lost}`]).toBe(2);
      expect((await sdk.collect()).sum(NAME, { reason: 'instance_lost' })).toBe(2);
    } finally {
      await Promise.all(runtimes.map((r) => r.close()));
      await memo.close();
      await sdk.shutdown();
    }
  });
});

/** Waits (bounded) until every key's stored entry is `outcomeUnknown`. */
async function declared(memo: MemoryMemoStore, keys: readonly string[]): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const entries = await Promise.all(keys.map((k) => memo.get(`0:|${k}`)));
    if (entries.every((e) => e?.state === 'outcomeUnknown')) return;
    if (Date.now() > deadline) throw new Error('the orphans were not declared');
    await new Promise((r) => setTimeout(r, 20));
  }
}
