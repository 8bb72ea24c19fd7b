import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { SimEventLog } from '../../properties/world/sim-event-log.js';
import type { EventLog } from '../../src/server/event-log.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { RedisEventLog } from '../../src/server/redis-event-log.js';
import { SqliteEventLog } from '../../src/server/sqlite-event-log.js';
import { type EventLogContractOptions, eventLogContract, registerContract } from '../../src/testing/index.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

/** The event log contract (src/testing/contracts/event-log.ts) on every event log of the runtime. */

registerContract(
  { describe, it },
  'EventLog contract: memory',
  eventLogContract({ create: (o) => new MemoryEventLog(o) }),
);

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
const paths = new WeakMap<SqliteEventLog, string>();
const sqlite = (path: string, o: EventLogContractOptions) => {
  const log = new SqliteEventLog({ path, ...o });
  paths.set(log, path);
  return log;
};

registerContract(
  { describe, it },
  'EventLog contract: SQLite',
  eventLogContract({
    async create(o) {
      const dir = await mkdtemp(join(tmpdir(), 'mcpc-log-contract-'));
      dirs.push(dir);
      return sqlite(join(dir, 'log.db'), o);
    },
    reopen: (previous, o) => sqlite(paths.get(previous) as string, o),
  }),
);

// A real redis-server of our own, on an ephemeral port (fails, never skips, when it is missing).
let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.dispose();
});
let prefixes = 0;
const prefixOf = new WeakMap<RedisEventLog, string>();
const onRedis = (keyPrefix: string, o: EventLogContractOptions) => {
  const log = new RedisEventLog({ url: redis.url, keyPrefix, ...o });
  prefixOf.set(log, keyPrefix);
  return log;
};

registerContract(
  { describe, it },
  'EventLog contract: Redis',
  eventLogContract({
    create: (o) => onRedis(`log-contract-${process.pid}-${++prefixes}:`, o),
    peer: (log, o) => onRedis(prefixOf.get(log) as string, o),
    reopen: (previous, o) => onRedis(prefixOf.get(previous) as string, o),
  }),
);

/**
 * The worlds' simulated event log (properties/world/sim-event-log.ts). The 2026 world keeps it beside its
 * durable memo across instance restarts, so `peer` and `reopen` are views of the same data.
 */
const simOf = new WeakMap<EventLog, SimEventLog>();
function simView(sim: SimEventLog): EventLog {
  const view: EventLog = {
    durable: true,
    policy: sim.policy,
    openStream: async (s, n) => sim.openStream(s, n),
    append: async (s, n, m) => sim.append(s, n, m),
    appendFinal: async (s, n, m) => sim.appendFinal(s, n, m),
    read: async (s, n, after) => sim.read(s, n, after),
    window: async (s, n) => sim.window(s, n),
    dropSession: async (s) => sim.dropSession(s),
    close: async () => undefined,
  };
  simOf.set(view, sim);
  return view;
}

registerContract(
  { describe, it },
  'EventLog contract: simulated (the worlds)',
  eventLogContract({
    create: ({ now, ...policy }) => simView(new SimEventLog(policy, now)),
    peer: (view) => simView(simOf.get(view) as SimEventLog),
    reopen: (view) => simView(simOf.get(view) as SimEventLog),
  }),
);
