import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import {
  backoffCeiling,
  DEFAULT_RECONNECT_POLICY,
  type ReconnectPolicy,
  reconnectDelay,
  unitRandom,
  worstCaseReconnectMs,
} from '../machines/backoff.js';

const policy: ReconnectPolicy = {
  initialDelayMs: 100,
  maxDelayMs: 1_000,
  factor: 2,
  maxRetries: 6,
  jitter: 'full',
};

describe('backoff', () => {
  it('ceilings grow by the factor and stop at the maximum', () => {
    expect([0, 1, 2, 3, 4, 5].map((a) => backoffCeiling(a, policy))).toEqual([
      100, 200, 400, 800, 1000, 1000,
    ]);
  });

  test.prop([fc.nat(100), fc.nat(), fc.option(fc.nat(5_000), { nil: undefined })])(
    'full jitter stays in [0, ceiling], and the server retry is a floor',
    (attempt, seed, retry) => {
      const d = reconnectDelay(attempt, policy, retry, seed);
      expect(d).toBeGreaterThanOrEqual(retry ?? 0);
      expect(d).toBeLessThanOrEqual(Math.max(retry ?? 0, backoffCeiling(attempt, policy)));
    },
  );

  it('without jitter the delay is the ceiling', () => {
    expect(reconnectDelay(2, { ...policy, jitter: 'none' }, undefined, 1)).toBe(400);
    expect(reconnectDelay(2, { ...policy, jitter: 'none' }, 900, 1)).toBe(900);
  });

  it('jitter spreads: different seeds give different delays', () => {
    const delays = new Set(
      Array.from({ length: 50 }, (_, seed) => reconnectDelay(3, policy, undefined, seed)),
    );
    expect(delays.size).toBeGreaterThan(30);
  });

  it('the same seed and attempt give the same delay (replayable)', () => {
    expect(reconnectDelay(3, policy, undefined, 42)).toBe(reconnectDelay(3, policy, undefined, 42));
    expect(unitRandom(42, 3)).toBeGreaterThanOrEqual(0);
    expect(unitRandom(42, 3)).toBeLessThan(1);
  });

  it('worst case sums every ceiling, floored by retry', () => {
    expect(worstCaseReconnectMs(policy, undefined)).toBe(100 + 200 + 400 + 800 + 1000 + 1000);
    expect(worstCaseReconnectMs(policy, 500)).toBe(500 + 500 + 500 + 800 + 1000 + 1000);
    expect(worstCaseReconnectMs(DEFAULT_RECONNECT_POLICY, undefined)).toBe(
      500 + 1000 + 2000 + 4000 + 8000 + 16000 + 30000 + 30000,
    );
  });
});
