import { describe, expect, it } from 'vitest';
import { scenarioArb } from './arbitraries.js';
import { huntMutant } from './catch-mutant.js';
import { describeVerdict, failedChecks, freshSeed, judge } from './judge.js';
import { MUTANTS } from './mutants.js';
import { runSchedule } from './world/world.js';

/**
 * The suite proves it can fail: every deliberately broken variant yields a counterexample from random
 * worlds judged by every property. The catching property and the shrunk schedule are printed; the seed is
 * printed first (MCPC_MUTANT_SEED replays it).
 */
const RUNS = Number(process.env.MCPC_MUTANT_RUNS ?? 3_000);
const SHRINK_MS = Number(process.env.MCPC_MUTANT_MS ?? 15_000);
const seed = process.env.MCPC_MUTANT_SEED === undefined ? freshSeed() : Number(process.env.MCPC_MUTANT_SEED);

describe('the properties catch deliberately broken variants', () => {
  for (const mutant of MUTANTS) {
    // A count of worlds, not a time budget, decides whether it is caught; a busy machine only makes it slower.
    it(`${mutant.branch}: ${mutant.name}`, { timeout: 600_000 }, () => {
      const result = huntMutant(
        scenarioArb,
        ({ config, commands }) =>
          failedChecks(judge(runSchedule(commands, config, mutant.variant))).length === 0,
        // Shrinking a 40-command schedule can take long; past the limit the best schedule so far is kept.
        { numRuns: RUNS * (mutant.runsFactor ?? 1), seed, shrinkMs: SHRINK_MS },
      );
      expect(
        result.caught,
        `no counterexample for "${mutant.name}" in ${result.numRuns} runs (seed ${seed})`,
      ).toBe(true);
      const scenario = result.counterexample;
      const verdict = judge(runSchedule(scenario?.commands ?? [], scenario?.config, mutant.variant));
      expect(failedChecks(verdict).length).toBeGreaterThan(0);
      // The minimal schedule is the story of the bug; keep it in the test log.
      console.info(
        `${mutant.name}\n  caught by: ${failedChecks(verdict).join(', ')} after ${result.numRuns} worlds ` +
          `(seed ${seed})\n  schedule: ${JSON.stringify(scenario)}\n  ${describeVerdict(verdict, 2).split('\n').join('\n  ')}`,
      );
    });
  }
});
