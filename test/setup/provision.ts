import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { locateNode22, NODE22_CACHE_DIR } from '../conformance/node22.js';
import { CHROMIUM } from '../inspect/chromium-path.js';
import {
  aptCommands,
  node22InstallCommand,
  type ProvisionFacts,
  type ProvisionStep,
  planProvision,
} from './provision-plan.js';

/**
 * Vitest global setup: provisions what the suite needs beyond `npm ci` (Node 22 for the conformance CLI,
 * redis-server, chromium) so that `npm ci && npm test` pass on a fresh machine. The decisions are
 * `planProvision`'s; this file only observes the machine and executes the plan.
 */

const PARTIAL_PREFIX = 'node22.partial-';

/** Whether the process that named a partial install (`node22.partial-<pid>-…`) is still running. */
function ownerAlive(name: string): boolean {
  const pid = Number(name.slice(PARTIAL_PREFIX.length).split('-')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // alive, someone else's
  }
}

function runs(argv: readonly string[], timeoutMs = 5_000): boolean {
  const [command, ...args] = argv as [string, ...string[]];
  const result = spawnSync(command, args, { stdio: 'ignore', timeout: timeoutMs });
  return result.error === undefined && result.status === 0;
}

/** The facts `planProvision` decides on. */
export function observe(env: NodeJS.ProcessEnv = process.env): ProvisionFacts {
  const isRoot = process.getuid?.() === 0;
  const redisFound = runs([env.REDIS_SERVER || 'redis-server', '--version']);
  const chromiumFound = existsSync(CHROMIUM);
  const needsApt = !redisFound || !chromiumFound;
  return {
    env: {
      MCPC_NO_SYSTEM_INSTALL: env.MCPC_NO_SYSTEM_INSTALL,
      REDIS_SERVER: env.REDIS_SERVER,
      MCPC_CHROMIUM: env.MCPC_CHROMIUM,
      MCP_CONFORMANCE_NODE: env.MCP_CONFORMANCE_NODE,
    },
    node22Found: locateNode22() !== undefined,
    redisFound,
    chromiumFound,
    aptGet: runs(['apt-get', '--version']),
    isRoot,
    // Only asked when it matters; `-n` never prompts, so this returns at once either way.
    sudoWithoutPassword: needsApt && !isRoot && runs(['sudo', '-n', 'true']),
  };
}

function execute(argv: readonly string[], what: string): void {
  const [command, ...args] = argv as [string, ...string[]];
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.error || result.status !== 0) {
    throw new Error(
      `test setup: ${what} failed (\`${argv.join(' ')}\`: ${result.error?.message ?? `exit ${result.status ?? result.signal}`})`,
    );
  }
}

/**
 * Installs the `node` npm package into a fresh sibling directory, then renames it into place: a
 * concurrent or aborted run never leaves a half install at `.cache/node22`.
 */
export async function installNode22(version: string): Promise<void> {
  const cache = join(NODE22_CACHE_DIR, '..');
  await mkdir(cache, { recursive: true });
  // Partial installs of aborted runs; a live run's is left alone.
  for (const name of await readdir(cache)) {
    if (name.startsWith(PARTIAL_PREFIX) && !ownerAlive(name)) {
      await rm(join(cache, name), { recursive: true, force: true });
    }
  }
  const partial = await mkdtemp(join(cache, `${PARTIAL_PREFIX}${process.pid}-`));
  await chmod(partial, 0o755); // mkdtemp's 0700 would become .cache/node22's mode
  try {
    console.log(`test setup: installing node@${version} for the conformance CLI into .cache/node22 (once)`);
    execute(node22InstallCommand(version, partial), `installing node@${version}`);
    if (!runs([join(partial, 'node_modules/.bin/node'), '--version'], 30_000)) {
      throw new Error(`test setup: node@${version} installed into ${partial} does not run`);
    }
    try {
      await rename(partial, NODE22_CACHE_DIR);
    } catch (error) {
      // Another run renamed its complete install first (the target is then a non-empty directory).
      if (!existsSync(join(NODE22_CACHE_DIR, 'node_modules/.bin/node'))) throw error;
    }
  } finally {
    await rm(partial, { recursive: true, force: true });
  }
}

async function perform(step: ProvisionStep): Promise<void> {
  if (step.kind === 'install-node22') return installNode22(step.version);
  console.log(`test setup: installing ${step.packages.join(' ')} with apt-get (once)`);
  for (const argv of aptCommands(step)) execute(argv, `installing ${step.packages.join(' ')}`);
}

export default async function provision(): Promise<void> {
  const plan = planProvision(observe());
  if (plan.kind === 'stop') {
    const stop = new Error(plan.message);
    stop.stack = stop.message; // the message says what to do; a stack trace into this file would bury it
    throw stop;
  }
  for (const step of plan.steps) await perform(step);
  for (const warning of plan.warnings) console.warn(warning);
  if (plan.steps.length === 0) return;
  // What was installed must now be found where the tests look: a second plan has nothing left to do.
  const again = planProvision(observe());
  if (again.kind === 'run' && again.steps.length > 0) {
    throw new Error(`test setup: installed, but still missing: ${JSON.stringify(again.steps)}`);
  }
}
