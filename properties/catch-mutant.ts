import fc from 'fast-check';

/** What one mutant's hunt found. */
export interface MutantHunt<T> {
  /** A world the property fails in was found. */
  readonly caught: boolean;
  /** Worlds judged before the first counterexample (or all of them, when none was found). */
  readonly numRuns: number;
  /** The counterexample, shrunk for as long as `shrinkMs` allowed. */
  readonly counterexample?: T;
}

/**
 * Hunts a deliberately wrong variant: judges up to `numRuns` worlds (the directed `examples` first) and
 * stops at the first that fails; then shrinks that world for at most `shrinkMs`. Whether it is caught
 * depends only on the seed and the count, never on how busy the machine is: only the shrinking has a
 * time limit, and past it the best world so far is kept.
 */
export function huntMutant<T>(
  arb: fc.Arbitrary<T>,
  holds: (world: T) => boolean,
  options: {
    readonly numRuns: number;
    readonly seed: number;
    readonly examples?: ReadonlyArray<[T]>;
    readonly shrinkMs: number;
  },
): MutantHunt<T> {
  const property = fc.property(arb, holds);
  const examples = options.examples ? [...options.examples] : [];
  const search = fc.check(property, {
    numRuns: options.numRuns,
    seed: options.seed,
    examples,
    endOnFailure: true,
  });
  if (!search.failed || search.counterexample === null) return { caught: false, numRuns: search.numRuns };
  const found = search.counterexample[0];
  // Shrink from the failing world (replayed by its path), for a bounded time.
  const shrunk = fc.check(property, {
    seed: options.seed,
    path: search.counterexamplePath ?? undefined,
    examples,
    interruptAfterTimeLimit: options.shrinkMs,
  });
  const best = shrunk.failed && shrunk.counterexample !== null ? shrunk.counterexample[0] : found;
  return { caught: true, numRuns: search.numRuns, counterexample: best };
}
