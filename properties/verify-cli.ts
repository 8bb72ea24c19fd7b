import { Command, InvalidArgumentError } from 'commander';
import { runHostile } from './hostile-runs.js';
import { propertyNames, runVerify } from './verify-run.js';

/**
 * `npm run verify`: the long property exploration, from a clone. Not part of the published package (the
 * simulated world and fast-check are development dependencies), so it has its own small command line.
 */
const int = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a whole number`);
  return n;
};

const program = new Command()
  .name('npm run verify --')
  .description('explore the model: random fault schedules per property, and an exhaustive search')
  .option('--runs <n>', 'random runs per property', int('--runs'), Number(process.env.MCPC_RUNS ?? 20_000))
  .option(
    '--seed <n>',
    'seed (replays a CI failure together with --path)',
    (v) => Number(v),
    process.env.MCPC_SEED ? Number(process.env.MCPC_SEED) : undefined,
  )
  .option('--path <path>', 'counterexample path printed by a failure')
  .option('--property <name...>', `only these properties: ${propertyNames().join(', ')}`)
  .option(
    '--depth <n>',
    'exhaustive search depth (0: skip)',
    int('--depth'),
    Number(process.env.MCPC_DEPTH ?? 0),
  )
  .option(
    '--hostile <n>',
    'also run the hostile-input suites: n batches of raw requests against the server (CI: 100) and n generated hostile servers against the client (CI: 60)',
    int('--hostile'),
    0,
  )
  .action(
    (o: {
      runs: number;
      seed?: number;
      path?: string;
      property?: string[];
      depth: number;
      hostile: number;
    }) => {
      let ok = runVerify({
        runs: o.runs,
        seed: o.seed,
        path: o.path,
        properties: o.property,
        depth: o.depth,
      });
      if (o.hostile > 0) ok = runHostile({ serverBatches: o.hostile, clientRuns: o.hostile }) && ok;
      process.exitCode = ok ? 0 : 1;
    },
  );

program.parse(process.argv);
