import fc from 'fast-check';
import { describe, it } from 'vitest';
import { scenarioArb } from './arbitraries.js';
import { RUNS_PER_PROPERTY, SEED } from './budget.js';
import { CHECKS, type CheckName } from './checks.js';
import { runSchedule } from './world/world.js';

/**
 * The model's invariants over random fault schedules, each its own test. On failure fast-check prints
 * the shrunk schedule with `seed` and `path`; `npm run verify -- --seed <seed> --path <path>` replays it.
 */
describe('properties of the correct client and server under random faults', () => {
  for (const name of Object.keys(CHECKS) as CheckName[]) {
    it(name, () => {
      fc.assert(
        fc.property(scenarioArb, ({ config, commands }) => {
          const violations = CHECKS[name](runSchedule(commands, config));
          if (violations.length > 0) throw new Error(violations.join('\n'));
        }),
        { numRuns: RUNS_PER_PROPERTY, seed: SEED },
      );
    });
  }
});
