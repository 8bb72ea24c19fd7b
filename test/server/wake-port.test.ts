import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import {
  DeadlineQueue,
  logSweepPeriodMs,
  MAX_TIMER_MS,
  stallVerdict,
  sweepVerdict,
  UNSTORED_ANSWER_ATTEMPTS,
  unstoredAnswerRetryMs,
} from '../../machines/server/deadlines.js';
import { WakePort } from '../../src/server/wake-port.js';

describe('DeadlineQueue (machines/server/deadlines.ts)', () => {
  it('gives the due keys earliest first, ties in the order asked, and the next wake-up', () => {
    const q = new DeadlineQueue<string>();
    for (const [at, key] of [
      [30, 'c'],
      [10, 'a'],
      [20, 'b1'],
      [20, 'b2'],
      [40, 'd'],
    ] as const)
      q.add(at, key);
    expect(q.next()).toBe(10);
    expect(q.due(5)).toEqual([]);
    expect(q.due(20)).toEqual(['a', 'b1', 'b2']);
    expect(q.next()).toBe(30);
    expect(q.due(100)).toEqual(['c', 'd']);
    expect(q.next()).toBeUndefined();
  });

  it('stays ordered over many random wake-ups', () => {
    const q = new DeadlineQueue<number>();
    const ats = Array.from({ length: 500 }, (_, i) => (i * 7919) % 1000);
    for (const [i, at] of ats.entries()) q.add(at, i);
    const order = q.due(1000).map((i) => ats[i] as number);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(order).toHaveLength(500);
  });
});

describe('the 2025 deadlines', () => {
  const facts = {
    now: 1_000,
    lastUsed: 0,
    asleep: false,
    idleForMs: 250,
    idleTtlMs: 2_000,
    busy: false,
    machineIdle: true,
  };
  it('sweep: an idle session sleeps; a busy one, a busy machine or a recent use keeps it awake', () => {
    expect(sweepVerdict(facts)).toBe('sleep');
    expect(sweepVerdict({ ...facts, busy: true })).toBe('stay');
    expect(sweepVerdict({ ...facts, machineIdle: false })).toBe('stay');
    expect(sweepVerdict({ ...facts, lastUsed: 800 })).toBe('stay');
  });
  it('sweep: a sleeping session wakes exactly when its TTL ran out', () => {
    expect(sweepVerdict({ ...facts, asleep: true, now: 1_999 })).toBe('stay');
    expect(sweepVerdict({ ...facts, asleep: true, now: 2_000 })).toBe('wake');
  });
  it('stall: a backlog that shrank is watched again, one that did not is cut, nobody waiting is done', () => {
    expect(stallVerdict(true, 100, 99)).toBe('watch-again');
    expect(stallVerdict(true, 100, 100)).toBe('cut');
    expect(stallVerdict(false, 100, 100)).toBe('released');
  });
  it('the memory log sweeps a quarter of its retention, at least every second, within what a timer honours', () => {
    expect(logSweepPeriodMs(60_000, undefined)).toBe(15_000);
    expect(logSweepPeriodMs(100, undefined)).toBe(1_000);
    expect(logSweepPeriodMs(Number.POSITIVE_INFINITY, undefined)).toBe(MAX_TIMER_MS);
    expect(logSweepPeriodMs(60_000, 200)).toBe(200);
  });
  it('an answer the log refused is stored again: doubling from 250 ms to 8 s, for about 30 s, never once the session ended', () => {
    const waits = Array.from({ length: UNSTORED_ANSWER_ATTEMPTS + 1 }, (_, n) =>
      unstoredAnswerRetryMs(n, false),
    );
    expect(waits).toEqual([250, 500, 1_000, 2_000, 4_000, 8_000, 8_000, undefined]);
    expect(unstoredAnswerRetryMs(0, true)).toBeUndefined();
  });
});

describe('WakePort (src/server/wake-port.ts)', () => {
  it('one timer wakes every due callback with the time, in order; a cancelled one never fires', async () => {
    const port = new WakePort();
    const fired: Array<[string, number]> = [];
    port.after(30, (now) => fired.push(['late', now]));
    port.after(5, (now) => fired.push(['early', now]));
    const cancelled = port.after(10, () => fired.push(['cancelled', 0]));
    cancelled.cancel();
    const start = Date.now();
    await new Promise((r) => setTimeout(r, 200));
    expect(fired.map(([k]) => k)).toEqual(['early', 'late']);
    expect((fired[0] as [string, number])[1]).toBeGreaterThanOrEqual(start + 5);
  });

  it('a periodic wake-up repeats until cancelled; a throw is reported and the others still run', async () => {
    const errors: unknown[] = [];
    const port = new WakePort((e) => errors.push(e));
    let ticks = 0;
    const every = port.every(10, () => {
      ticks++;
    });
    port.after(15, () => {
      throw new Error('boom');
    });
    await new Promise((r) => setTimeout(r, 150));
    every.cancel();
    const seen = ticks;
    await new Promise((r) => setTimeout(r, 60));
    expect(seen).toBeGreaterThanOrEqual(3);
    expect(ticks).toBe(seen);
    expect(errors).toHaveLength(1);
  });

  it('a cancelled wake-up behind a live one no longer holds what its callback holds (a response, per call)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const port = new WakePort();
    const live = port.after(60_000, () => undefined);
    let held: object | undefined = { response: 'kilobytes' };
    const ref = new WeakRef(held);
    const cancelled = port.after(
      120_000,
      (
        (h: object) => () =>
          void h
      )(held),
    );
    held = undefined;
    cancelled.cancel();
    // A WeakRef read in a job keeps its target until the job ends: collect in later turns.
    for (let i = 0; i < 5 && ref.deref() !== undefined; i++) {
      await new Promise((r) => setImmediate(r));
      gc();
    }
    expect(ref.deref()).toBeUndefined();
    live.cancel();
  });
});
