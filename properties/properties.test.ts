import fc from 'fast-check';
import { describe, it } from 'vitest';
import { scenarioArb } from './arbitraries.js';
import { RUNS, SEED } from './budget.js';
import { CHECK_NAMES, describeVerdict, failedChecks, freshSeed, judge } from './judge.js';
import { runSchedule } from './world/world.js';

/**
 * The model's invariants over random fault schedules: every simulated world is judged by every check.
 * The seed is printed before the run; on failure fast-check prints the shrunk schedule with `seed` and
 * `path`, and `npm run verify -- --seed <seed> --path <path>` replays it.
 */
const seed = SEED ?? freshSeed();

describe('properties of the correct client and server under random faults', () => {
  it(`${CHECK_NAMES.join(', ')}: every check on each of ${RUNS} worlds`, () => {
    console.info(`model properties: ${RUNS} worlds, seed ${seed} (replay: MCPC_SEED=${seed})`);
    fc.assert(
      fc.property(scenarioArb, ({ config, commands }) => {
        const verdict = judge(runSchedule(commands, config));
        if (failedChecks(verdict).length > 0) throw new Error(describeVerdict(verdict));
      }),
      { numRuns: RUNS, seed },
    );
  });
});
