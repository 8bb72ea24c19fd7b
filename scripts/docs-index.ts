import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The user docs read as data: which files there are, their headings' anchors (GitHub's slugs), their
 * links and the repository paths they name. `test/docs-check.test.ts` holds every name to the tree.
 */

/** The user docs: the README's front page and the pages of `docs/` (the generated diagrams aside). */
export function userDocs(root: string): string[] {
  const pages = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  return ['README.md', ...pages.sort()];
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The text outside fenced code blocks (headings and links inside code are not headings or links). */
export function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '');
}

/** The anchors of a page's headings (a repeated heading gets `-1`, `-2`… as on GitHub). */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(text).matchAll(/^#{1,6}\s+(.+)$/gm)) {
    const base = slug(m[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Markdown links of a page, as written: `[text](target)`; external ones (a scheme) left out. */
export function links(text: string): string[] {
  return [...prose(text).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] as string)
    .filter((t) => !/^[a-z]+:/i.test(t));
}

/** The top folders whose paths the docs name in backticks (`machines/decide.ts`). */
const TREE = /^(?:machines|src|properties|test|bench|scripts|docs|\.ci)\//;

/** Repository paths a page names in backticks, without a `:line` or `#anchor` suffix. */
export function namedPaths(text: string): string[] {
  const out: string[] = [];
  for (const m of prose(text).matchAll(/`([^`\s]+)`/g)) {
    const path = (m[1] as string).replace(/[#:].*$/, '').replace(/[.,;]$/, '');
    // A placeholder (`docs/machines/<name>.md`) names no file; `docs/gen-ai/` is OpenTelemetry's repository.
    if (TREE.test(path) && !path.includes('<') && !path.startsWith('docs/gen-ai/')) out.push(path);
  }
  return out;
}

/** The page's `ts` code blocks. */
export function tsBlocks(text: string): string[] {
  return [...text.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m) => m[1] as string);
}

/** Reads a page. */
export function read(root: string, file: string): string {
  return readFileSync(join(root, file), 'utf8');
}
