import fc from 'fast-check';
import { scenarioArb } from './arbitraries.js';
import { CHECKS, type CheckName } from './checks.js';
import { explore } from './exhaustive.js';
import { describeVerdict, failedChecks, freshSeed, judge } from './judge.js';
import { DEFAULT_WORLD, runSchedule } from './world/world.js';

/**
 * The long exploration behind `npm run verify` and `mcp-continuity verify`: more random worlds than CI,
 * each simulated once and judged by every property, a deeper exhaustive search, and replay of a failure CI
 * printed.
 */
export interface VerifyOptions {
  /** Random worlds, each judged by every selected property. */
  readonly runs: number;
  readonly seed?: number;
  /** With `seed`, replays one counterexample path. */
  readonly path?: string;
  readonly properties?: readonly string[];
  /** Exhaustive depth; 0 skips the exhaustive search. */
  readonly depth: number;
}

export function propertyNames(): string[] {
  return Object.keys(CHECKS);
}

/** Runs the exploration; returns true when every property held. */
export function runVerify(options: VerifyOptions, log: (line: string) => void = console.log): boolean {
  const names = (options.properties ?? propertyNames()) as CheckName[];
  for (const name of names) {
    if (!(name in CHECKS))
      throw new Error(`unknown property "${name}"; one of: ${propertyNames().join(', ')}`);
  }
  const seed = options.seed ?? freshSeed();
  log(`${options.runs} random worlds, seed ${seed}, each judged by: ${names.join(', ')}`);
  let ok = true;
  const start = performance.now();
  const result = fc.check(
    fc.property(scenarioArb, ({ config, commands }) => {
      const verdict = judge(runSchedule(commands, config), names);
      if (failedChecks(verdict).length > 0) throw new Error(describeVerdict(verdict));
    }),
    { numRuns: options.runs, seed, path: options.path, endOnFailure: options.path !== undefined },
  );
  const seconds = (performance.now() - start) / 1000;
  if (result.failed) {
    ok = false;
    const [scenario] = result.counterexample ?? [];
    const verdict = scenario ? judge(runSchedule(scenario.commands, scenario.config), names) : {};
    log(
      `✗ ${failedChecks(verdict).join(', ') || 'a property'}: counterexample after ${result.numRuns} worlds ` +
        `(seed ${result.seed}, path "${result.counterexamplePath}")`,
    );
    log(`  ${JSON.stringify(scenario)}`);
    log(`  ${describeVerdict(verdict).split('\n').join('\n  ')}`);
    const only = failedChecks(verdict)
      .map((n) => ` --property "${n}"`)
      .join('');
    log(`  replay: npm run verify -- --seed ${result.seed} --path "${result.counterexamplePath}"${only}`);
  } else {
    const rate = Math.round(result.numRuns / seconds);
    log(
      `✓ ${names.length} properties held on ${result.numRuns} worlds in ${seconds.toFixed(1)} s (${rate} worlds/s)`,
    );
  }
  if (options.depth > 0) {
    for (const heartbeat of [true, false]) {
      const report = explore(options.depth, { ...DEFAULT_WORLD, heartbeat });
      const rate = Math.round(report.schedules / (report.elapsedMs / 1000));
      log(
        `${report.violations.length === 0 ? '✓' : '✗'} exhaustive depth ${options.depth}, heartbeat ${heartbeat}: ` +
          `${report.schedules} schedules, ${report.distinctStates} distinct states, ${rate} schedules/s`,
      );
      for (const v of report.violations.slice(0, 5)) {
        ok = false;
        log(`  ${v.check}: ${JSON.stringify(v.schedule)}\n    ${v.messages.slice(0, 2).join('\n    ')}`);
      }
    }
  }
  return ok;
}
