/**
 * Summarizes a V8 `.cpuprofile` (from `node --cpu-prof`): the functions with the most self time, and the
 * total (inclusive) time spent under functions of each source file, so a slow path can be named precisely.
 *
 *   npx tsx bench/profile-summary.ts /tmp/prof/CPU.…cpuprofile [top=25] [filter] [--callers=<function>]
 *
 * `filter` keeps only frames whose url contains it in the inclusive table (e.g. `src/`). `--callers=name`
 * also prints the call chains under which `name` spent its self time (e.g. `--callers=resolveStop`).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const args = process.argv.slice(2);
const callersOf = args.find((a) => a.startsWith('--callers='))?.slice('--callers='.length);
const [file, topArg, filter] = args.filter((a) => !a.startsWith('--'));
if (!file) {
  console.error('usage: tsx bench/profile-summary.ts <file.cpuprofile> [top] [url filter]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
// Piped into `head`: stop quietly when the reader goes away.
process.stdout.on('error', () => process.exit(0));
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const selfUs = new Map<number, number>();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i] as number;
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
const totalUs = profile.endTime - profile.startTime;

const shortUrl = (url: string) =>
  url
    .replace(/^file:\/\//, '')
    .replace(/.*\/node_modules\//, 'nm:')
    .replace(/^\/work\/(main|wt\/[^/]+)\//, '');
const label = (n: ProfileNode) =>
  `${n.callFrame.functionName || '(anonymous)'} ${shortUrl(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;

// Self time by function (merged across call sites).
const selfByFn = new Map<string, number>();
for (const [id, us] of selfUs) {
  const n = byId.get(id) as ProfileNode;
  const key = n.callFrame.url === '' ? n.callFrame.functionName || '(native)' : label(n);
  selfByFn.set(key, (selfByFn.get(key) ?? 0) + us);
}
const pct = (us: number) => `${((100 * us) / totalUs).toFixed(1)}%`.padStart(6);
console.log(`profile ${file}: ${(totalUs / 1e6).toFixed(2)} s, ${profile.samples.length} samples`);
console.log(`\n-- self time, top ${top}`);
for (const [k, us] of [...selfByFn].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`${pct(us)} ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`);
}

// Inclusive time by file: a sample counts once for every distinct file on its stack.
const inclByFile = new Map<string, number>();
const inclByFn = new Map<string, number>();
for (const [id, us] of selfUs) {
  const files = new Set<string>();
  const fns = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const n = byId.get(cur) as ProfileNode;
    if (n.callFrame.url === '') continue;
    files.add(shortUrl(n.callFrame.url));
    fns.add(label(n));
  }
  for (const f of files) inclByFile.set(f, (inclByFile.get(f) ?? 0) + us);
  for (const f of fns) inclByFn.set(f, (inclByFn.get(f) ?? 0) + us);
}
console.log(`\n-- inclusive time by file${filter ? ` (url contains "${filter}")` : ''}, top ${top}`);
for (const [k, us] of [...inclByFile]
  .filter(([k]) => !filter || k.includes(filter))
  .sort((a, b) => b[1] - a[1])
  .slice(0, top)) {
  console.log(`${pct(us)} ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`);
}
console.log(`\n-- inclusive time by function${filter ? ` (url contains "${filter}")` : ''}, top ${top}`);
for (const [k, us] of [...inclByFn]
  .filter(([k]) => !filter || k.includes(filter))
  .sort((a, b) => b[1] - a[1])
  .slice(0, top)) {
  console.log(`${pct(us)} ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`);
}

if (callersOf) {
  const chains = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const n = byId.get(id) as ProfileNode;
    if (n.callFrame.functionName !== callersOf) continue;
    const chain: string[] = [];
    for (let cur = parent.get(id); cur !== undefined && chain.length < 12; cur = parent.get(cur)) {
      const c = byId.get(cur) as ProfileNode;
      chain.push(`${c.callFrame.functionName || '(anonymous)'} ${shortUrl(c.callFrame.url)}`);
    }
    const key = chain.join(' ← ');
    chains.set(key, (chains.get(key) ?? 0) + us);
  }
  console.log(`\n-- where ${callersOf} spent its self time`);
  for (const [k, us] of [...chains].sort((a, b) => b[1] - a[1]).slice(0, 5)) {
    console.log(`${pct(us)} ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`);
  }
}
