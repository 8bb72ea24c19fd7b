import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { anchors, links, namedPaths, prose, read, tsBlocks, userDocs } from '../scripts/docs-index.js';
import { renderLayout } from '../scripts/layout.js';

/**
 * The docs name only what exists: every link (and its anchor), every repository path, every export a
 * code block imports, every option an options table lists. The README's code blocks compile against
 * the sources as a user's would against the package.
 */

const root = join(dirname(new URL(import.meta.url).pathname), '..');
const docs = userDocs(root);
const text = new Map(docs.map((f) => [f, read(root, f)]));

/** The package's entry points, as package.json `exports` names them, by their sources. */
const ENTRIES: Record<string, string> = {
  'mcp-continuity': 'src/index.ts',
  'mcp-continuity/machines': 'machines/index.ts',
  'mcp-continuity/testing': 'src/testing/index.ts',
  'mcp-continuity/sqlite': 'src/sqlite.ts',
  'mcp-continuity/redis': 'src/redis.ts',
};

/** Options tables (`| \`name\` option | default | meaning |`): the interface each lists. */
const OPTION_TABLES: Record<string, { readonly file: string; readonly type: string }> = {
  createContinuityServer: { file: 'src/server/handler.ts', type: 'ContinuityServerOptions' },
  ContinuityClientTransport: { file: 'src/client/transport.ts', type: 'ContinuityClientOptions' },
  continuityFetch: { file: 'src/client/modern/continuity-fetch.ts', type: 'ContinuityFetchOptions' },
};

/** A path that may hold a `*`: some file of its folder matches. */
function pathExists(path: string): boolean {
  if (!path.includes('*')) return existsSync(join(root, path));
  const dir = posix.dirname(path);
  const pattern = new RegExp(
    `^${posix
      .basename(path)
      .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')}$`,
  );
  return existsSync(join(root, dir)) && readdirSync(join(root, dir)).some((f) => pattern.test(f));
}

/** One program over the entry points, the option files and the README's code blocks (virtual files). */
function program(blocks: ReadonlyMap<string, string>): ts.Program {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
    baseUrl: root,
    paths: Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, [`./${file}`]])),
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, ...rest) => {
    const virtual = blocks.get(name);
    return virtual !== undefined
      ? ts.createSourceFile(name, virtual, version)
      : getSourceFile(name, version, ...rest);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => blocks.has(name) || fileExists(name);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => blocks.get(name) ?? readFile(name);
  const roots = [
    ...Object.values(ENTRIES).map((f) => join(root, f)),
    ...Object.values(OPTION_TABLES).map((o) => join(root, o.file)),
    ...blocks.keys(),
  ];
  return ts.createProgram(roots, options, host);
}

const readmeBlocks = new Map(
  tsBlocks(text.get('README.md') as string).map((code, i) => [join(root, `docs-readme-block-${i}.ts`), code]),
);
const checked = program(readmeBlocks);
const checker = checked.getTypeChecker();

function exportsOf(entry: string): Set<string> {
  const file = checked.getSourceFile(join(root, ENTRIES[entry] as string));
  const symbol = file && checker.getSymbolAtLocation(file);
  return new Set(symbol ? checker.getExportsOfModule(symbol).map((s) => s.name) : []);
}

function propertiesOf(file: string, type: string): Set<string> {
  const source = checked.getSourceFile(join(root, file));
  const symbol = source && checker.getSymbolAtLocation(source);
  const found = symbol && checker.getExportsOfModule(symbol).find((s) => s.name === type);
  if (!found) return new Set();
  return new Set(
    checker
      .getDeclaredTypeOfSymbol(found)
      .getProperties()
      .map((p) => p.name),
  );
}

describe('the docs name only what exists', () => {
  it('the README front page fits on a page (about 300 lines)', () => {
    expect((text.get('README.md') as string).split('\n').length).toBeLessThanOrEqual(320);
  });

  it.each(docs)('%s: every link reaches a file, and its anchor a heading there', (file) => {
    const broken: string[] = [];
    for (const target of links(text.get(file) as string)) {
      const [path, hash] = target.split('#');
      const resolved = path ? posix.normalize(posix.join(posix.dirname(file), path)) : file;
      if (!existsSync(join(root, resolved))) broken.push(`${target} (no ${resolved})`);
      else if (hash && resolved.endsWith('.md') && !anchors(read(root, resolved)).has(hash))
        broken.push(`${target} (no heading #${hash} in ${resolved})`);
    }
    expect(broken).toEqual([]);
  });

  it.each(docs)('%s: every repository path it names exists', (file) => {
    const missing = namedPaths(text.get(file) as string).filter((p) => !pathExists(p));
    expect(missing).toEqual([]);
  });

  it.each(docs)('%s: every name its code imports from the package is exported there', (file) => {
    const missing: string[] = [];
    for (const block of tsBlocks(text.get(file) as string))
      for (const m of block.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'(mcp-continuity[^']*)'/g)) {
        const entry = m[2] as string;
        expect(Object.keys(ENTRIES)).toContain(entry);
        const exported = exportsOf(entry);
        for (const raw of (m[1] as string).split(',')) {
          const name = raw
            .replace(/^\s*type\s+/, '')
            .split(/\s+as\s+/)[0]
            ?.trim();
          if (name && !exported.has(name)) missing.push(`${name} from ${entry}`);
        }
      }
    expect(missing).toEqual([]);
  });

  it.each(docs)('%s: every option its options tables list is an option of that API', (file) => {
    const unknown: string[] = [];
    const body = prose(text.get(file) as string);
    for (const table of body.matchAll(/^\| `(\w+)` option \|[^\n]*\n\|[-| ]+\|\n((?:\|[^\n]*\n)+)/gm)) {
      const api = OPTION_TABLES[table[1] as string];
      expect(api, `an options table for ${table[1]}`).toBeDefined();
      const known = propertiesOf(api?.file as string, api?.type as string);
      expect(known.size).toBeGreaterThan(0);
      for (const row of (table[2] as string).split('\n').filter(Boolean)) {
        const first = row.split('|')[1] ?? '';
        for (const m of first.matchAll(/`(\w+)/g))
          if (!known.has(m[1] as string)) unknown.push(`${table[1]}: ${m[1]}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it("the README's code blocks compile against the sources", () => {
    expect(readmeBlocks.size).toBeGreaterThanOrEqual(3);
    const errors = [...readmeBlocks.keys()].flatMap((name) =>
      ts
        .getPreEmitDiagnostics(checked, checked.getSourceFile(name))
        .map((d) => `${name}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`),
    );
    expect(errors).toEqual([]);
  });
});

describe('docs/layout.md', () => {
  it('lists every file of machines/ and src/ as it is now (npm run docs)', () => {
    expect(read(root, 'docs/layout.md'), 'docs/layout.md is stale: run npm run docs').toBe(
      renderLayout(root),
    );
  });
});
