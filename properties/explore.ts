import fc from 'fast-check';
import { freshSeed } from './judge.js';

/** What one long exploration needs: its scenarios, how one is judged, its tally, and directed worlds. */
export interface Exploration<S> {
  /** Named in every line it logs (`2026-07-28 model`, `listen model`). */
  readonly name: string;
  readonly scenarios: fc.Arbitrary<S>;
  /** Runs one scenario (feeding the tally) and describes what it broke, or `undefined` when nothing. */
  readonly judge: (scenario: S) => string | undefined;
  readonly tally: { table(): string; unreached(): string[] };
  /** Worlds run after the random ones, each with a name. */
  readonly directed?: ReadonlyArray<S & { readonly name: string }>;
}

/**
 * A long exploration behind `npm run verify`: random worlds, each judged by every property, the directed
 * corpus, and the coverage table. True when every property held and (with at least 1,000 worlds, not
 * replaying a path: too few cannot be asked to reach every branch) every modelled branch was reached.
 */
export function explore<S>(
  e: Exploration<S>,
  options: { readonly runs: number; readonly seed?: number; readonly path?: string },
  log: (line: string) => void,
): boolean {
  const seed = options.seed ?? freshSeed();
  log(`${e.name}: ${options.runs} random worlds, seed ${seed}`);
  const start = performance.now();
  const result = fc.check(
    fc.property(e.scenarios, (s) => {
      const broken = e.judge(s);
      if (broken !== undefined) throw new Error(broken);
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
  for (const d of e.directed ?? []) {
    const broken = e.judge(d);
    if (broken !== undefined) {
      ok = false;
      log(`directed world failed: ${d.name}\n${broken}`);
    }
  }
  log(e.tally.table());
  const unreached = e.tally.unreached();
  if (unreached.length > 0 && options.path === undefined && options.runs >= 1_000) {
    ok = false;
    log(`modelled branches no world reached: ${unreached.join('; ')}`);
  }
  log(
    `${e.name}: ${result.numRuns} worlds in ${((performance.now() - start) / 1000).toFixed(1)} s, ${ok ? 'all properties held' : 'FAILED'}`,
  );
  return ok;
}
