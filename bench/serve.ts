/**
 * One benchmark server in its own process (started by `lib/remote.ts` with `fork`, so it has an IPC
 * channel). Clients run in another process: on 2 cores client and server work in parallel, and each side
 * can be profiled on its own (`BENCH_PROF_DIR=/tmp/prof npm run bench` adds `--cpu-prof` to these).
 *
 * argv: <kind> [json options]. Kinds: ours | sdk | sdk-store | raw | v2 (the official v2 server, 2026-07-28). Options: { maxEventsPerStream, mcp: 'bench' | 'bare' }.
 * IPC requests (each answered with the same `seq`): heap (gc'd heapUsed), drop-logs (ours: forget every
 * session's events), stats, exit.
 */
import { type EventLog, MemoryEventLog } from '../src/index.js';
import type { MemoStore } from '../src/server/memo-store.js';
import { MemoryMemoStore } from '../src/server/memory-memo-store.js';
import { startModernOfficial, startModernOurs } from './lib/modern.js';
import { startRawSse } from './lib/raw.js';
import { type RunningServer, type ServerKind, startOurs, startSdk } from './lib/stacks.js';
import { settledHeap } from './lib/stats.js';
import { bareMcpServer, benchMcpServer } from './lib/tools.js';

export interface ServeOptions {
  readonly maxEventsPerStream?: number;
  readonly mcp?: 'bench' | 'bare';
  /**
   * Where `ours` and `ours-2026` keep their event log (and memo): memory (default), a SQLite file
   * (`sqlitePath`), or Redis (`redisUrl`, `keyPrefix`: several instances given the same ones share it).
   */
  readonly store?: StoreKind;
  readonly sqlitePath?: string;
  readonly redisUrl?: string;
  readonly keyPrefix?: string;
}

export type StoreKind = 'memory' | 'sqlite' | 'redis';

const MEMO_WINDOW_MS = 10 * 60_000;

/** The event log and memo store `options` name. SQLite and Redis are imported only when asked for. */
async function stores(options: ServeOptions): Promise<{ log: EventLog; memo: MemoStore }> {
  const maxEventsPerStream = options.maxEventsPerStream;
  const bound = maxEventsPerStream === undefined ? {} : { maxEventsPerStream };
  if (options.store === 'sqlite') {
    const { SqliteEventLog, SqliteMemoStore } = await import('../src/sqlite.js');
    const path = options.sqlitePath as string;
    return {
      log: new SqliteEventLog({ path, ...bound }),
      memo: new SqliteMemoStore({ path, memoWindowMs: MEMO_WINDOW_MS }),
    };
  }
  if (options.store === 'redis') {
    const { RedisEventLog, RedisMemoStore } = await import('../src/redis.js');
    const url = options.redisUrl as string;
    const keyPrefix = options.keyPrefix;
    return {
      log: new RedisEventLog({ url, keyPrefix, ...bound }),
      memo: new RedisMemoStore({ url, keyPrefix, memoWindowMs: MEMO_WINDOW_MS }),
    };
  }
  return { log: new MemoryEventLog(bound), memo: new MemoryMemoStore({ memoWindowMs: MEMO_WINDOW_MS }) };
}

export type ServeRequest = { seq: number; type: 'heap' | 'drop-logs' | 'stats' | 'exit' };

const [kind, json] = process.argv.slice(2) as [ServerKind | 'raw' | 'v2' | 'ours-2026', string | undefined];
const options = JSON.parse(json ?? '{}') as ServeOptions;
const createMcp = options.mcp === 'bare' ? bareMcpServer : benchMcpServer;
const send = (m: unknown) => process.send?.(m);

let server: Pick<RunningServer, 'url' | 'close'> & Partial<Pick<RunningServer, 'sessionCount' | 'errors'>>;
let log: EventLog | undefined;
let memo: MemoStore | undefined;
const sessionIds: string[] = [];
if (kind === 'raw') server = await startRawSse();
else if (kind === 'v2') server = await startModernOfficial();
else if (kind === 'ours-2026') {
  const kept = await stores(options);
  log = kept.log;
  memo = kept.memo;
  // Rows 2, 4 and 6 make more keyed calls from one address than the default bound of remembered keys allows.
  server = await startModernOurs({ ...kept, maxKeys: 1_000_000 });
} else if (kind === 'ours') {
  log = (await stores(options)).log;
  server = await startOurs({
    eventLog: log,
    createMcpServer: (session) => {
      sessionIds.push(session.id);
      return createMcp();
    },
  });
} else server = await startSdk(kind === 'sdk-store', createMcp);

process.on('message', async (m: ServeRequest) => {
  switch (m.type) {
    case 'heap':
      send({ seq: m.seq, heapUsed: await settledHeap(), sessions: server.sessionCount?.() ?? 0 });
      break;
    case 'drop-logs':
      for (const id of sessionIds) await log?.dropSession(id);
      send({ seq: m.seq, dropped: sessionIds.length });
      break;
    case 'stats':
      send({
        seq: m.seq,
        log: log instanceof MemoryEventLog ? log.stats() : undefined,
        memo: memo instanceof MemoryMemoStore ? memo.stats() : undefined,
        errors: server.errors ?? [],
        sessions: server.sessionCount?.() ?? 0,
      });
      break;
    case 'exit':
      await server.close();
      send({ seq: m.seq });
      // Leave time for the answer to cross the channel; exit() writes a --cpu-prof profile.
      setTimeout(() => process.exit(0), 50);
      break;
  }
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready', url: server.url, pid: process.pid });
