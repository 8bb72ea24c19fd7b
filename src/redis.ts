/**
 * The durable Redis event log: `import { RedisEventLog } from 'mcp-continuity/redis'`. Kept out of the
 * main entry so that the `redis` client (an optional peer dependency) is loaded only by those who use it.
 */
export { RedisEventLog, type RedisEventLogOptions } from './server/redis-event-log.js';
export { RedisMemoStore, type RedisMemoStoreOptions } from './server/redis-memo-store.js';
export { RedisTaskStore } from './server/tasks/redis-task-store.js';
