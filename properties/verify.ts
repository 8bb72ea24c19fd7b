import { parseArgs } from 'node:util';
import fc from 'fast-check';
import { scenarioArb } from './arbitraries.js';
import { CHECKS, type CheckName } from './checks.js';
import { explore } from './exhaustive.js';
import { DEFAULT_WORLD, runSchedule } from './world/world.js';

/**
 * `npm run verify`: the long exploration. More random runs per property than CI, a deeper exhaustive
 * search, and replay of a failure CI printed:
 *
 *   npm run verify -- --runs 50000
 *   npm run verify -- --seed 1234 --path "17:3:0" --property "no hang"
 *   npm run verify -- --depth 4
 */
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: process.env.MCPC_RUNS ?? '20000' },
    seed: { type: 'string', default: process.env.MCPC_SEED },
    path: { type: 'string' },
    property: { type: 'string', multiple: true },
    depth: { type: 'string', default: process.env.MCPC_DEPTH ?? '0' },
    help: { type: 'boolean', short: 'h' },
  },
});

if (values.help) {
  console.log('usage: npm run verify -- [--runs N] [--seed S] [--path P] [--property NAME]... [--depth D]');
  console.log(`properties: ${Object.keys(CHECKS).join(', ')}`);
  process.exit(0);
}

const names = (values.property ?? Object.keys(CHECKS)) as CheckName[];
for (const name of names) {
  if (!(name in CHECKS)) {
    console.error(`unknown property "${name}"; one of: ${Object.keys(CHECKS).join(', ')}`);
    process.exit(2);
  }
}

const runs = Number(values.runs);
const seed = values.seed === undefined ? Date.now() ^ (Math.random() * 0x7fffffff) : Number(values.seed);
let failed = false;
for (const name of names) {
  const start = performance.now();
  const result = fc.check(
    fc.property(scenarioArb, ({ config, commands }) => {
      const violations = CHECKS[name](runSchedule(commands, config));
      if (violations.length > 0) throw new Error(violations.join('\n'));
    }),
    { numRuns: runs, seed, path: values.path, endOnFailure: values.path !== undefined },
  );
  const seconds = (performance.now() - start) / 1000;
  const rate = Math.round(result.numRuns / seconds);
  if (result.failed) {
    failed = true;
    console.log(
      `✗ ${name}: counterexample after ${result.numRuns} runs (seed ${result.seed}, path "${result.counterexamplePath}")`,
    );
    console.log(`  ${JSON.stringify(result.counterexample)}`);
    console.log(`  ${String(result.errorInstance).split('\n').slice(0, 5).join('\n  ')}`);
    console.log(
      `  replay: npm run verify -- --seed ${result.seed} --path "${result.counterexamplePath}" --property "${name}"`,
    );
  } else {
    console.log(
      `✓ ${name}: ${result.numRuns} runs in ${seconds.toFixed(1)} s (${rate} runs/s, seed ${seed})`,
    );
  }
}

const depth = Number(values.depth);
if (depth > 0) {
  for (const heartbeat of [true, false]) {
    const report = explore(depth, { ...DEFAULT_WORLD, heartbeat });
    const rate = Math.round(report.schedules / (report.elapsedMs / 1000));
    console.log(
      `${report.violations.length === 0 ? '✓' : '✗'} exhaustive depth ${depth}, heartbeat ${heartbeat}: ` +
        `${report.schedules} schedules, ${report.distinctStates} distinct states, ${rate} schedules/s`,
    );
    for (const v of report.violations.slice(0, 5)) {
      failed = true;
      console.log(
        `  ${v.check}: ${JSON.stringify(v.schedule)}\n    ${v.messages.slice(0, 2).join('\n    ')}`,
      );
    }
  }
}
process.exit(failed ? 1 : 0);
