import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkModernProperties,
  judgeModern,
  MODERN_CHECKS,
  type ModernCommand,
  reportModern,
  runModernStack,
} from './modern-stack-world.js';

/**
 * The model's properties on the real stack, MCP 2026-07-28 (issue 17 item 4): the official v2 `Client`
 * pinned to 2026-07-28 with `continuityFetch()` → FaultProxy → `createContinuityServer({ modern })` on a
 * v2 `McpServer`, with the continuity extension (SQLite memo + log, or a memory memo) and without it.
 * fast-check generates schedules of calls (a counted charge, a progress stream, a read-only lookup), resets,
 * outages, refusals, black holes, latency and server restarts; every run is judged by every check.
 * Environment: MCPC_MODERN_STACK_RUNS (default 20), MCPC_MODERN_STACK_SEED and MCPC_MODERN_STACK_PATH
 * replay a reported failure; MCPC_MODERN_STACK_SHRINK=1 shrinks it (each step is a real run).
 */
const RUNS = Number(process.env.MCPC_MODERN_STACK_RUNS ?? 20);
const SHRINK = process.env.MCPC_MODERN_STACK_SHRINK === '1';

describe('the model properties hold on the real 2026-07-28 stack', () => {
  it(
    Object.keys(MODERN_CHECKS).join(', '),
    async () => {
      const started = Date.now();
      const details = await checkModernProperties({ runs: RUNS, shrink: SHRINK });
      console.info(`modern stack properties: ${details.numRuns} schedules in ${Date.now() - started} ms`);
      if (details.failed)
        throw new Error(
          `${fc.defaultReportMessage(details)}\n${(details.errorInstance as Error | undefined)?.message ?? ''}`,
        );
    },
    Math.max(120_000, RUNS * 10_000),
  );
});

describe('the checks can fail: two deliberately wrong servers', () => {
  /** A charge longer than the proxy's idle cut: the client re-issues it with its key, the server runs it again. */
  const cutCharge: ModernCommand[] = [
    { kind: 'charge', ms: 400 },
    { kind: 'wait', ms: 100 },
  ];

  it('the lying server charges twice, and at most once says so', async () => {
    const outcome = await runModernStack(
      cutCharge,
      { memo: 'none', keepAlive: false, idleCut: true },
      { advertiseWithoutKeyed: true },
    );
    const violations = judgeModern(outcome);
    expect(violations['at most once'], reportModern(outcome, violations)).toEqual([
      expect.stringMatching(/^c1 \(charge\) ran [2-9] times/),
    ]);
  }, 30_000);

  it('the real extension on the same schedule: one charge, the real result, no violation', async () => {
    const outcome = await runModernStack(cutCharge, { memo: 'sqlite', keepAlive: false, idleCut: true });
    const violations = judgeModern(outcome);
    expect(violations, reportModern(outcome, violations)).toEqual({});
    expect(outcome.calls.get('c1')?.outcome).toEqual({ kind: 'result', text: 'charged c1' });
    expect(outcome.effects.get('c1')).toBe(1);
  }, 30_000);

  it('keyed runs cancelled when the stream closes: the idle cut ends the charge as outcome unknown, and the check says so', async () => {
    const outcome = await runModernStack(
      cutCharge,
      { memo: 'sqlite', keepAlive: false, idleCut: true },
      { cancelKeyedOnClose: true },
    );
    const violations = judgeModern(outcome);
    expect(violations['the real result after the faults'], reportModern(outcome, violations)).toEqual([
      expect.stringMatching(/^c1 \(charge\) began at .* but ended unknown/),
    ]);
  }, 30_000);

  it('random schedules against the lying server find a counterexample', async () => {
    const details = await checkModernProperties({
      runs: 8,
      seed: 17,
      config: { memo: 'none', idleCut: true, keepAlive: false },
      variant: { advertiseWithoutKeyed: true },
      label: 'lying server',
    });
    expect(details.failed).toBe(true);
    expect(String(details.errorInstance)).toMatch(/✗ (at most once|honest errors)/);
  }, 60_000);
});
