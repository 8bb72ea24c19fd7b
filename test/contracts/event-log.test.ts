import { describe, it } from 'vitest';
import { SimEventLog } from '../../properties/world/sim-event-log.js';
import type { EventLog } from '../../src/server/event-log.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { RedisEventLog } from '../../src/server/redis-event-log.js';
import { SqliteEventLog } from '../../src/server/sqlite-event-log.js';
import { type EventLogContractOptions, eventLogContract, registerContract } from '../../src/testing/index.js';
import { redisStores, sqliteStores } from './store-backends.js';

/** The event log contract (src/testing/contracts/event-log.ts) on every event log of the runtime. */

registerContract(
  { describe, it },
  'EventLog contract: memory',
  eventLogContract({ create: (o) => new MemoryEventLog(o) }),
);

registerContract(
  { describe, it },
  'EventLog contract: SQLite',
  eventLogContract(
    sqliteStores('log', (path, o: EventLogContractOptions) => new SqliteEventLog({ path, ...o })),
  ),
);

registerContract(
  { describe, it },
  'EventLog contract: Redis',
  eventLogContract(
    redisStores(
      'log',
      (url, keyPrefix, o: EventLogContractOptions) => new RedisEventLog({ url, keyPrefix, ...o }),
    ),
  ),
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
