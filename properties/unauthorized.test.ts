import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { callArb, worldConfigArb } from './arbitraries.js';
import { RUNS, SEED } from './budget.js';
import { describeVerdict, failedChecks, freshSeed, judge, simulate } from './judge.js';
import type { Command } from './world/world.js';

/**
 * An expired token is a fact about the transport (machines/client/authorization.ts). In worlds whose only
 * fault is the server answering 401 (a token expiring, at any moment: on a POST, a resume, the standalone
 * GET, an initialize, up to four times in a row), every check holds, and moreover no call ends outcome
 * unknown and none runs twice: a 401 on its own never produces either. The provider refreshes; when the
 * bound of authorizations is reached, a call that never ran fails (UnauthorizedError) and one that may have
 * run waits for the application's finishAuth.
 */
const seed = SEED ?? freshSeed();

const tokenFaultArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: callArb },
  {
    weight: 4,
    arbitrary: fc
      .oneof(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 3_000 }))
      .map((ms) => ({ kind: 'advance', ms }) as const),
  },
  {
    weight: 3,
    arbitrary: fc
      .integer({ min: 1, max: 4 })
      .map((count) => ({ kind: 'serverError', count, status: 401 }) as const),
  },
);

const scenarioArb = fc.record({
  config: worldConfigArb,
  commands: fc
    .tuple(callArb, fc.array(tokenFaultArb, { maxLength: 30, size: 'max' }))
    .map(([call, rest]) => [call, ...rest]),
});

describe('a 401 (an expired token) on its own', () => {
  it(`never makes a call outcome unknown nor runs it twice; every check holds (${RUNS} worlds)`, {
    timeout: 600_000,
  }, () => {
    console.info(`401 worlds: ${RUNS}, seed ${seed} (replay: MCPC_SEED=${seed})`);
    let unauthorized = 0;
    fc.assert(
      fc.property(scenarioArb, (scenario) => {
        const outcome = simulate(scenario);
        const verdict = judge(outcome);
        if (failedChecks(verdict).length > 0) throw new Error(describeVerdict(verdict));
        const calls = [...outcome.recorder.calls.values()];
        const unknown = calls.filter((c) => c.outcome === 'unknown');
        if (unknown.length > 0)
          throw new Error(
            `outcome unknown after 401s only: ${unknown.map((c) => `${c.callKey} ${c.reason}`).join(', ')}`,
          );
        const twice = [...outcome.recorder.sideEffects].filter(([, n]) => n > 1);
        if (twice.length > 0)
          throw new Error(`ran twice after 401s only: ${twice.map(([k]) => k).join(', ')}`);
        if (scenario.commands.some((c) => c.kind === 'serverError')) unauthorized++;
      }),
      { numRuns: RUNS, seed },
    );
    expect(unauthorized).toBeGreaterThan(RUNS / 4);
  });
});
