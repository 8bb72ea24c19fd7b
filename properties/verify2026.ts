import fc from 'fast-check';
import { scenarioArb2026 } from './arbitraries2026.js';
import { describeVerdict2026, judge2026 } from './checks2026.js';
import { DIRECTED_2026 } from './corpus2026.js';
import { CoverageTally2026 } from './coverage2026.js';
import { freshSeed } from './judge.js';
import { type Command2026, runSchedule2026, type WorldConfig2026 } from './world2026/world.js';

/**
 * The long exploration of the 2026-07-28 model behind `npm run verify`: more random worlds than CI, each
 * judged by every property, the directed corpus, the coverage table, and the open findings' counts.
 * Returns true when every property held and every modelled branch was reached.
 */
export function runVerify2026(
  options: { readonly runs: number; readonly seed?: number; readonly path?: string },
  log: (line: string) => void = console.log,
): boolean {
  const seed = options.seed ?? freshSeed();
  log(`2026-07-28 model: ${options.runs} random worlds, seed ${seed}`);
  const tally = new CoverageTally2026();
  const simulate = (scenario: {
    readonly config: WorldConfig2026;
    readonly commands: readonly Command2026[];
  }) => {
    const observer = tally.observer();
    const outcome = runSchedule2026(scenario.commands, scenario.config, undefined, observer);
    observer.done();
    return judge2026(outcome);
  };
  const start = performance.now();
  const result = fc.check(
    fc.property(scenarioArb2026, (s) => {
      const verdict = simulate(s);
      if (Object.keys(verdict).length > 0) throw new Error(describeVerdict2026(verdict));
    }),
    { numRuns: options.runs, seed, path: options.path, endOnFailure: options.path !== undefined },
  );
  let ok = !result.failed;
  if (result.failed) {
    log(
      `FAILED (seed ${seed}, path ${result.counterexamplePath}):\n${JSON.stringify(result.counterexample)}`,
    );
    log(String(result.errorInstance));
  }
  for (const d of DIRECTED_2026) {
    const verdict = simulate(d);
    if (Object.keys(verdict).length > 0) {
      ok = false;
      log(`directed world failed: ${d.name}\n${describeVerdict2026(verdict)}`);
    }
  }
  log(tally.table());
  const unreached = tally.unreached();
  // Too few worlds (or a replay) cannot be asked to reach every branch.
  if (unreached.length > 0 && options.path === undefined && options.runs >= 1_000) {
    ok = false;
    log(`modelled branches no world reached: ${unreached.join('; ')}`);
  }
  log(
    `2026-07-28 model: ${result.numRuns} worlds in ${((performance.now() - start) / 1000).toFixed(1)} s, ${ok ? 'all properties held' : 'FAILED'}`,
  );
  return ok;
}
