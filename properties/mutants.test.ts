import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scenarioArb } from './arbitraries.js';
import { CHECKS } from './checks.js';
import { MUTANTS } from './mutants.js';
import { runSchedule } from './world/world.js';

/** The suite proves it can fail: every deliberately broken variant yields a counterexample. */
describe('the properties catch deliberately broken variants', () => {
  for (const mutant of MUTANTS) {
    it(`finds a counterexample: ${mutant.name}`, () => {
      const result = fc.check(
        fc.property(scenarioArb, ({ config, commands }) => {
          const outcome = runSchedule(commands, config, mutant.variant);
          return mutant.caughtBy.every((name) => CHECKS[name](outcome).length === 0);
        }),
        { numRuns: 3_000 },
      );
      expect(result.failed, `no counterexample for "${mutant.name}" in ${result.numRuns} runs`).toBe(true);
      const [scenario] = result.counterexample ?? [];
      const outcome = runSchedule(scenario?.commands ?? [], scenario?.config, mutant.variant);
      const found = mutant.caughtBy.flatMap((name) => CHECKS[name](outcome).map((v) => `${name}: ${v}`));
      expect(found.length).toBeGreaterThan(0);
      // The minimal schedule is the story of the bug; keep it in the test log.
      console.info(
        `${mutant.name}\n  schedule: ${JSON.stringify(scenario)}\n  ${found.slice(0, 3).join('\n  ')}`,
      );
    });
  }
});
