import { parseOptions } from '../src/cli/args.js';
import { runHostile } from './hostile-runs.js';
import { runVerifyListen } from './listen-modern/verify.js';
import { runVerifyModern } from './verify-modern.js';
import { propertyNames, runVerify } from './verify-run.js';

/**
 * `npm run verify`: the long property exploration, from a clone. Not part of the published package (the
 * simulated world and fast-check are development dependencies), so it has its own small command line.
 */
const envNumber = (name: string, fallback: number | undefined) =>
  process.env[name] ? Number(process.env[name]) : fallback;

const parsed = parseOptions(
  'npm run verify --',
  {
    description: 'explore the model: random fault schedules per property, and an exhaustive search',
    options: {
      runs: {
        kind: 'int',
        placeholder: '<n>',
        description: 'random runs per property',
        default: envNumber('MCPC_RUNS', 20_000),
      },
      seed: {
        kind: 'number',
        placeholder: '<n>',
        description: 'seed (replays a CI failure together with --path)',
        default: envNumber('MCPC_SEED', undefined),
      },
      path: {
        kind: 'string',
        placeholder: '<path>',
        description: 'counterexample path printed by a failure',
      },
      property: {
        kind: 'list',
        placeholder: '<name>',
        description: `only these properties: ${propertyNames().join(', ')}`,
      },
      depth: {
        kind: 'int',
        placeholder: '<n>',
        description: 'exhaustive search depth (0: skip)',
        default: envNumber('MCPC_DEPTH', 0),
      },
      'runs-2026': {
        kind: 'int',
        placeholder: '<n>',
        description: 'random worlds of the MCP 2026-07-28 model (properties/worldModern; 0: skip)',
        default: envNumber('MCPC_MODERN_RUNS', 20_000),
      },
      'path-2026': {
        kind: 'string',
        placeholder: '<path>',
        description: 'replays a 2026-07-28 counterexample (with --seed and --runs 0)',
      },
      'runs-listen': {
        kind: 'int',
        placeholder: '<n>',
        description:
          'random worlds of the listen model (properties/listenModern: exact listen gaps; 0: skip)',
        default: envNumber('MCPC_LISTEN_RUNS', 20_000),
      },
      'path-listen': {
        kind: 'string',
        placeholder: '<path>',
        description: 'replays a listen-model counterexample (with --seed)',
      },
      hostile: {
        kind: 'int',
        placeholder: '<n>',
        description:
          'also run the hostile-input suites: n batches of raw requests against the server (CI: 100) and n generated hostile servers against the client (CI: 60)',
        default: 0,
      },
    },
  },
  process.argv.slice(2),
);

if (parsed.kind === 'help') console.log(parsed.text);
else if (parsed.kind === 'error') {
  console.error(`npm run verify: ${parsed.message}\n\n${parsed.usage}`);
  process.exitCode = 2;
} else {
  const o = parsed.values;
  const runs = o.runs as number;
  const depth = o.depth as number;
  const seed = o.seed as number | undefined;
  const runsModern = o['runs-2026'] as number;
  const runsListen = o['runs-listen'] as number;
  const hostile = o.hostile as number;
  // --runs 0 with no exhaustive depth: only the other explorations (say, replaying a 2026 failure).
  let ok =
    runs > 0 || depth > 0
      ? runVerify({
          runs,
          seed,
          path: o.path as string | undefined,
          properties: o.property as string[] | undefined,
          depth,
        })
      : true;
  if (runsModern > 0)
    ok = runVerifyModern({ runs: runsModern, seed, path: o['path-2026'] as string | undefined }) && ok;
  if (runsListen > 0)
    ok = runVerifyListen({ runs: runsListen, seed, path: o['path-listen'] as string | undefined }) && ok;
  if (hostile > 0) ok = runHostile({ serverBatches: hostile, clientRuns: hostile }) && ok;
  process.exitCode = ok ? 0 : 1;
}
