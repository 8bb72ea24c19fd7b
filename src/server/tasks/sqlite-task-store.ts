import type Database from 'better-sqlite3';
import type { TaskRecord } from '../../../machines/tasks/task-record.js';
import { openSqlite } from '../sqlite-open.js';
import type { TaskCreate, TaskStore } from './task-store.js';

/**
 * Tasks on SQLite (better-sqlite3, WAL): one process, survives a restart. The key binding is a UNIQUE
 * column and every change is one transaction, so a key makes one task and a version is written once.
 */
export class SqliteTaskStore implements TaskStore {
  readonly durable: boolean;
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly q;

  constructor(options: { readonly path: string; readonly now?: () => number }) {
    this.durable = options.path !== ':memory:';
    this.now = options.now ?? Date.now;
    this.db = openSqlite(options.path);
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS task (
        task_id TEXT PRIMARY KEY, key_ref TEXT UNIQUE, purge_at INTEGER, version INTEGER NOT NULL,
        record TEXT NOT NULL) WITHOUT ROWID;
      CREATE INDEX IF NOT EXISTS task_purge ON task (purge_at);
    `);
    const db = this.db;
    this.q = {
      byId: db.prepare<[string, number], { record: string }>(
        'SELECT record FROM task WHERE task_id = ? AND (purge_at IS NULL OR purge_at > ?)',
      ),
      byKey: db.prepare<[string, number], { record: string }>(
        'SELECT record FROM task WHERE key_ref = ? AND (purge_at IS NULL OR purge_at > ?)',
      ),
      removeKey: db.prepare('DELETE FROM task WHERE key_ref = ?'),
      insert: db.prepare(
        'INSERT INTO task (task_id, key_ref, purge_at, version, record) VALUES (?, ?, ?, ?, ?)',
      ),
      update: db.prepare(
        'UPDATE task SET version = ?, purge_at = ?, record = ? WHERE task_id = ? AND version = ?',
      ),
      purged: db.prepare<[number], { task_id: string }>(
        'SELECT task_id FROM task WHERE purge_at IS NOT NULL AND purge_at <= ?',
      ),
      remove: db.prepare('DELETE FROM task WHERE task_id = ?'),
    };
  }

  async create(record: TaskRecord): Promise<TaskCreate> {
    return this.db.transaction((): TaskCreate => {
      if (record.keyRef !== undefined) {
        const row = this.q.byKey.get(record.keyRef, this.now());
        if (row) return { kind: 'exists', record: JSON.parse(row.record) as TaskRecord };
        // A purged task may still hold the key (not swept yet): the new one takes it.
        this.q.removeKey.run(record.keyRef);
      }
      this.q.insert.run(
        record.taskId,
        record.keyRef ?? null,
        record.purgeAt,
        record.version,
        JSON.stringify(record),
      );
      return { kind: 'created' };
    })();
  }

  async get(taskId: string): Promise<TaskRecord | undefined> {
    const row = this.q.byId.get(taskId, this.now());
    return row ? (JSON.parse(row.record) as TaskRecord) : undefined;
  }

  async replace(next: TaskRecord, expectedVersion: number): Promise<TaskRecord | undefined> {
    return this.db.transaction((): TaskRecord | undefined => {
      const row = this.q.byId.get(next.taskId, this.now());
      if (!row) return undefined;
      const stored = JSON.parse(row.record) as TaskRecord;
      if (stored.version !== expectedVersion) return stored;
      this.q.update.run(next.version, next.purgeAt, JSON.stringify(next), next.taskId, expectedVersion);
      return next;
    })();
  }

  async sweep(): Promise<string[]> {
    return this.db.transaction(() => {
      const rows = this.q.purged.all(this.now());
      for (const r of rows) this.q.remove.run(r.task_id);
      return rows.map((r) => r.task_id);
    })();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
