import { describe, it } from 'vitest';
import { MemoryTaskStore } from '../../src/server/tasks/memory-task-store.js';
import { RedisTaskStore } from '../../src/server/tasks/redis-task-store.js';
import { SqliteTaskStore } from '../../src/server/tasks/sqlite-task-store.js';
import { registerContract, taskStoreContract } from '../../src/testing/index.js';
import { redisStores, sqliteStores } from './store-backends.js';

/** The task store contract (src/testing/contracts/task-store.ts) on every task store of the runtime. */

registerContract(
  { describe, it },
  'TaskStore contract: memory',
  taskStoreContract({ create: (o) => new MemoryTaskStore(o) }),
);

registerContract(
  { describe, it },
  'TaskStore contract: SQLite',
  taskStoreContract(
    sqliteStores('task', (path, o: { now: () => number }) => new SqliteTaskStore({ path, ...o })),
  ),
);

registerContract(
  { describe, it },
  'TaskStore contract: Redis',
  taskStoreContract(
    redisStores(
      'task',
      (url, keyPrefix, o: { now: () => number }) => new RedisTaskStore({ url, keyPrefix, ...o }),
    ),
  ),
);
