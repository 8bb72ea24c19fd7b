/**
 * One benchmark server in its own process (started by `lib/remote.ts` with `fork`, so it has an IPC
 * channel). Clients run in another process: on 2 cores client and server work in parallel, and each side
 * can be profiled on its own (`BENCH_PROF_DIR=/tmp/prof npm run bench` adds `--cpu-prof` to these).
 *
 * argv: <kind> [json options]. Kinds: ours | sdk | sdk-store | raw | v2 (the official v2 server, 2026-07-28). Options: { maxEventsPerStream, mcp: 'bench' | 'bare' }.
 * IPC requests (each answered with the same `seq`): heap (gc'd heapUsed), drop-logs (ours: forget every
 * session's events), stats, exit.
 */
import { MemoryEventLog } from '../src/index.js';
import { startModernOfficial, startModernOurs } from './lib/modern.js';
import { startRawSse } from './lib/raw.js';
import { type RunningServer, type ServerKind, startOurs, startSdk } from './lib/stacks.js';
import { settledHeap } from './lib/stats.js';
import { bareMcpServer, benchMcpServer } from './lib/tools.js';

export interface ServeOptions {
  readonly maxEventsPerStream?: number;
  readonly mcp?: 'bench' | 'bare';
}

export type ServeRequest = { seq: number; type: 'heap' | 'drop-logs' | 'stats' | 'exit' };

const [kind, json] = process.argv.slice(2) as [ServerKind | 'raw' | 'v2' | 'ours-2026', string | undefined];
const options = JSON.parse(json ?? '{}') as ServeOptions;
const createMcp = options.mcp === 'bare' ? bareMcpServer : benchMcpServer;
const send = (m: unknown) => process.send?.(m);

let server: Pick<RunningServer, 'url' | 'close'> & Partial<Pick<RunningServer, 'sessionCount' | 'errors'>>;
let log: MemoryEventLog | undefined;
const sessionIds: string[] = [];
if (kind === 'raw') server = await startRawSse();
else if (kind === 'v2') server = await startModernOfficial();
else if (kind === 'ours-2026') server = await startModernOurs();
else if (kind === 'ours') {
  log = new MemoryEventLog(
    options.maxEventsPerStream === undefined ? {} : { maxEventsPerStream: options.maxEventsPerStream },
  );
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
        log: log?.stats(),
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
