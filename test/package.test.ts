import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { builtinModules, createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * What the published package imports at run time must be installed with it: every bare import in the
 * shipped sources (machines/, src/) is a dependency or a peer dependency. A devDependency used by
 * shipped code works here and breaks in a user's project.
 */
async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sources(path)));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

const packageOf = (specifier: string) =>
  specifier.startsWith('@')
    ? specifier.split('/').slice(0, 2).join('/')
    : (specifier.split('/')[0] as string);

describe('the published package', () => {
  it('declares every package its shipped code imports', async () => {
    const pkg = JSON.parse(await readFile('package.json', 'utf8'));
    const declared = new Set([
      pkg.name,
      ...Object.keys(pkg.dependencies ?? {}),
      ...Object.keys(pkg.peerDependencies ?? {}),
    ]);
    const builtins = new Set(builtinModules);
    const missing = new Set<string>();
    for (const root of ['machines', 'src']) {
      for (const file of await sources(root)) {
        const text = await readFile(file, 'utf8');
        for (const m of text.matchAll(/(?:from |import\()'([^'.][^']*)'/g)) {
          const name = packageOf(m[1] as string);
          if (!name.startsWith('node:') && !builtins.has(name) && !declared.has(name))
            missing.add(`${name} (${file})`);
        }
      }
    }
    expect([...missing]).toEqual([]);
  });

  it('machines/ imports nothing but xstate and itself', async () => {
    const offenders: string[] = [];
    for (const file of await sources('machines')) {
      const text = await readFile(file, 'utf8');
      for (const m of text.matchAll(/from '([^']+)'/g)) {
        const spec = m[1] as string;
        if (spec !== 'xstate' && !spec.startsWith('./') && !spec.startsWith('../'))
          offenders.push(`${file}: ${spec}`);
        if (spec.startsWith('../') && file.split('/').length - 1 <= spec.split('../').length - 1)
          offenders.push(`${file}: ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});

const run = promisify(execFile);

/** What the transport needs at run time, and nothing else. */
const TRANSPORT_DEPENDENCIES = ['@opentelemetry/api', 'eventsource-parser', 'xstate'];
/** Needed only by the demo, the inspector, or the repository's own tools and tests. */
const NOT_FOR_THE_TRANSPORT = ['fast-check', 'ws', 'zod'];

/**
 * The package as a user installs it: the real build (tsconfig.build.json) in a directory of its own, whose
 * node_modules holds only the packages named, so a shipped import of anything else fails in Node's own
 * resolver, as it would in a user's project.
 */
describe('installing the package', () => {
  let build: string;
  const scratch: string[] = [];
  const repoModules = resolve('node_modules');

  beforeAll(async () => {
    build = await mkdtemp(join(tmpdir(), 'mcpc-build-'));
    scratch.push(build);
    const tsc = createRequire(import.meta.url).resolve('typescript/lib/tsc.js');
    // --preserveSymlinks: a node_modules that is itself a symlink (a worktree sharing another checkout's
    // install) would otherwise make declaration emit name paths outside the project.
    await run(process.execPath, [
      tsc,
      '-p',
      'tsconfig.build.json',
      '--outDir',
      join(build, 'dist'),
      '--preserveSymlinks',
    ]);
  }, 180_000);

  afterAll(async () => {
    for (const dir of scratch) await rm(dir, { recursive: true, force: true });
  });

  /** A package directory: package.json, README, docs and the build, with only `installed` in node_modules. */
  async function installed(names: readonly string[]): Promise<string> {
    const root = await mkdtemp(join(tmpdir(), 'mcpc-install-'));
    scratch.push(root);
    for (const file of ['package.json', 'README.md']) await cp(file, join(root, file));
    await cp('docs', join(root, 'docs'), { recursive: true });
    await cp(join(build, 'dist'), join(root, 'dist'), { recursive: true });
    for (const name of names) {
      await mkdir(dirname(join(root, 'node_modules', name)), { recursive: true });
      await symlink(await realpath(join(repoModules, name)), join(root, 'node_modules', name), 'dir');
    }
    return root;
  }

  /** `node <args>` in `cwd`: its exit code and output, failing or not. */
  async function node(
    cwd: string,
    args: string[],
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await run(process.execPath, args, { cwd, timeout: 30_000 });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code?: unknown; stdout?: string; stderr?: string };
      return {
        code: typeof e.code === 'number' ? e.code : -1,
        stdout: e.stdout ?? '',
        stderr: e.stderr ?? '',
      };
    }
  }

  it('depends on exactly what the transport needs; the rest are optional peers or development tools', async () => {
    const pkg = JSON.parse(await readFile('package.json', 'utf8'));
    expect(Object.keys(pkg.dependencies).sort()).toEqual(TRANSPORT_DEPENDENCIES);
    for (const name of ['ws', 'zod']) {
      expect(pkg.peerDependencies[name], name).toBeDefined();
      expect(pkg.peerDependenciesMeta[name], name).toEqual({ optional: true });
    }
    expect(pkg.peerDependencies['fast-check']).toBeUndefined();
    // The command line parses its arguments with node:util: no package of any kind for it.
    for (const field of ['dependencies', 'peerDependencies', 'peerDependenciesMeta', 'devDependencies'])
      expect(pkg[field].commander, field).toBeUndefined();
    for (const name of NOT_FOR_THE_TRANSPORT)
      expect(pkg.devDependencies[name], name).toMatch(/^\d+\.\d+\.\d+$/);
    // `npm run verify` runs the simulated world from the repository, not through the published command line.
    expect(pkg.scripts.verify).toMatch(/properties\//);
  });

  it('packs no properties/ code, and nothing packed imports fast-check', async () => {
    const root = await installed([]);
    // What an older build (which compiled properties/) left behind in dist/ is not packed either.
    await mkdir(join(root, 'dist', 'properties'), { recursive: true });
    await writeFile(join(root, 'dist', 'properties', 'verify-run.js'), "import fc from 'fast-check';\n");
    const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root });
    const files =
      (JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0]?.files.map((f) => f.path) ?? [];
    expect(files).toContain('dist/src/index.js');
    expect(files).toContain('dist/src/cli/main.js');
    expect(files.filter((f) => f.includes('properties/'))).toEqual([]);
    const fastCheck: string[] = [];
    for (const file of files.filter((f) => f.endsWith('.js'))) {
      if (/['"]fast-check['"]/.test(await readFile(join(root, file), 'utf8'))) fastCheck.push(file);
    }
    expect(fastCheck).toEqual([]);
  });

  it('every entry point imports with only the dependencies and the peers it needs installed', async () => {
    const pkg = JSON.parse(await readFile('package.json', 'utf8'));
    const entries = Object.entries(pkg.exports as Record<string, { import: string }>);
    expect(entries.length).toBeGreaterThanOrEqual(5);
    // The SDK is a required peer; redis and better-sqlite3 are the optional peers of their own entry points.
    const root = await installed([
      ...TRANSPORT_DEPENDENCIES,
      '@modelcontextprotocol/sdk',
      'redis',
      'better-sqlite3',
    ]);
    const imports = entries.map(([, target]) => `await import(${JSON.stringify(target.import)});`).join('\n');
    const ok = await node(root, ['--input-type=module', '-e', `${imports}\nconsole.log('imported');`]);
    expect(ok.stderr).toBe('');
    expect(ok.stdout.trim()).toBe('imported');
    // The same install really lacks the packages the transport must not need.
    for (const name of NOT_FOR_THE_TRANSPORT) {
      const missing = await node(root, ['--input-type=module', '-e', `await import('${name}');`]);
      expect(missing.stderr, name).toContain(`Cannot find package '${name}'`);
    }
  });

  it('the command line runs with the transport alone; the demo and the inspector name the peer they miss', async () => {
    const bin = join('dist', 'src', 'cli', 'main.js');
    const transportOnly = await installed([...TRANSPORT_DEPENDENCIES, '@modelcontextprotocol/sdk']);
    const help = await node(transportOnly, [bin, '--help']);
    expect(help.stderr).toBe('');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/demo[\s\S]*inspect/);
    expect(help.stdout).not.toContain('verify');
    const unknown = await node(transportOnly, [bin, 'frob']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command 'frob'[\s\S]*Usage: mcp-continuity/);
    // probe, explain and replay need nothing beyond the transport's own dependencies.
    const unreachable = await node(transportOnly, [
      bin,
      'probe',
      'http://127.0.0.1:9/mcp',
      '--timeout',
      '2000',
    ]);
    expect(unreachable.code, unreachable.stderr).toBe(3);
    const trace = join(transportOnly, 'trace.jsonl');
    await writeFile(trace, '{"k":"event","t":0,"a":"x:0","e":{"type":"app.send"}}\n');
    const explained = await node(transportOnly, [bin, 'explain', trace]);
    expect(explained.code, explained.stderr).toBe(0);
    expect(explained.stdout).toContain('the trace holds no machine actors');
    const replayed = await node(transportOnly, [bin, 'replay', trace]);
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain('0 machine actor(s)');
    const noWs = await node(transportOnly, [bin, 'inspect', '--port', '0']);
    expect(noWs.code).toBe(1);
    expect(noWs.stderr).toContain('needs the package "ws"');
    const noZod = await node(transportOnly, [bin, 'demo', '--no-inspect']);
    expect(noZod.code).toBe(1);
    expect(noZod.stderr).toContain('needs the package "zod"');

    // A feed must not throw into the machines it watches: without ws it warns once, naming the package.
    const feed = await node(transportOnly, [
      '--input-type=module',
      '-e',
      "const { createInspectorFeed } = await import('./dist/src/index.js');\n" +
        "const feed = createInspectorFeed({ url: 'ws://127.0.0.1:9/feed' });\n" +
        "await new Promise((r) => process.once('warning', (w) => { console.log(w.message); r(); }));\n" +
        'await feed.close();',
    ]);
    expect(feed.stdout).toContain('needs the package "ws"');
  });

  /**
   * What a user gets from `npm install mcp-continuity` in an empty project: the packed tarball, installed by
   * npm itself (the registry supplies the dependencies and the required peer, as for a user), and nothing
   * else. The command line answers --help; the demo runs what it can (parts 1 and 2, on the 2025 protocol,
   * with no inspector page) and names the one command that enables part 3 (MCP 2026-07-28).
   */
  it('installed from its tarball into an empty project, `npx mcp-continuity` answers --help and runs the demo', {
    timeout: 240_000,
  }, async () => {
    // The npm running this test may have set npm_config_* (its prefix among them): the user's npm has not.
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)));
    const packed = await mkdtemp(join(tmpdir(), 'mcpc-tgz-'));
    scratch.push(packed);
    const pack = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', packed], {
      cwd: await installed([]),
      env,
    });
    const tarball = join(packed, (JSON.parse(pack.stdout) as Array<{ filename: string }>)[0]?.filename ?? '');
    const project = await mkdtemp(join(tmpdir(), 'mcpc-project-'));
    scratch.push(project);
    await writeFile(join(project, 'package.json'), '{ "name": "project", "private": true }\n');
    await run('npm', ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline'], {
      cwd: project,
      env,
      timeout: 150_000,
    });
    const top = await readdir(join(project, 'node_modules'));
    expect(top).toContain('mcp-continuity');
    expect(top).toContain('xstate');
    for (const absent of ['commander', 'ws']) expect(top, absent).not.toContain(absent);
    const official = await readdir(join(project, 'node_modules', '@modelcontextprotocol'));
    expect(official).toEqual(['sdk']);

    // --no-install: the installed bin or a failure, never a same-named package fetched from the registry.
    const npx = (args: string[]) =>
      run('npx', ['--no-install', 'mcp-continuity', ...args], { cwd: project, env, timeout: 90_000 });
    const help = await npx(['--help']);
    expect(help.stdout).toMatch(/^Usage: mcp-continuity <command> \[options\]/);
    expect(help.stdout).toMatch(/demo[\s\S]*inspect/);
    const demo = await npx(['demo']);
    expect(demo.stdout).toMatch(/inspector: not served .*npm install ws/);
    expect(demo.stdout).toContain('result: charged card-4242');
    expect(demo.stdout).toMatch(/lost silently +0/);
    expect(demo.stdout).toContain(
      'to run it: npm install @modelcontextprotocol/server@2.4.0 @modelcontextprotocol/client@2.4.0',
    );
    expect(demo.stdout).toContain('All guarantees of parts 1 and 2 held');
  });
});
