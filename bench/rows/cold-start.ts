import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { RawSession } from '../lib/raw.js';
import { bounded, median } from '../lib/stats.js';

/**
 * Row 7 (issue 25): cold start, from `spawn` of a server process to the answer of its first tool call.
 * Each server's entry (bench/cold/*.ts) is bundled once with esbuild, every package left external (so
 * `node_modules` loads as an application's would, and no TypeScript loader runs in the timed process),
 * then started with plain `node` `rounds` times, the two alternating. Timed from `spawn` to `READY` (the
 * server listens) and to the answer of an `echo` call on a new session (initialize,
 * notifications/initialized, tools/call), read by raw `fetch` from this already warm process.
 */
export interface ColdStartResult {
  readonly rounds: number;
  /** Median, in ms, per server. */
  readonly ours: { readyMs: number; firstCallMs: number; all: number[] };
  readonly sdk: { readyMs: number; firstCallMs: number; all: number[] };
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Inside node_modules, so the bundle's bare imports resolve to this checkout's packages; not tracked by git.
const OUT_DIR = join(ROOT, 'node_modules', '.cache', 'mcpc-bench-cold');

async function bundle(name: 'ours' | 'sdk'): Promise<string> {
  const outfile = join(OUT_DIR, `${name}.mjs`);
  await build({
    entryPoints: [join(ROOT, 'bench', 'cold', `${name}.ts`)],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'error',
  });
  return outfile;
}

/** One cold start: spawn, wait for READY, open a session and answer one call; then the process is killed. */
async function once(file: string): Promise<{ readyMs: number; firstCallMs: number }> {
  const start = performance.now();
  const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const url = await bounded(
      new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /READY (\S+)/.exec(out);
          if (m) resolve(m[1] as string);
        });
        child.once('exit', (code) => reject(new Error(`${file} exited with ${code} before READY`)));
      }),
      30_000,
      `${file}: READY`,
    );
    const readyMs = performance.now() - start;
    const session = new RawSession(url);
    await session.initialize();
    const r = await session.call('echo', { text: 'cold' }, 30_000);
    if (r.status !== 200 || r.messages < 1) throw new Error(`${file}: first call answered HTTP ${r.status}`);
    return { readyMs, firstCallMs: performance.now() - start };
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
  }
}

export async function coldStart(rounds: number): Promise<ColdStartResult> {
  await mkdir(OUT_DIR, { recursive: true });
  const files = { ours: await bundle('ours'), sdk: await bundle('sdk') };
  // One unmeasured start of each: the page cache holds both stacks' files afterwards.
  await once(files.ours);
  await once(files.sdk);
  type Run = { readyMs: number; firstCallMs: number };
  const runs: { ours: Run[]; sdk: Run[] } = { ours: [], sdk: [] };
  for (let i = 0; i < rounds; i++) {
    const order = i % 2 === 0 ? (['ours', 'sdk'] as const) : (['sdk', 'ours'] as const);
    for (const k of order) runs[k].push(await once(files[k]));
  }
  const summary = (rs: Run[]) => ({
    readyMs: median(rs.map((r) => r.readyMs)),
    firstCallMs: median(rs.map((r) => r.firstCallMs)),
    all: rs.map((r) => Math.round(r.firstCallMs)),
  });
  return { rounds, ours: summary(runs.ours), sdk: summary(runs.sdk) };
}
