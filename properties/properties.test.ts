import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scenarioArb } from './arbitraries.js';
import { RUNS, SEED } from './budget.js';
import { DIRECTED, REGRESSIONS } from './corpus.js';
import { CoverageTally } from './coverage.js';
import { CHECK_NAMES, describeVerdict, failedChecks, freshSeed, judge, simulate } from './judge.js';

/**
 * The model's invariants over random fault schedules: every simulated world is judged by every check.
 * The seed is printed before the run; on failure fast-check prints the shrunk schedule with `seed` and
 * `path`, and `npm run verify -- --seed <seed> --path <path>` replays it.
 */
const seed = SEED ?? freshSeed();
/** Which decisions of machines/ the worlds of this file reached. */
const tally = new CoverageTally();

describe('properties of the correct client and server under random faults', () => {
  // A count of worlds, not a time budget: a busy machine only makes it slower.
  it(`${CHECK_NAMES.join(', ')}: every check on each of ${RUNS} worlds`, { timeout: 600_000 }, () => {
    console.info(`model properties: ${RUNS} worlds, seed ${seed} (replay: MCPC_SEED=${seed})`);
    fc.assert(
      fc.property(scenarioArb, (scenario) => {
        const verdict = judge(simulate(scenario, tally));
        if (failedChecks(verdict).length > 0) throw new Error(describeVerdict(verdict));
      }),
      { numRuns: RUNS, seed },
    );
  });

  it('every modelled decision branch of machines/ is reached by some world (the random ones, and the directed corpus)', () => {
    for (const scenario of [...DIRECTED, ...REGRESSIONS]) {
      const verdict = judge(simulate(scenario, tally));
      expect(verdict, `${scenario.name}\n${describeVerdict(verdict)}`).toEqual({});
    }
    console.info(tally.table());
    expect(tally.unreached()).toEqual([]);
  });
});
