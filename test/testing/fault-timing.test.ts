import { describe, expect, it } from 'vitest';
import { chunksDue, idleCut, idleSweepPeriodMs, refusalOf } from '../../machines/fault-timing.js';
import { seededRandom } from '../../machines/seeded-random.js';

describe("the fault proxy's timing (machines/fault-timing.ts)", () => {
  it('looks for idle connections every quarter of the timeout, between 5 and 50 ms', () => {
    expect(idleSweepPeriodMs(8)).toBe(5);
    expect(idleSweepPeriodMs(100)).toBe(25);
    expect(idleSweepPeriodMs(60_000)).toBe(50);
  });

  it('cuts a connection once it has been idle for the whole timeout, not before', () => {
    expect(idleCut(1_099, 100, 1_000)).toBe(false);
    expect(idleCut(1_100, 100, 1_000)).toBe(true);
  });

  it('writes a delayed line in order: a chunk due sooner waits for the one before it', () => {
    expect(chunksDue([{ due: 10 }, { due: 30 }, { due: 20 }], 25)).toBe(1);
    expect(chunksDue([{ due: 10 }, { due: 30 }, { due: 20 }], 30)).toBe(3);
    expect(chunksDue([], 30)).toBe(0);
  });

  it('an outage refuses every new connection while it lasts; then the queued failures, one each', () => {
    expect(refusalOf(50, { until: 100, status: 502 }, [503])).toEqual({ status: 502, fromQueue: false });
    expect(refusalOf(100, { until: 100, status: 502 }, [503])).toEqual({ status: 503, fromQueue: true });
    expect(refusalOf(100, { until: 100, status: 502 }, [])).toBeUndefined();
  });

  it('the seeded generator replays: the same seed, the same draws in [0, 1); another seed, others', () => {
    const a = seededRandom(7);
    const b = seededRandom(7);
    const draws = Array.from({ length: 50 }, () => a());
    expect(Array.from({ length: 50 }, () => b())).toEqual(draws);
    expect(draws.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(seededRandom(8)()).not.toBe(draws[0]);
    // mulberry32's first draw for seed 1: the sequence the worlds' and the proxy's seeds were recorded with.
    expect(seededRandom(1)()).toBeCloseTo(0.6270739405881613, 15);
  });
});
