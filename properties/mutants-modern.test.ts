import { describe, expect, it } from 'vitest';
import { type ModernScenario, scenarioArbModern } from './arbitraries-modern.js';
import { MUTANT_RUNS_MODERN, MUTANT_SEED_MODERN, SHRINK_MS_MODERN } from './budget-modern.js';
import { huntMutant } from './catch-mutant.js';
import { describeVerdictModern, judgeModernWorld } from './checks-modern.js';
import { DIRECTED_MODERN } from './corpus-modern.js';
import { freshSeed } from './judge.js';
import { MUTANTS_MODERN } from './mutants-modern.js';
import { PORT_SCENARIOS_MODERN } from './world-modern/scenarios.js';
import { runScheduleModern } from './world-modern/world.js';

/**
 * The 2026-07-28 suite proves it can fail: every deliberately wrong variant yields a counterexample, from
 * the directed corpus first, then random worlds, judged by every property. The catching property and the
 * shrunk schedule are printed; the seed is printed first (MCPC_MODERN_MUTANT_SEED replays it).
 */
const seed = MUTANT_SEED_MODERN ?? freshSeed();
const examples = [...DIRECTED_MODERN, ...PORT_SCENARIOS_MODERN].map((d): [ModernScenario] => [
  { config: d.config, commands: [...d.commands] },
]);

describe('MCP 2026-07-28: the properties catch deliberately wrong variants of the real decisions', () => {
  for (const mutant of MUTANTS_MODERN) {
    // A count of worlds, not a time budget, decides whether it is caught; a busy machine only makes it slower.
    it(`${mutant.branch}: ${mutant.name}`, { timeout: 600_000 }, () => {
      const result = huntMutant(
        scenarioArbModern,
        (s) =>
          Object.keys(judgeModernWorld(runScheduleModern(s.commands, s.config, mutant.variant))).length === 0,
        { numRuns: MUTANT_RUNS_MODERN, seed, examples, shrinkMs: SHRINK_MS_MODERN },
      );
      expect(
        result.caught,
        `no counterexample for "${mutant.name}" in ${result.numRuns} worlds (seed ${seed})`,
      ).toBe(true);
      const scenario = result.counterexample;
      const verdict = judgeModernWorld(
        runScheduleModern(scenario?.commands ?? [], scenario?.config, mutant.variant),
      );
      expect(Object.keys(verdict).length).toBeGreaterThan(0);
      console.info(
        `${mutant.name}\n  caught by: ${Object.keys(verdict).join(', ')} after ${result.numRuns} world(s) (seed ${seed})` +
          `\n  schedule: ${JSON.stringify(scenario)}\n  ${describeVerdictModern(verdict, 2).split('\n').join('\n  ')}`,
      );
    });
  }
});
