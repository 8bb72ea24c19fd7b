import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { findNode22 } from './node22.js';

/**
 * Runs the MCP conformance suite's (`@modelcontextprotocol/conformance` 0.1.16) client scenarios against
 * test/conformance/client-app.ts: the CLI starts the scenario's server, runs the app with its URL, and
 * judges what the server saw. Shared by the client test files (client.test.ts; an auth one can reuse it).
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const APP = fileURLToPath(new URL('./client-app.ts', import.meta.url));

/** One check the suite recorded (`checks.json`). */
export interface Check {
  readonly id: string;
  readonly status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  readonly errorMessage?: string;
}

export interface ClientRunOptions {
  /** `continuity` (default): ContinuityClientTransport. `sdk`: the SDK's StreamableHTTPClientTransport. */
  readonly transport?: 'continuity' | 'sdk';
  /** The CLI's bound on the client process (`--timeout`); the CLI's own default is 30 s. */
  readonly clientTimeoutMs?: number;
  /** More environment for the client app (e.g. what an auth scenario's client needs). */
  readonly env?: Readonly<Record<string, string>>;
  /** Another client app than client-app.ts (a TypeScript file, bundled as client-app.ts is). */
  readonly app?: string;
}

export interface ClientRunResult {
  readonly scenario: string;
  /** The CLI's verdict: exit 0 means no failed or warning check, no timeout and a client that exited 0. */
  readonly passed: boolean;
  readonly checks: readonly Check[];
  /** Failed and warning checks, the timeout and the client's error, for the assertion message. */
  readonly problems: readonly string[];
  readonly ms: number;
}

interface CliOutcome {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function cli(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<CliOutcome> {
  return new Promise((resolve) => {
    execFile(
      findNode22(),
      [CLI, ...args],
      { cwd: ROOT, env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** The suite's client scenarios (`conformance list --client`), auth ones included. */
export async function listClientScenarios(): Promise<string[]> {
  const listed = await cli(['list', '--client'], process.env, 60_000);
  if (listed.code !== 0) throw new Error(`conformance list failed: ${listed.stderr}`);
  return [...listed.stdout.matchAll(/^\s+-\s+(\S+)\s+\[/gm)].map((m) => m[1] as string);
}

const bundles = new Map<string, Promise<string>>();
const bundleDirs: string[] = [];

/**
 * The client app bundled into one ES module, once per app and process: started with tsx, each run spent
 * ~4 s on a loaded machine transforming src/ before its first request; bundled, it starts in ~0.6 s.
 */
function bundled(app: string): Promise<string> {
  let bundle = bundles.get(app);
  if (!bundle) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mcp-conformance-app-'));
    bundleDirs.push(dir);
    const outfile = path.join(dir, 'client-app.mjs');
    bundle = build({
      entryPoints: [app],
      outfile,
      bundle: true,
      platform: 'node',
      format: 'esm',
      logLevel: 'warning',
      // CommonJS dependencies inside an ES module bundle call `require`.
      banner: {
        js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
      },
    }).then(() => outfile);
    bundles.set(app, bundle);
  }
  return bundle;
}

/** Deletes the bundled apps (a test file's `afterAll`). */
export function removeClientApps(): void {
  for (const dir of bundleDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  bundles.clear();
}

/** The checks.json the CLI wrote under `dir` (`<scenario>-<timestamp>/checks.json`, nested for `auth/…`). */
function readChecks(dir: string): Check[] | undefined {
  for (const entry of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    if (path.basename(entry) === 'checks.json')
      return JSON.parse(readFileSync(path.join(dir, entry), 'utf8')) as Check[];
  }
  return undefined;
}

/** One run of one client scenario, in its own output directory (parallel runs cannot collide). */
export async function runClientScenario(
  scenario: string,
  options: ClientRunOptions = {},
): Promise<ClientRunResult> {
  const clientTimeoutMs = options.clientTimeoutMs ?? 30_000;
  const outDir = mkdtempSync(path.join(os.tmpdir(), 'mcp-conformance-client-'));
  const command = [process.execPath, await bundled(options.app ?? APP)].join(' ');
  const env = {
    ...process.env,
    ...options.env,
    CONFORMANCE_CLIENT_TRANSPORT: options.transport ?? 'continuity',
  };
  const started = performance.now();
  try {
    const outcome = await cli(
      [
        'client',
        '--command',
        command,
        '--scenario',
        scenario,
        '--timeout',
        String(clientTimeoutMs),
        '-o',
        outDir,
      ],
      env,
      // The CLI also starts and stops the scenario's server: room beyond the client's own bound.
      clientTimeoutMs + 30_000,
    );
    const ms = performance.now() - started;
    const checks = readChecks(outDir) ?? [];
    const problems = checks
      .filter((c) => c.status === 'FAILURE' || c.status === 'WARNING')
      .map((c) => `${c.status} ${c.id}: ${c.errorMessage ?? ''}`);
    if (outcome.code !== 0) {
      const tail = outcome.stderr.split('\n').filter((l) => /timed out|exited|Error/i.test(l));
      problems.push(`exit ${outcome.code}: ${tail.slice(0, 6).join(' | ')}`);
    }
    return { scenario, passed: outcome.code === 0, checks, problems, ms };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

/** Runs `count` runs of a scenario, at most `concurrency` at a time. */
export async function runRepeatedly(
  scenario: string,
  count: number,
  concurrency: number,
  options: ClientRunOptions = {},
): Promise<ClientRunResult[]> {
  const results: ClientRunResult[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      results.push(await runClientScenario(scenario, options));
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return results;
}

/**
 * A section of expected-failures.yml: `client: []`, or `client:` then `  - name  # reason` lines. A listed
 * scenario without a reason is an error.
 */
export function readBaseline(text: string, section: 'client' | 'server'): Map<string, string> {
  const out = new Map<string, string>();
  let inSection = false;
  for (const line of text.split('\n')) {
    if (/^\s*(#.*)?$/.test(line)) continue;
    const header = /^(\w+):/.exec(line);
    if (header) {
      inSection = header[1] === section;
      continue;
    }
    const item = /^\s+-\s*([\w./-]+)\s*(?:#\s*(.*))?$/.exec(line);
    if (!inSection || !item) continue;
    const [, name, reason] = item;
    if (!reason?.trim()) throw new Error(`expected-failures.yml: ${name} has no reason`);
    out.set(name as string, reason.trim());
  }
  return out;
}
