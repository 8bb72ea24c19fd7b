import { describe, expect, it } from 'vitest';
import { scenarioArb } from './arbitraries.js';
import { huntMutant } from './catch-mutant.js';
import { failedChecks, freshSeed, judge } from './judge.js';
import { CLIENT_2025_MUTANTS } from './mutants-client2025.js';
import { runSchedule } from './world/world.js';

/**
 * The 2025 properties catch each wrong exchange core (mutants-client2025.ts) in random worlds, as
 * mutants.test.ts does for the machines' mutants (same knobs: MCPC_MUTANT_RUNS, MCPC_MUTANT_MS,
 * MCPC_MUTANT_SEED). The catching checks are printed with the seed.
 */
const runs = Number(process.env.MCPC_MUTANT_RUNS ?? 3_000);
const seed = process.env.MCPC_MUTANT_SEED === undefined ? freshSeed() : Number(process.env.MCPC_MUTANT_SEED);
const holds =
  (variant: (typeof CLIENT_2025_MUTANTS)[number]['variant']) =>
  (world: { config: Parameters<typeof runSchedule>[1]; commands: Parameters<typeof runSchedule>[0] }) =>
    failedChecks(judge(runSchedule(world.commands, world.config, variant))).length === 0;

describe('the 2025 properties catch a wrong exchange core', () => {
  for (const { name, branch, variant } of CLIENT_2025_MUTANTS)
    it(`${branch}: ${name}`, { timeout: 600_000 }, () => {
      const hunt = huntMutant(scenarioArb, holds(variant), {
        numRuns: runs,
        seed,
        shrinkMs: Number(process.env.MCPC_MUTANT_MS ?? 5_000),
      });
      expect(hunt.caught, `"${name}" not caught in ${hunt.numRuns} worlds (seed ${seed})`).toBe(true);
      const world = hunt.counterexample;
      const failed = world ? failedChecks(judge(runSchedule(world.commands, world.config, variant))) : [];
      expect(failed.length).toBeGreaterThan(0);
      console.info(`${name}: caught by ${failed.join(', ')} after ${hunt.numRuns} worlds (seed ${seed})`);
    });
});
