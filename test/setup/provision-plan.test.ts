import { describe, expect, it } from 'vitest';
import {
  aptCommandLine,
  aptCommands,
  NODE22_VERSION,
  node22InstallCommand,
  type ProvisionFacts,
  planProvision,
} from './provision-plan.js';

/** A machine with everything installed, as root, on Debian; each test changes what it is about. */
const ready: ProvisionFacts = {
  env: {},
  node22Found: true,
  redisFound: true,
  chromiumFound: true,
  aptGet: true,
  isRoot: true,
  sudoWithoutPassword: false,
};
const bare = (over: Partial<ProvisionFacts>): ProvisionFacts => ({
  ...ready,
  node22Found: false,
  redisFound: false,
  chromiumFound: false,
  ...over,
});

function stopMessage(facts: ProvisionFacts): string {
  const plan = planProvision(facts);
  if (plan.kind !== 'stop') throw new Error(`expected a stop, got ${JSON.stringify(plan)}`);
  return plan.message;
}

describe('planProvision', () => {
  it('does nothing when everything is there', () => {
    expect(planProvision(ready)).toEqual({ kind: 'run', steps: [], warnings: [] });
    expect(planProvision({ ...ready, isRoot: false })).toEqual({ kind: 'run', steps: [], warnings: [] });
  });

  it('installs Node 22 from npm without any privilege', () => {
    expect(planProvision({ ...ready, node22Found: false, isRoot: false })).toEqual({
      kind: 'run',
      steps: [{ kind: 'install-node22', version: NODE22_VERSION }],
      warnings: [],
    });
  });

  it('as root, installs Node 22 and the missing system packages with apt-get', () => {
    expect(planProvision(bare({ isRoot: true }))).toEqual({
      kind: 'run',
      steps: [
        { kind: 'install-node22', version: NODE22_VERSION },
        { kind: 'apt-install', packages: ['redis-server', 'chromium'], prefix: [] },
      ],
      warnings: [],
    });
  });

  it('installs only what is missing', () => {
    const plan = planProvision({ ...ready, chromiumFound: false });
    expect(plan).toEqual({
      kind: 'run',
      steps: [{ kind: 'apt-install', packages: ['chromium'], prefix: [] }],
      warnings: [],
    });
  });

  it('without root, uses passwordless sudo', () => {
    const plan = planProvision({ ...ready, redisFound: false, isRoot: false, sudoWithoutPassword: true });
    expect(plan).toEqual({
      kind: 'run',
      steps: [{ kind: 'apt-install', packages: ['redis-server'], prefix: ['sudo', '-n'] }],
      warnings: [],
    });
  });

  it('without permission, stops with the one command to run', () => {
    const message = stopMessage(bare({ isRoot: false, sudoWithoutPassword: false }));
    expect(message).toContain('sudo apt-get update && sudo apt-get install -y redis-server chromium');
    expect(message).toContain('MCPC_NO_SYSTEM_INSTALL=1');
    const onlyRedis = stopMessage({ ...ready, redisFound: false, isRoot: false });
    expect(onlyRedis).toContain('sudo apt-get install -y redis-server\n');
  });

  it('without apt-get, stops and says what to install', () => {
    const message = stopMessage({ ...ready, chromiumFound: false, aptGet: false });
    expect(message).toMatch(/chromium missing and apt-get is not available/);
    expect(message).toContain('MCPC_CHROMIUM');
  });

  it('with MCPC_NO_SYSTEM_INSTALL=1, never runs apt-get: warns and still installs Node 22', () => {
    const plan = planProvision(bare({ env: { MCPC_NO_SYSTEM_INSTALL: '1' } }));
    expect(plan.kind).toBe('run');
    if (plan.kind !== 'run') return;
    expect(plan.steps).toEqual([{ kind: 'install-node22', version: NODE22_VERSION }]);
    expect(plan.warnings).toEqual([expect.stringContaining('not installing redis-server, chromium')]);
    // The opt-out also keeps a user without permission from being stopped.
    const noRoot = planProvision({
      ...ready,
      redisFound: false,
      isRoot: false,
      env: { MCPC_NO_SYSTEM_INSTALL: '1' },
    });
    expect(noRoot).toMatchObject({ kind: 'run', steps: [] });
  });

  it('takes overrides that exist instead of installing', () => {
    const env = {
      REDIS_SERVER: '/opt/redis/bin/redis-server',
      MCPC_CHROMIUM: '/opt/chrome/chrome',
      MCP_CONFORMANCE_NODE: '/opt/n22',
    };
    expect(planProvision({ ...ready, env, isRoot: false })).toEqual({ kind: 'run', steps: [], warnings: [] });
  });

  it('stops on an override that points nowhere, rather than installing something else', () => {
    const message = stopMessage(
      bare({
        env: {
          REDIS_SERVER: '/nope/redis-server',
          MCPC_CHROMIUM: '/nope/chromium',
          MCP_CONFORMANCE_NODE: '/nope/node',
        },
      }),
    );
    expect(message).toContain('REDIS_SERVER=/nope/redis-server');
    expect(message).toContain('MCPC_CHROMIUM=/nope/chromium');
    expect(message).toContain('MCP_CONFORMANCE_NODE=/nope/node');
    // An empty override is no override.
    expect(planProvision(bare({ env: { REDIS_SERVER: '', MCPC_CHROMIUM: '' } }))).toMatchObject({
      kind: 'run',
    });
  });
});

describe('the commands', () => {
  it('apt-get runs noninteractively, waits for the dpkg lock, and under sudo -n when not root', () => {
    const [update, install] = aptCommands({
      kind: 'apt-install',
      packages: ['redis-server'],
      prefix: ['sudo', '-n'],
    });
    expect(update).toEqual([
      'sudo',
      '-n',
      'env',
      'DEBIAN_FRONTEND=noninteractive',
      'apt-get',
      '-qq',
      '-o',
      'DPkg::Lock::Timeout=300',
      'update',
    ]);
    expect(install?.slice(0, 2)).toEqual(['sudo', '-n']);
    expect(install?.slice(-3)).toEqual(['install', '-y', 'redis-server']);
    expect(aptCommandLine(['chromium'], false)).toBe('apt-get update && apt-get install -y chromium');
  });

  it('Node 22 goes into the given directory, never into package.json or the lock file', () => {
    const argv = node22InstallCommand('22.23.3', '/tmp/x');
    expect(argv).toEqual(
      expect.arrayContaining(['--no-save', '--no-package-lock', '--prefix', '/tmp/x', 'node@22.23.3']),
    );
  });
});
