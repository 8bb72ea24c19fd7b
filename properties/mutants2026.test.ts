import { describe, expect, it } from 'vitest';
import { type Scenario2026, scenarioArb2026 } from './arbitraries2026.js';
import { MUTANT_RUNS_2026, MUTANT_SEED_2026, SHRINK_MS_2026 } from './budget2026.js';
import { huntMutant } from './catch-mutant.js';
import { describeVerdict2026, judge2026 } from './checks2026.js';
import { DIRECTED_2026 } from './corpus2026.js';
import { freshSeed } from './judge.js';
import { MUTANTS_2026 } from './mutants2026.js';
import { PORT_SCENARIOS_2026 } from './world2026/scenarios.js';
import { runSchedule2026 } from './world2026/world.js';

/**
 * The 2026-07-28 suite proves it can fail: every deliberately wrong variant yields a counterexample, from
 * the directed corpus first, then random worlds, judged by every property. The catching property and the
 * shrunk schedule are printed; the seed is printed first (MCPC_2026_MUTANT_SEED replays it).
 */
const seed = MUTANT_SEED_2026 ?? freshSeed();
const examples = [...DIRECTED_2026, ...PORT_SCENARIOS_2026].map((d): [Scenario2026] => [
  { config: d.config, commands: [...d.commands] },
]);

describe('MCP 2026-07-28: the properties catch deliberately wrong variants of the real decisions', () => {
  for (const mutant of MUTANTS_2026) {
    // A count of worlds, not a time budget, decides whether it is caught; a busy machine only makes it slower.
    it(`${mutant.branch}: ${mutant.name}`, { timeout: 600_000 }, () => {
      const result = huntMutant(
        scenarioArb2026,
        (s) => Object.keys(judge2026(runSchedule2026(s.commands, s.config, mutant.variant))).length === 0,
        { numRuns: MUTANT_RUNS_2026, seed, examples, shrinkMs: SHRINK_MS_2026 },
      );
      expect(
        result.caught,
        `no counterexample for "${mutant.name}" in ${result.numRuns} worlds (seed ${seed})`,
      ).toBe(true);
      const scenario = result.counterexample;
      const verdict = judge2026(runSchedule2026(scenario?.commands ?? [], scenario?.config, mutant.variant));
      expect(Object.keys(verdict).length).toBeGreaterThan(0);
      console.info(
        `${mutant.name}\n  caught by: ${Object.keys(verdict).join(', ')} after ${result.numRuns} world(s) (seed ${seed})` +
          `\n  schedule: ${JSON.stringify(scenario)}\n  ${describeVerdict2026(verdict, 2).split('\n').join('\n  ')}`,
      );
    });
  }
});
