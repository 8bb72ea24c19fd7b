/**
 * What `npm test` must provision before any test runs, decided from facts about the machine. Pure: the
 * global setup (`provision.ts`) gathers the facts, asks {@link planProvision}, and executes the answer.
 *
 * Three things the suite needs beyond `npm ci`:
 * - Node 22 for the MCP conformance CLI (the project itself runs on Node 20). Installed from npm into
 *   `.cache/node22`, never as a project dependency: as one, the `node` package would put Node 22 first on
 *   every npm script's PATH, and better-sqlite3 is built for Node 20.
 * - `redis-server` for the Redis event log tests, and Debian's `chromium` for the inspector's browser test.
 *   Installed with apt-get when it may run (root, or passwordless sudo); otherwise the run stops at once
 *   with the one command to run, instead of failing test after test.
 */

/** The `node` npm package version the conformance CLI runs on. */
export const NODE22_VERSION = '22.23.3';

/** The Debian packages that provide each system tool. */
export const APT_PACKAGES = { redis: 'redis-server', chromium: 'chromium' } as const;

export type SystemTool = keyof typeof APT_PACKAGES;

/** The environment variables the plan reads. */
export interface ProvisionEnv {
  /** `1`: never run apt-get; what is missing is reported and the tests that need it fail on their own. */
  readonly MCPC_NO_SYSTEM_INSTALL?: string;
  /** A redis-server to use instead of the one on the PATH (test/support/redis-server.ts). */
  readonly REDIS_SERVER?: string;
  /** A chromium to use instead of /usr/bin/chromium (test/inspect/chromium.ts). */
  readonly MCPC_CHROMIUM?: string;
  /** A Node 22 binary to use instead of `.cache/node22` (test/conformance/node22.ts). */
  readonly MCP_CONFORMANCE_NODE?: string;
}

/** What the setup observed. Each `…Found` is about the binary the tests will actually use. */
export interface ProvisionFacts {
  readonly env: ProvisionEnv;
  readonly node22Found: boolean;
  readonly redisFound: boolean;
  readonly chromiumFound: boolean;
  /** apt-get is on the PATH (a Debian-like system). */
  readonly aptGet: boolean;
  readonly isRoot: boolean;
  /** `sudo -n true` succeeded: sudo works without a password prompt. Only probed when not root. */
  readonly sudoWithoutPassword: boolean;
}

/** One thing to do, in order. */
export type ProvisionStep =
  | { readonly kind: 'install-node22'; readonly version: string }
  | {
      readonly kind: 'apt-install';
      readonly packages: readonly string[];
      /** argv prefix: `[]` as root, `['sudo', '-n']` otherwise. */
      readonly prefix: readonly string[];
    };

export type ProvisionPlan =
  /** Do these steps (possibly none), then print the warnings. */
  | { readonly kind: 'run'; readonly steps: readonly ProvisionStep[]; readonly warnings: readonly string[] }
  /** Stop the test run now with this message. */
  | { readonly kind: 'stop'; readonly message: string };

const set = (value: string | undefined): value is string => value !== undefined && value !== '';

/** The shell line a person runs to install the given packages on Debian/Ubuntu. */
export function aptCommandLine(packages: readonly string[], sudo: boolean): string {
  const s = sudo ? 'sudo ' : '';
  return `${s}apt-get update && ${s}apt-get install -y ${packages.join(' ')}`;
}

/** Decides what to install, what to warn about, or why to stop. */
export function planProvision(facts: ProvisionFacts): ProvisionPlan {
  const { env } = facts;
  const steps: ProvisionStep[] = [];
  const warnings: string[] = [];

  // An override that points nowhere is a mistake to report, never a reason to install something else.
  const broken: string[] = [];
  if (set(env.MCP_CONFORMANCE_NODE) && !facts.node22Found) {
    broken.push(`MCP_CONFORMANCE_NODE=${env.MCP_CONFORMANCE_NODE} does not exist`);
  }
  if (set(env.REDIS_SERVER) && !facts.redisFound) {
    broken.push(`REDIS_SERVER=${env.REDIS_SERVER} does not run (\`${env.REDIS_SERVER} --version\` failed)`);
  }
  if (set(env.MCPC_CHROMIUM) && !facts.chromiumFound) {
    broken.push(`MCPC_CHROMIUM=${env.MCPC_CHROMIUM} does not exist`);
  }
  if (broken.length > 0) {
    return { kind: 'stop', message: `test setup: ${broken.join('; ')}. Fix or unset it.` };
  }

  if (!facts.node22Found) steps.push({ kind: 'install-node22', version: NODE22_VERSION });

  const missing: string[] = [];
  if (!facts.redisFound) missing.push(APT_PACKAGES.redis);
  if (!facts.chromiumFound) missing.push(APT_PACKAGES.chromium);
  if (missing.length === 0) return { kind: 'run', steps, warnings };

  const overrides = 'or set REDIS_SERVER / MCPC_CHROMIUM to binaries you have';
  if (env.MCPC_NO_SYSTEM_INSTALL === '1') {
    warnings.push(
      `test setup: MCPC_NO_SYSTEM_INSTALL=1, not installing ${missing.join(', ')}; ` +
        `the tests that need ${missing.length > 1 ? 'them' : 'it'} will fail.`,
    );
    return { kind: 'run', steps, warnings };
  }
  const optOut = `or set MCPC_NO_SYSTEM_INSTALL=1 to run the other tests without ${missing.length > 1 ? 'them' : 'it'}`;
  if (!facts.aptGet) {
    return {
      kind: 'stop',
      message:
        `test setup: ${missing.join(' and ')} missing and apt-get is not available. ` +
        `Install ${missing.join(' and ')} with your package manager, ${overrides}, ${optOut}.`,
    };
  }
  if (facts.isRoot || facts.sudoWithoutPassword) {
    steps.push({ kind: 'apt-install', packages: missing, prefix: facts.isRoot ? [] : ['sudo', '-n'] });
    return { kind: 'run', steps, warnings };
  }
  return {
    kind: 'stop',
    message:
      `test setup: ${missing.join(' and ')} missing, and installing needs root. Run:\n\n` +
      `    ${aptCommandLine(missing, true)}\n\n` +
      `then \`npm test\` again (${overrides}, ${optOut}).`,
  };
}

/**
 * The commands an `apt-install` step runs, in order. Noninteractive; waits for a dpkg lock another
 * install holds rather than failing.
 */
export function aptCommands(step: Extract<ProvisionStep, { kind: 'apt-install' }>): string[][] {
  const apt = [
    ...step.prefix,
    'env',
    'DEBIAN_FRONTEND=noninteractive',
    'apt-get',
    '-qq',
    '-o',
    'DPkg::Lock::Timeout=300',
  ];
  return [
    [...apt, 'update'],
    [...apt, 'install', '-y', ...step.packages],
  ];
}

/** The command an `install-node22` step runs, into a fresh directory the setup then renames into place. */
export function node22InstallCommand(version: string, prefix: string): string[] {
  return [
    'npm',
    'install',
    '--no-save',
    '--no-package-lock',
    '--no-audit',
    '--no-fund',
    '--prefix',
    prefix,
    `node@${version}`,
  ];
}
