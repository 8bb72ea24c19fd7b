#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { propertyNames, runVerify } from '../../properties/verify-run.js';
import { runDemo } from '../demo/run-demo.js';

/**
 * `mcp-continuity demo`: the design note's scenario, live (what `npm start` runs).
 * `mcp-continuity verify`: the long property exploration (what `npm run verify` runs).
 */
const int = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a whole number`);
  return n;
};

const program = new Command()
  .name('mcp-continuity')
  .description('MCP Streamable HTTP that never confuses a dropped connection with a lost session');

program
  .command('demo')
  .description(
    'run the design note scenario: a long charge through a balancer that cuts idle connections, then a chatty tool through a too-small buffer',
  )
  .option('--idle-timeout <ms>', "the balancer's idle timeout", int('--idle-timeout'), 250)
  .option('--charge-ms <ms>', 'how long the charge takes', int('--charge-ms'), 900)
  .option('--count <n>', 'notifications the chatty tool sends', int('--count'), 300)
  .option('--buffer <n>', 'events the server keeps per stream', int('--buffer'), 100)
  .action(async (o: { idleTimeout: number; chargeMs: number; count: number; buffer: number }) => {
    const s = await runDemo({
      idleTimeoutMs: o.idleTimeout,
      chargeMs: o.chargeMs,
      chattyCount: o.count,
      bufferSize: o.buffer,
    });
    const held = s.charges === 1 && s.sessionKept && s.lostSilently === 0 && s.duplicates === 0;
    console.log(held ? '\nAll guarantees held.' : '\nA guarantee was broken: see above.');
    process.exitCode = held ? 0 : 1;
  });

program
  .command('verify')
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
  .action((o: { runs: number; seed?: number; path?: string; property?: string[]; depth: number }) => {
    const ok = runVerify({
      runs: o.runs,
      seed: o.seed,
      path: o.path,
      properties: o.property,
      depth: o.depth,
    });
    process.exitCode = ok ? 0 : 1;
  });

await program.parseAsync(process.argv);
