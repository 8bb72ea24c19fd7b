import { Command, InvalidArgumentError } from 'commander';
import { runHostile } from './hostile-runs.js';
import { runVerifyListen } from './listen2026/verify.js';
import { propertyNames, runVerify } from './verify-run.js';
import { runVerify2026 } from './verify2026.js';

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
    '--runs-2026 <n>',
    'random worlds of the MCP 2026-07-28 model (properties/world2026; 0: skip)',
    int('--runs-2026'),
    Number(process.env.MCPC_2026_RUNS ?? 20_000),
  )
  .option('--path-2026 <path>', 'replays a 2026-07-28 counterexample (with --seed and --runs 0)')
  .option(
    '--runs-listen <n>',
    'random worlds of the listen model (properties/listen2026: exact listen gaps; 0: skip)',
    int('--runs-listen'),
    Number(process.env.MCPC_LISTEN_RUNS ?? 20_000),
  )
  .option('--path-listen <path>', 'replays a listen-model counterexample (with --seed)')
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
      runs2026: number;
      path2026?: string;
      runsListen: number;
      pathListen?: string;
    }) => {
      // --runs 0 with no exhaustive depth: only the other explorations (say, replaying a 2026 failure).
      let ok =
        o.runs > 0 || o.depth > 0
          ? runVerify({ runs: o.runs, seed: o.seed, path: o.path, properties: o.property, depth: o.depth })
          : true;
      if (o.runs2026 > 0) ok = runVerify2026({ runs: o.runs2026, seed: o.seed, path: o.path2026 }) && ok;
      if (o.runsListen > 0)
        ok = runVerifyListen({ runs: o.runsListen, seed: o.seed, path: o.pathListen }) && ok;
      if (o.hostile > 0) ok = runHostile({ serverBatches: o.hostile, clientRuns: o.hostile }) && ok;
      process.exitCode = ok ? 0 : 1;
    },
  );

program.parse(process.argv);
