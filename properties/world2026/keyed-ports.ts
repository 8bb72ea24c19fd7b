import type { KeyedStoreCall } from '../../machines/server/keyed-core-io.js';
import { KEYED_STREAM } from '../../machines/server/keyed-memo.js';
import type { SimEventLog } from '../world/sim-event-log.js';
import type { SimMemoStore } from './sim-memo.js';

/**
 * The simulated ports of the keyed core (machines/server/keyed-core.ts): its store calls executed on the
 * simulated memo and key logs, synchronously. The runtime executes the same calls on a real `MemoStore`
 * and `EventLog` (src/server/keyed/index.ts); both only dispatch, nothing is decided here.
 */
export interface SimKeyedStores {
  readonly memo: SimMemoStore;
  readonly logs: SimEventLog;
  /** The instances holding a lease now (the model's leases: an instance holds one while it is up). */
  readonly leased: () => ReadonlySet<string>;
}

export function executeStoreCall(stores: SimKeyedStores, call: KeyedStoreCall): unknown {
  const { memo, logs } = stores;
  switch (call.kind) {
    case 'memo.get':
      return memo.get(call.memoKey);
    case 'memo.create':
      return memo.create(call.entry, call.max);
    case 'memo.replace':
      return memo.replace(call.next, call.expected);
    case 'memo.running':
      return memo.running();
    case 'memo.sweep':
      return memo.sweep();
    case 'memo.renew-lease':
      return undefined;
    case 'memo.alive': {
      const leased = stores.leased();
      return new Set(call.owners.filter((o) => leased.has(o)));
    }
    case 'memo.complete-for':
      return memo.completeForMs();
    case 'log.window':
      return logs.window(call.logId, KEYED_STREAM);
    case 'log.read':
      return logs.read(call.logId, KEYED_STREAM, call.afterSeq);
    case 'log.open':
      return logs.openStream(call.logId, KEYED_STREAM);
    case 'log.append':
      return logs.append(call.logId, KEYED_STREAM, call.message);
    case 'log.append-final':
      return logs.appendFinal(call.logId, KEYED_STREAM, call.message);
    case 'log.drop':
      return logs.dropSession(call.logId);
  }
}
