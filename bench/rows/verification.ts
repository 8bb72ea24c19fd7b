import fc from 'fast-check';
import { scenarioArb } from '../../properties/arbitraries.js';
import { CHECKS } from '../../properties/checks.js';
import { explore } from '../../properties/exhaustive.js';
import { DEFAULT_WORLD, runSchedule } from '../../properties/world/world.js';

/** Row 5: how fast the model is checked. */
export interface PropertyRunsResult {
  readonly runs: number;
  readonly seed: number;
  readonly ms: number;
  readonly perSecond: number;
  /** Violations found (should be 0: the bench only measures; `npm run verify` reports counterexamples). */
  readonly violations: number;
}

/**
 * `runs` scenarios drawn with a fixed seed (generation is not timed), each run in a fresh world and judged
 * by every check in CHECKS: one "property run" here covers all five properties at once.
 */
export function propertyRuns(runs: number, seed: number): PropertyRunsResult {
  const samples = fc.sample(scenarioArb, { numRuns: runs, seed });
  const checks = Object.values(CHECKS);
  let violations = 0;
  const start = performance.now();
  for (const { config, commands } of samples) {
    const outcome = runSchedule(commands, config);
    for (const check of checks) violations += check(outcome).length;
  }
  const ms = performance.now() - start;
  return { runs, seed, ms, perSecond: runs / (ms / 1000), violations };
}

export interface ExploreResult {
  readonly depth: number;
  readonly schedules: number;
  readonly distinctStates: number;
  readonly ms: number;
  readonly perSecond: number;
  readonly violations: number;
}

/** The exhaustive explorer (properties/exhaustive.ts) at `depth`, heartbeat on (DEFAULT_WORLD). */
export function exploreSpeed(depth: number): ExploreResult {
  const report = explore(depth, DEFAULT_WORLD);
  return {
    depth,
    schedules: report.schedules,
    distinctStates: report.distinctStates,
    ms: report.elapsedMs,
    perSecond: report.schedules / (report.elapsedMs / 1000),
    violations: report.violations.length,
  };
}
