/**
 * An in-process harness for profiling 2025 tool calls in a fresh process (issue 25, row 2):
 * `calls` echo calls, 50 in flight, one session, from an SDK `Client` over one stack's client transport
 * to one stack's server, both in this process. Prints calls/s and CPU time per call (user + system, both
 * ends together) per 500 completions and in all. CPU time, unlike calls/s, holds on a machine shared with
 * other work: compare the stacks by it.
 *
 *   npx tsx bench/profile-2025.ts [ours|sdk] [calls=2000] [server=ours|sdk] [remote]
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/profile-2025.ts ours 2000
 *   npx tsx bench/profile-summary.ts /tmp/prof/CPU.….cpuprofile 30
 *
 * The third argument pairs one stack's client with the other's server, to see which end a cost is on.
 * `remote` runs the server in its own process (bench/serve.ts): the CPU time is then the client's, and
 * the server's is read from /proc (Linux) and printed beside it.
 */
import { readFileSync } from 'node:fs';
import { startRemote } from './lib/remote.js';
import { connectClient, startOurs, startSdk } from './lib/stacks.js';

const kind = process.argv[2] === 'sdk' ? 'sdk' : 'ours';
const calls = Number(process.argv[3] ?? 2_000);
const serverKind = process.argv[4] === 'sdk' || process.argv[4] === 'ours' ? process.argv[4] : kind;
const inFlight = 50;
const every = 500;

const remote = process.argv[5] === 'remote';
const server = remote
  ? await startRemote(serverKind)
  : serverKind === 'ours'
    ? await startOurs()
    : await startSdk(false);
/** The server process's CPU time in µs (user + system), from /proc; 0 when in this process. */
const serverCpu = (): number => {
  if (!('pid' in server)) return 0;
  const fields = readFileSync(`/proc/${server.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
};
const { client, close } = await connectClient(kind, server.url);
const start = performance.now();
const cpuStart = process.cpuUsage();
const serverCpuStart = serverCpu();
const marks: number[] = [];
const cpuMarks: number[] = [];
let issued = 0;
let done = 0;
let last = start;
let lastCpu = cpuStart;
const cpuSince = (from: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(from);
  return d.user + d.system;
};
const worker = async () => {
  while (issued < calls) {
    issued++;
    await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    done++;
    if (done % every === 0) {
      const now = performance.now();
      marks.push(Math.round((every * 1000) / (now - last)));
      cpuMarks.push(Math.round(cpuSince(lastCpu) / every));
      last = now;
      lastCpu = process.cpuUsage();
    }
  }
};
await Promise.all(Array.from({ length: inFlight }, worker));
const ms = performance.now() - start;
console.log(
  JSON.stringify({
    client: kind,
    server: serverKind,
    calls,
    ms: Math.round(ms),
    perSecond: Math.round((calls * 1000) / ms),
    cpuMicrosPerCall: Math.round(cpuSince(cpuStart) / calls),
    ...(remote ? { serverCpuMicrosPerCall: Math.round((serverCpu() - serverCpuStart) / calls) } : {}),
    [`per${every}`]: marks,
    [`cpuMicrosPerCallPer${every}`]: cpuMarks,
  }),
);
await close();
await server.close();
if ('errors' in server && server.errors.length > 0) console.error(server.errors.slice(0, 5));
process.exit(0);
