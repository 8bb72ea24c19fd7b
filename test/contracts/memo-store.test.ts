import { randomBytes } from 'node:crypto';
import { describe, it } from 'vitest';
import { SimMemoStore } from '../../properties/world-modern/sim-memo.js';
import type { MemoStore } from '../../src/server/memo-store.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { RedisMemoStore } from '../../src/server/redis-memo-store.js';
import { SqliteMemoStore } from '../../src/server/sqlite-memo-store.js';
import { memoStoreContract, registerContract } from '../../src/testing/index.js';
import { redisStores, sqliteStores } from './store-backends.js';

/** The memo store contract (src/testing/contracts/memo-store.ts) on every memo store of the runtime. */

registerContract(
  { describe, it },
  'MemoStore contract: memory',
  memoStoreContract({ create: (o) => new MemoryMemoStore(o) }),
);

registerContract(
  { describe, it },
  'MemoStore contract: SQLite',
  memoStoreContract(
    sqliteStores(
      'memo',
      (path, o: { memoWindowMs: number; now: () => number }) => new SqliteMemoStore({ path, ...o }),
    ),
  ),
);

registerContract(
  { describe, it },
  'MemoStore contract: Redis',
  memoStoreContract(
    redisStores(
      'memo',
      (url, keyPrefix, o: { memoWindowMs: number; now: () => number }) =>
        new RedisMemoStore({ url, keyPrefix, ...o }),
    ),
  ),
);

/**
 * The 2026 world's simulated memo (properties/world-modern/sim-memo.ts), one instance's view of it: the world
 * shares one store between its instances (a durable memo), so `peer` and `reopen` are views of the same data
 * with their own instance ids, and leases live beside the data as they do in Redis.
 */
interface SimData {
  readonly store: SimMemoStore;
  readonly leases: Set<string>;
  /** Where the store reports what it forgets by itself (the world's `onForget`). */
  forgot?: (logId: string) => void;
}
const simOf = new WeakMap<MemoStore, SimData>();
function simView(data: SimData): MemoStore {
  const instanceId = randomBytes(8).toString('hex');
  const { store, leases } = data;
  const view: MemoStore = {
    durable: true,
    memoWindowMs: store.memoWindowMs,
    instanceId,
    completeForMs: async () => store.completeForMs(),
    get: async (k) => store.get(k),
    create: async (e, max) => store.create(e, max),
    replace: async (next, expected) => store.replace(next, expected),
    running: async () => store.running(),
    sweep: async () => store.sweep(),
    renewLease: async () => {
      leases.add(instanceId);
    },
    dropLease: async () => {
      leases.delete(instanceId);
    },
    alive: async (ids) => new Set(ids.filter((id) => id === instanceId || leases.has(id))),
    onForget: (listener) => {
      data.forgot = listener;
    },
    close: async () => undefined,
  };
  simOf.set(view, data);
  return view;
}

registerContract(
  { describe, it },
  'MemoStore contract: simulated (2026 world)',
  memoStoreContract({
    create: (o) => {
      const data: SimData = {
        store: new SimMemoStore({ ...o, since: o.now(), onForget: (e) => data.forgot?.(e.logId) }),
        leases: new Set(),
      };
      return simView(data);
    },
    peer: (view) => simView(simOf.get(view) as SimData),
    reopen: (view) => simView(simOf.get(view) as SimData),
  }),
);
