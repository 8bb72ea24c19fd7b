/**
 * What an idle 2025 session of ours is made of (issue 25, row 4). The server runs in a child process (this
 * file, `serve` mode), so the client's objects are not counted; the parent opens `n` idle sessions the way
 * bench/rows/memory.ts does (raw initialize + notifications/initialized, 20 at a time), waits past two
 * sweeps so they sleep, has the server drop their logged events, and prints the server's heap per
 * session. `--no-mcp`: each session's server answers initialize and nothing else (one small object), so
 * what remains is the transport's own. `--snapshot`: also the heap-snapshot objects per session, by
 * type and constructor. `--warm=N`: N sessions (default 20) opened and asleep before the first reading, so
 * that code V8 compiles or optimizes while the n sessions open (hundreds of bytes per session at n=1000,
 * none of it per session) falls before it.
 *
 *   npx tsx bench/memory-2025-idle.ts [n=1000] [--no-mcp] [--snapshot] [--warm=N]
 */
import { fork } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { writeHeapSnapshot } from 'node:v8';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { MemoryEventLog } from '../src/index.js';
import { PROTOCOL_VERSION, RawSession } from './lib/raw.js';
import { startOurs } from './lib/stacks.js';
import { pool, settledHeap } from './lib/stats.js';
import { benchMcpServer } from './lib/tools.js';

type Census = Record<string, { count: number; size: number }>;

/** Answers initialize and nothing else: one closure per session, so what remains is ours. */
const initializeOnly = () => ({
  async connect(t: Transport) {
    t.onmessage = (m) => {
      if (!('method' in m) || m.method !== 'initialize' || !('id' in m)) return;
      const result = {
        protocolVersion: PROTOCOL_VERSION,
        capabilities: {},
        serverInfo: { name: 'x', version: '1' },
      };
      setImmediate(() => void t.send({ jsonrpc: '2.0', id: m.id, result }, { relatedRequestId: m.id }));
    };
  },
  async close() {},
});

/** Counts and self sizes of heap-snapshot nodes by type and name. */
function census(): Census {
  const file = writeHeapSnapshot('/tmp/memory-2025-idle.heapsnapshot');
  // KEEP_SNAPSHOT: left in place, for a retainer search.
  if (process.env.KEEP_SNAPSHOT) return {};
  const snap = JSON.parse(readFileSync(file, 'utf8'));
  rmSync(file);
  const f = snap.snapshot.meta.node_fields as string[];
  const types = snap.snapshot.meta.node_types[0] as string[];
  const [ti, ni, si] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size')];
  const out: Census = {};
  const nodes = snap.nodes as number[];
  const at = (i: number) => nodes[i] as number;
  for (let i = 0; i < nodes.length; i += f.length) {
    const name = String(snap.strings[at(i + ni)])
      .slice(0, 50)
      .replace(/\n/g, ' ');
    const key = `${types[at(i + ti)]}:${name}`;
    const e = out[key] ?? { count: 0, size: 0 };
    e.count++;
    e.size += at(i + si);
    out[key] = e;
  }
  return out;
}

async function serve(noMcp: boolean, snapshot: boolean) {
  const log = new MemoryEventLog();
  const ids: string[] = [];
  const server = await startOurs({
    eventLog: log,
    createMcpServer: (s) => {
      ids.push(s.id);
      return noMcp ? initializeOnly() : benchMcpServer();
    },
  });
  process.on('message', async (m: string) => {
    for (const id of ids) await log.dropSession(id);
    if (m === 'exit') process.exit(0);
    const heapUsed = await settledHeap();
    process.send?.({
      heapUsed,
      sessions: server.continuity.sessionCount(),
      sleeping: server.continuity.sleepingSessionCount(),
      census: snapshot ? census() : undefined,
    });
  });
  process.send?.({ url: server.url });
}

type Reading = { heapUsed: number; sessions: number; sleeping: number; census?: Census };

async function drive(n: number, flags: string[]) {
  const child = fork(fileURLToPath(import.meta.url), ['serve', ...flags], {
    execArgv: ['--expose-gc', '--import', 'tsx'],
  });
  const next = () => new Promise<Record<string, unknown>>((r) => child.once('message', r));
  const { url } = (await next()) as { url: string };
  const read = async () => {
    const answer = next();
    child.send('read');
    return (await answer) as Reading;
  };
  const settle = () => new Promise((r) => setTimeout(r, Number(process.env.SETTLE_MS ?? 2_500)));
  const warm = Number(flags.find((f) => f.startsWith('--warm='))?.slice('--warm='.length) ?? 20);
  await pool(warm, 10, () => new RawSession(url).initialize());
  await settle();
  const before = await read();
  await pool(n, 20, () => new RawSession(url).initialize());
  await settle();
  const after = await read();
  child.send('exit');
  console.log(
    JSON.stringify({
      sessions: after.sessions - before.sessions,
      sleeping: after.sleeping - before.sleeping,
      bytesPerSession: Math.round((after.heapUsed - before.heapUsed) / n),
    }),
  );
  if (!before.census || !after.census) return;
  const rows = Object.entries(after.census)
    .map(([k, v]) => {
      const b = before.census?.[k] ?? { count: 0, size: 0 };
      return { k, count: (v.count - b.count) / n, size: (v.size - b.size) / n };
    })
    .filter((r) => Math.abs(r.size) >= 4)
    .sort((a, b) => b.size - a.size);
  for (const r of rows.slice(0, 50)) {
    console.log(`${r.size.toFixed(0).padStart(6)} B ${r.count.toFixed(2).padStart(6)}×  ${r.k}`);
  }
}

const args = process.argv.slice(2);
const flags = args.filter((a) => a.startsWith('--'));
if (args[0] === 'serve') await serve(flags.includes('--no-mcp'), flags.includes('--snapshot'));
else await drive(Number(args.find((a) => /^\d+$/.test(a)) ?? 1_000), flags);
