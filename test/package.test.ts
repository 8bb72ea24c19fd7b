import { readdir, readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * What the published package imports at run time must be installed with it: every bare import in the
 * shipped sources (machines/, src/, properties/ minus tests) is a dependency or a peer dependency.
 * A devDependency used by shipped code works here and breaks in a user's project.
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
    for (const root of ['machines', 'src', 'properties']) {
      for (const file of await sources(root)) {
        const text = await readFile(file, 'utf8');
        for (const m of text.matchAll(/from '([^'.][^']*)'/g)) {
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
