import type { KeyedStoreCall } from '../../../machines/server/keyed-core-io.js';
import { KEYED_STREAM } from '../../../machines/server/keyed-memo.js';
import type { EventLog } from '../event-log.js';
import type { MemoStore } from '../memo-store.js';

/**
 * The ports a keyed core's store calls run on: the `MemoStore` and `EventLog` methods it uses, answered at
 * once (the simulated stores) or later (a promise: memory, SQLite, Redis).
 */
export type KeyedStorePorts = {
  readonly memo: {
    [K in 'get' | 'create' | 'replace' | 'running' | 'sweep' | 'renewLease' | 'alive' | 'completeForMs']: (
      ...args: Parameters<MemoStore[K]>
    ) => unknown;
  };
  readonly log: {
    [K in 'window' | 'read' | 'openStream' | 'append' | 'appendFinal' | 'dropSession']: (
      ...args: Parameters<EventLog[K]>
    ) => unknown;
  };
};

/**
 * Executes one store call of the keyed core (machines/server/keyed-core.ts) on `ports`: the runtime's
 * stores and the simulated world's run the same dispatch. Nothing is decided here.
 */
export function executeStoreCall(ports: KeyedStorePorts, call: KeyedStoreCall): unknown {
  const { memo, log } = ports;
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
      return memo.renewLease(call.leaseMs);
    case 'memo.alive':
      return memo.alive(call.owners);
    case 'memo.complete-for':
      return memo.completeForMs();
    case 'log.window':
      return log.window(call.logId, KEYED_STREAM);
    case 'log.read':
      return log.read(call.logId, KEYED_STREAM, call.afterSeq);
    case 'log.open':
      return log.openStream(call.logId, KEYED_STREAM);
    case 'log.append':
      return log.append(call.logId, KEYED_STREAM, call.message);
    case 'log.append-final':
      return log.appendFinal(call.logId, KEYED_STREAM, call.message);
    case 'log.drop':
      return log.dropSession(call.logId);
  }
}
