import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { RedisMemoStore } from '../../src/server/redis-memo-store.js';
import { SqliteMemoStore } from '../../src/server/sqlite-memo-store.js';
import { memoStoreContract, registerContract } from '../../src/testing/index.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

/** The memo store contract (src/testing/contracts/memo-store.ts) on every memo store of the runtime. */

registerContract(
  { describe, it },
  'MemoStore contract: memory',
  memoStoreContract({ create: (o) => new MemoryMemoStore(o) }),
);

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
const paths = new WeakMap<SqliteMemoStore, string>();
const sqlite = (path: string, o: { memoWindowMs: number; now: () => number }) => {
  const store = new SqliteMemoStore({ path, ...o });
  paths.set(store, path);
  return store;
};

registerContract(
  { describe, it },
  'MemoStore contract: SQLite',
  memoStoreContract({
    async create(o) {
      const dir = await mkdtemp(join(tmpdir(), 'mcpc-memo-contract-'));
      dirs.push(dir);
      return sqlite(join(dir, 'memo.db'), o);
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
const prefixOf = new WeakMap<RedisMemoStore, string>();
const onRedis = (keyPrefix: string, o: { memoWindowMs: number; now: () => number }) => {
  const store = new RedisMemoStore({ url: redis.url, keyPrefix, ...o });
  prefixOf.set(store, keyPrefix);
  return store;
};

registerContract(
  { describe, it },
  'MemoStore contract: Redis',
  memoStoreContract({
    create: (o) => onRedis(`memo-contract-${process.pid}-${++prefixes}:`, o),
    peer: (store, o) => onRedis(prefixOf.get(store) as string, o),
    reopen: (previous, o) => onRedis(prefixOf.get(previous) as string, o),
  }),
);
