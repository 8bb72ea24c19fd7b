import fc from 'fast-check';
import { scenarioArb } from './arbitraries.js';
import { CHECKS, type CheckName } from './checks.js';
import { explore } from './exhaustive.js';
import { DEFAULT_WORLD, runSchedule } from './world/world.js';

/**
 * The long exploration behind `npm run verify` and `mcp-continuity verify`: more random runs per property
 * than CI, a deeper exhaustive search, and replay of a failure CI printed.
 */
export interface VerifyOptions {
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
  const seed = options.seed ?? Date.now() ^ (Math.random() * 0x7fffffff);
  let ok = true;
  for (const name of names) {
    const start = performance.now();
    const result = fc.check(
      fc.property(scenarioArb, ({ config, commands }) => {
        const violations = CHECKS[name](runSchedule(commands, config));
        if (violations.length > 0) throw new Error(violations.join('\n'));
      }),
      { numRuns: options.runs, seed, path: options.path, endOnFailure: options.path !== undefined },
    );
    const seconds = (performance.now() - start) / 1000;
    if (result.failed) {
      ok = false;
      log(
        `✗ ${name}: counterexample after ${result.numRuns} runs (seed ${result.seed}, path "${result.counterexamplePath}")`,
      );
      log(`  ${JSON.stringify(result.counterexample)}`);
      log(`  ${String(result.errorInstance).split('\n').slice(0, 5).join('\n  ')}`);
      log(
        `  replay: npm run verify -- --seed ${result.seed} --path "${result.counterexamplePath}" --property "${name}"`,
      );
    } else {
      const rate = Math.round(result.numRuns / seconds);
      log(`✓ ${name}: ${result.numRuns} runs in ${seconds.toFixed(1)} s (${rate} runs/s, seed ${seed})`);
    }
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
