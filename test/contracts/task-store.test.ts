import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { MemoryTaskStore } from '../../src/server/tasks/memory-task-store.js';
import { RedisTaskStore } from '../../src/server/tasks/redis-task-store.js';
import { SqliteTaskStore } from '../../src/server/tasks/sqlite-task-store.js';
import { registerContract, taskStoreContract } from '../../src/testing/index.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

/** The task store contract (src/testing/contracts/task-store.ts) on every task store of the runtime. */

registerContract(
  { describe, it },
  'TaskStore contract: memory',
  taskStoreContract({ create: (o) => new MemoryTaskStore(o) }),
);

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
const paths = new WeakMap<SqliteTaskStore, string>();
const sqlite = (path: string, o: { now: () => number }) => {
  const store = new SqliteTaskStore({ path, ...o });
  paths.set(store, path);
  return store;
};
registerContract(
  { describe, it },
  'TaskStore contract: SQLite',
  taskStoreContract({
    async create(o) {
      const dir = await mkdtemp(join(tmpdir(), 'mcpc-task-contract-'));
      dirs.push(dir);
      return sqlite(join(dir, 'tasks.db'), o);
    },
    reopen: (previous, o) => sqlite(paths.get(previous) as string, o),
  }),
);

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.dispose();
});
let prefixes = 0;
const prefixOf = new WeakMap<RedisTaskStore, string>();
const onRedis = (keyPrefix: string, o: { now: () => number }) => {
  const store = new RedisTaskStore({ url: redis.url, keyPrefix, ...o });
  prefixOf.set(store, keyPrefix);
  return store;
};
registerContract(
  { describe, it },
  'TaskStore contract: Redis',
  taskStoreContract({
    create: (o) => onRedis(`task-contract-${process.pid}-${++prefixes}:`, o),
    peer: (store, o) => onRedis(prefixOf.get(store) as string, o),
    reopen: (previous, o) => onRedis(prefixOf.get(previous) as string, o),
  }),
);
