import { describe, expect, it } from 'vitest';
import { huntMutant } from './catch-mutant.js';
import { freshSeed } from './judge.js';
import { LISTEN_MUTANT_RUNS, LISTEN_MUTANT_SEED, LISTEN_SHRINK_MS } from './listen-modern/budget.js';
import { describeListenVerdict, judgeListen } from './listen-modern/checks.js';
import { DIRECTED_LISTEN } from './listen-modern/corpus.js';
import { LISTEN_MUTANTS } from './listen-modern/mutants.js';
import { type ListenScenario, listenScenarioArb } from './listen-modern/schedule.js';
import { runListenWorld } from './listen-modern/world.js';

/**
 * The listen properties prove they can fail: every deliberately wrong variant of the listen part's
 * decisions yields a counterexample, from the directed worlds first, then random ones. The catching property and the shrunk schedule are
 * printed; the seed first (MCPC_LISTEN_MUTANT_SEED replays it).
 */
const seed = LISTEN_MUTANT_SEED ?? freshSeed();
const examples = DIRECTED_LISTEN.map((d): [ListenScenario] => [{ config: d.config, commands: d.commands }]);

describe('listen part: the properties catch deliberately wrong variants of the real decisions', () => {
  for (const mutant of LISTEN_MUTANTS) {
    // A count of worlds, not a time budget, decides whether it is caught; a busy machine only makes it slower.
    it(`${mutant.branch}: ${mutant.name}`, { timeout: 600_000 }, () => {
      const result = huntMutant(
        listenScenarioArb,
        (s) => Object.keys(judgeListen(runListenWorld(s.commands, s.config, mutant.variant))).length === 0,
        { numRuns: LISTEN_MUTANT_RUNS, seed, examples, shrinkMs: LISTEN_SHRINK_MS },
      );
      expect(
        result.caught,
        `no counterexample for "${mutant.name}" in ${result.numRuns} worlds (seed ${seed})`,
      ).toBe(true);
      const scenario = result.counterexample;
      const verdict = judgeListen(
        runListenWorld(scenario?.commands ?? [], scenario?.config ?? ({} as never), mutant.variant),
      );
      expect(Object.keys(verdict).length).toBeGreaterThan(0);
      console.info(
        `${mutant.name}\n  caught by: ${Object.keys(verdict).join(', ')} after ${result.numRuns} world(s) (seed ${seed})` +
          `\n  schedule: ${JSON.stringify(scenario)}\n  ${describeListenVerdict(verdict, 2).split('\n').join('\n  ')}`,
      );
    });
  }
});
