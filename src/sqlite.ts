/**
 * The durable SQLite event log: `import { SqliteEventLog } from 'mcp-continuity/sqlite'`. Kept out of
 * the main entry so that better-sqlite3 (a native module, an optional peer dependency) is loaded only
 * by those who use it.
 */
export { SqliteEventLog, type SqliteEventLogOptions } from './server/sqlite-event-log.js';
export { SqliteMemoStore, type SqliteMemoStoreOptions } from './server/sqlite-memo-store.js';
export { SqliteTaskStore } from './server/tasks/sqlite-task-store.js';
