import fc from 'fast-check';
import { freshSeed } from '../judge.js';
import { describeListenVerdict, judgeListen } from './checks.js';
import { ListenCoverageTally } from './coverage.js';
import { listenScenarioArb } from './schedule.js';
import { runListenWorld } from './world.js';

/**
 * The long exploration of the listen model behind `npm run verify -- --runs-listen <n>`: more random worlds
 * than CI, each judged by every listen property, and the coverage table. Returns true when every property
 * held and (with at least 1,000 worlds, not replaying) every modelled branch was reached.
 */
export function runVerifyListen(
  options: { readonly runs: number; readonly seed?: number; readonly path?: string },
  log: (line: string) => void = console.log,
): boolean {
  const seed = options.seed ?? freshSeed();
  log(`listen model: ${options.runs} random worlds, seed ${seed}`);
  const tally = new ListenCoverageTally();
  const start = performance.now();
  const result = fc.check(
    fc.property(listenScenarioArb, (s) => {
      const outcome = runListenWorld(s.commands, s.config);
      tally.add(outcome);
      const verdict = judgeListen(outcome);
      if (Object.keys(verdict).length > 0) throw new Error(describeListenVerdict(verdict));
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
  log(tally.table());
  const unreached = tally.unreached();
  if (unreached.length > 0 && options.path === undefined && options.runs >= 1_000) {
    ok = false;
    log(`modelled branches no world reached: ${unreached.join('; ')}`);
  }
  log(
    `listen model: ${result.numRuns} worlds in ${((performance.now() - start) / 1000).toFixed(1)} s, ${ok ? 'all properties held' : 'FAILED'}`,
  );
  return ok;
}
