import type { KeyedStoreCall } from '../../machines/server/keyed-core-io.js';
import { executeStoreCall as execute } from '../../src/server/keyed/store-calls.js';
import type { SimEventLog } from '../world/sim-event-log.js';
import type { SimMemoStore } from './sim-memo.js';

/**
 * The simulated ports of the keyed core (machines/server/keyed-core.ts): its store calls, through the
 * runtime's own dispatch (src/server/keyed/store-calls.ts), on the simulated memo and key logs,
 * synchronously. Leases are the model's: an instance holds one while it is up.
 */
export interface SimKeyedStores {
  readonly memo: SimMemoStore;
  readonly logs: SimEventLog;
  /** The instances holding a lease now. */
  readonly leased: () => ReadonlySet<string>;
}

export function executeStoreCall(stores: SimKeyedStores, call: KeyedStoreCall): unknown {
  const { memo, logs } = stores;
  return execute(
    {
      memo: {
        get: (k) => memo.get(k),
        create: (e, max) => memo.create(e, max),
        replace: (next, expected) => memo.replace(next, expected),
        running: () => memo.running(),
        sweep: () => memo.sweep(),
        renewLease: () => undefined,
        alive: (owners) => {
          const leased = stores.leased();
          return new Set(owners.filter((o) => leased.has(o)));
        },
        completeForMs: () => memo.completeForMs(),
      },
      log: {
        window: (s, n) => logs.window(s, n),
        read: (s, n, after) => logs.read(s, n, after),
        openStream: (s, n) => logs.openStream(s, n),
        append: (s, n, m) => logs.append(s, n, m),
        appendFinal: (s, n, m) => logs.appendFinal(s, n, m),
        dropSession: (s) => logs.dropSession(s),
      },
    },
    call,
  );
}
