/**
 * An in-process harness for profiling 2025 tool calls in a fresh process (issue 25, row 2):
 * `calls` echo calls, 50 in flight, one session, from an SDK `Client` over one stack's client transport
 * to the same stack's server, both in this process. Prints calls/s per 500 completions and in all.
 *
 *   npx tsx bench/profile-2025.ts [ours|sdk] [calls=2000]
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/profile-2025.ts ours 2000
 *   npx tsx bench/profile-summary.ts /tmp/prof/CPU.….cpuprofile 30
 */
import { connectClient, startOurs, startSdk } from './lib/stacks.js';

const kind = process.argv[2] === 'sdk' ? 'sdk' : 'ours';
const calls = Number(process.argv[3] ?? 2_000);
const inFlight = 50;

const server = kind === 'ours' ? await startOurs() : await startSdk(false);
const { client, close } = await connectClient(kind, server.url);
const start = performance.now();
const marks: number[] = [];
let issued = 0;
let done = 0;
let last = start;
const worker = async () => {
  while (issued < calls) {
    issued++;
    await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    done++;
    if (done % 500 === 0) {
      const now = performance.now();
      marks.push(Math.round(500_000 / (now - last)));
      last = now;
    }
  }
};
await Promise.all(Array.from({ length: inFlight }, worker));
const ms = performance.now() - start;
console.log(
  JSON.stringify({
    kind,
    calls,
    ms: Math.round(ms),
    perSecond: Math.round((calls * 1000) / ms),
    per500: marks,
  }),
);
await close();
await server.close();
if (server.errors.length > 0) console.error(server.errors.slice(0, 5));
process.exit(0);
