import Database from 'better-sqlite3';

/**
 * Opens the SQLite database of a durable store (event log, memo, tasks), all three the same way: WAL, so
 * reads never wait for the one writer, and `synchronous = NORMAL`, which in WAL mode loses no committed
 * change to a process crash (only, at worst, the last ones to a power loss).
 */
export function openSqlite(path: string): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  return db;
}
