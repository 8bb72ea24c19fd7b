import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import {
  admitCounted,
  type MemoEntry,
  type MemoExpected,
  memoExpiresAt,
} from '../../machines/server/keyed-memo.js';
import type { MemoCreate, MemoStore } from './memo-store.js';
import { openSqlite } from './sqlite-open.js';

export interface SqliteMemoStoreOptions {
  /** The database file (created if missing); may be the event log's file. `:memory:` is not durable. */
  readonly path: string;
  readonly memoWindowMs: number;
  /** Injectable clock (tests). */
  readonly now?: () => number;
}

/**
 * The memo on SQLite (better-sqlite3, WAL): one process, survives a restart. Every change is one
 * transaction, so set-if-absent, the per-principal bound and compare-and-set are atomic. A restarted
 * process has a new instance id, so entries its predecessor left `running` have an owner nobody leases:
 * the runtime declares them outcome unknown. `expires_at` (NULL while running) is indexed for the sweep, and
 * with the principal for the per-principal bound. Rows per principal are kept in `memo_rows`, so a new key
 * below the bound is admitted without counting (O(1) at any count); live entries are counted only at it.
 */
export class SqliteMemoStore implements MemoStore {
  readonly durable: boolean;
  readonly instanceId = randomBytes(8).toString('hex');
  readonly memoWindowMs: number;
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly q;

  constructor(options: SqliteMemoStoreOptions) {
    this.durable = options.path !== ':memory:';
    this.memoWindowMs = options.memoWindowMs;
    this.now = options.now ?? Date.now;
    this.db = openSqlite(options.path);
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS memo (
        memo_key TEXT PRIMARY KEY, principal TEXT NOT NULL, state TEXT NOT NULL,
        expires_at INTEGER, entry TEXT NOT NULL) WITHOUT ROWID;
      DROP INDEX IF EXISTS memo_principal;
      CREATE INDEX IF NOT EXISTS memo_principal_expiry ON memo (principal, expires_at);
      CREATE INDEX IF NOT EXISTS memo_expiry ON memo (expires_at);
      CREATE TABLE IF NOT EXISTS memo_meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS memo_rows (principal TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
    `);
    const db = this.db;
    // Rows per principal, kept with every insert and delete: rebuilt on open, so a file written before the
    // table existed (or by an older version) starts right.
    db.transaction(() => {
      db.exec('DELETE FROM memo_rows');
      db.exec('INSERT INTO memo_rows (principal, n) SELECT principal, COUNT(*) FROM memo GROUP BY principal');
    })();
    db.prepare("INSERT OR IGNORE INTO memo_meta (k, v) VALUES ('since', ?)").run(this.now());
    this.q = {
      since: db.prepare<[], { v: number }>("SELECT v FROM memo_meta WHERE k = 'since'"),
      get: db.prepare<[string], { entry: string; expires_at: number | null }>(
        'SELECT entry, expires_at FROM memo WHERE memo_key = ?',
      ),
      // Counted on the (principal, expires_at) index alone: no row is read, no entry parsed.
      live: db.prepare<[string, number], { live: number; first: number | null }>(
        'SELECT COUNT(*) AS live, MIN(expires_at) AS first FROM memo ' +
          'WHERE principal = ? AND (expires_at IS NULL OR expires_at > ?)',
      ),
      insert: db.prepare(
        'INSERT INTO memo (memo_key, principal, state, expires_at, entry) VALUES (?, ?, ?, ?, ?)',
      ),
      update: db.prepare(
        'UPDATE memo SET state = ?, expires_at = ?, entry = ? WHERE memo_key = ? AND state = ?',
      ),
      remove: db.prepare('DELETE FROM memo WHERE memo_key = ?'),
      rows: db.prepare<[string], { n: number }>('SELECT n FROM memo_rows WHERE principal = ?'),
      addRows: db.prepare(
        'INSERT INTO memo_rows (principal, n) VALUES (?, ?) ON CONFLICT (principal) DO UPDATE SET n = n + excluded.n',
      ),
      dropEmpty: db.prepare('DELETE FROM memo_rows WHERE principal = ? AND n <= 0'),
      held: db.prepare<[], { n: number | null }>('SELECT SUM(n) AS n FROM memo_rows'),
      // NULL (running) is not <= anything: only rows past their window are counted.
      expiredCount: db.prepare<[number], { n: number }>(
        'SELECT COUNT(*) AS n FROM memo WHERE expires_at <= ?',
      ),
      running: db.prepare<[], { entry: string }>("SELECT entry FROM memo WHERE state = 'running'"),
      expired: db.prepare<[number], { memo_key: string; principal: string; entry: string }>(
        'SELECT memo_key, principal, entry FROM memo WHERE expires_at IS NOT NULL AND expires_at <= ?',
      ),
    };
  }

  async completeForMs(): Promise<number> {
    return this.now() - (this.q.since.get()?.v ?? this.now());
  }

  private read(memoKey: string): MemoEntry | undefined {
    const row = this.q.get.get(memoKey);
    if (!row) return undefined;
    if (row.expires_at !== null && row.expires_at <= this.now()) {
      // Past its window: gone for every reader; the sweep drops its events.
      return undefined;
    }
    return JSON.parse(row.entry) as MemoEntry;
  }

  async get(memoKey: string): Promise<MemoEntry | undefined> {
    return this.read(memoKey);
  }

  async create(entry: MemoEntry, maxEntriesPerPrincipal: number): Promise<MemoCreate> {
    return this.db.transaction((): MemoCreate => {
      const existing = this.read(entry.memoKey);
      if (existing) return { kind: 'exists', entry: existing };
      const now = this.now();
      // The principal's rows (expired ones not swept yet included) bound its live entries: below the
      // bound it is admitted without counting; only at the bound are the live ones counted.
      const rows = this.q.rows.get(entry.principal)?.n ?? 0;
      if (rows >= maxEntriesPerPrincipal) {
        const counted = this.q.live.get(entry.principal, now);
        const admission = admitCounted(
          { live: counted?.live ?? 0, firstWindowEnd: counted?.first ?? Number.POSITIVE_INFINITY },
          maxEntriesPerPrincipal,
          this.memoWindowMs,
          now,
        );
        if (admission.kind === 'full') return admission;
      }
      // An expired row of the same key may still be there (not swept yet): the new entry replaces it.
      if (this.q.remove.run(entry.memoKey).changes === 0) this.q.addRows.run(entry.principal, 1);
      this.q.insert.run(
        entry.memoKey,
        entry.principal,
        entry.state,
        this.expiry(entry),
        JSON.stringify(entry),
      );
      return { kind: 'created' };
    })();
  }

  async replace(next: MemoEntry, expected: MemoExpected): Promise<MemoEntry | undefined> {
    return this.db.transaction(() => {
      const stored = this.read(next.memoKey);
      if (!stored) return undefined;
      if (stored.state !== expected.state || stored.logId !== expected.logId) return stored;
      this.q.update.run(next.state, this.expiry(next), JSON.stringify(next), next.memoKey, expected.state);
      return next;
    })();
  }

  async running(): Promise<MemoEntry[]> {
    return this.q.running.all().map((r) => JSON.parse(r.entry) as MemoEntry);
  }

  async sweep(): Promise<string[]> {
    return this.db.transaction(() => {
      const rows = this.q.expired.all(this.now());
      for (const r of rows) {
        this.q.remove.run(r.memo_key);
        this.q.addRows.run(r.principal, -1);
        this.q.dropEmpty.run(r.principal);
      }
      return rows.map((r) => (JSON.parse(r.entry) as MemoEntry).logId);
    })();
  }

  async renewLease(): Promise<void> {}
  async dropLease(): Promise<void> {}
  async alive(instanceIds: readonly string[]): Promise<ReadonlySet<string>> {
    return new Set(instanceIds.filter((id) => id === this.instanceId));
  }

  /**
   * Rows running or inside their window: the rows held (kept per principal in `memo_rows` by every insert
   * and delete) less those past their window and not swept yet, found on the expiry index from its low
   * end. Nothing live is scanned, so reading the gauge costs the same with 10 or 100,000 live entries.
   */
  liveEntries(): number {
    if (!this.db.open) return 0;
    const held = this.q.held.get()?.n ?? 0;
    const expired = this.q.expiredCount.get(this.now())?.n ?? 0;
    return held - expired;
  }

  /** Rows held now: for tests. */
  count(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM memo').get() as { n: number }).n;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  private expiry(entry: MemoEntry): number | null {
    return memoExpiresAt(entry, this.memoWindowMs) ?? null;
  }
}
