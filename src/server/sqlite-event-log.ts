import type Database from 'better-sqlite3';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import {
  DEFAULT_RETENTION_POLICY,
  type RetentionPolicy,
  retainFrom,
  type StreamWindow,
} from '../../machines/server/retention.js';
import type { EventLog, EventLogObserver, SessionRecord, SessionRegistry, StoredEvent } from './event-log.js';
import { openSqlite } from './sqlite-open.js';

export interface SqliteEventLogOptions {
  /** The database file (created if missing). `:memory:` works but is not durable. */
  readonly path: string;
  readonly maxEventsPerStream?: number;
  readonly retentionMs?: number;
  /** Injectable clock, for tests. */
  readonly now?: () => number;
}

/** An append waiting for its batch (`SqliteEventLog.flush`). */
interface QueuedAppend {
  readonly sessionId: string;
  readonly stream: number;
  /** Serialised before queueing: a message that cannot be must fail its own append, not the batch. */
  readonly json: string;
  readonly done: (seq: number) => void;
  readonly failed: (error: unknown) => void;
}

interface StreamRow {
  oldest: number;
  head: number;
  finished: number;
}

/**
 * A durable event log on SQLite (better-sqlite3, WAL). Sessions and their events survive a restart of
 * the process, so clients resume against the next one. What is retained is decided by `retainFrom`
 * (machines/server/retention.ts), the same rule every backend uses. Each append is one transaction;
 * with WAL and synchronous=NORMAL a process crash loses nothing committed (a power loss may lose the
 * last transactions).
 */
export class SqliteEventLog implements EventLog {
  readonly durable: boolean;
  readonly policy: RetentionPolicy;
  readonly registry: SessionRegistry;
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly q;
  private observer: EventLogObserver | undefined;
  /** Numbered in call order (`EventLog.ordersAppends`): appends are queued and stored in that order. */
  readonly ordersAppends = true;
  /** Appends waiting for the next turn of the event loop (`flush`). */
  private queued: QueuedAppend[] = [];
  private readonly appendAll: (batch: readonly QueuedAppend[]) => number[];

  constructor(options: SqliteEventLogOptions) {
    this.durable = options.path !== ':memory:';
    this.policy = {
      maxEventsPerStream: options.maxEventsPerStream ?? DEFAULT_RETENTION_POLICY.maxEventsPerStream,
      retentionMs: options.retentionMs ?? DEFAULT_RETENTION_POLICY.retentionMs,
    };
    this.now = options.now ?? Date.now;
    this.db = openSqlite(options.path);
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS streams (
        session TEXT NOT NULL, stream INTEGER NOT NULL,
        oldest INTEGER NOT NULL, head INTEGER NOT NULL, finished INTEGER NOT NULL,
        PRIMARY KEY (session, stream)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS events (
        session TEXT NOT NULL, stream INTEGER NOT NULL, seq INTEGER NOT NULL,
        at INTEGER NOT NULL, message TEXT NOT NULL,
        PRIMARY KEY (session, stream, seq)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, record TEXT NOT NULL) WITHOUT ROWID;
    `);
    const db = this.db;
    this.q = {
      stream: db.prepare<[string, number], StreamRow>(
        'SELECT oldest, head, finished FROM streams WHERE session = ? AND stream = ?',
      ),
      open: db.prepare(
        'INSERT OR IGNORE INTO streams (session, stream, oldest, head, finished) VALUES (?, ?, 1, 0, 0)',
      ),
      insert: db.prepare('INSERT INTO events (session, stream, seq, at, message) VALUES (?, ?, ?, ?, ?)'),
      firstSince: db.prepare<[string, number, number], { seq: number }>(
        'SELECT seq FROM events WHERE session = ? AND stream = ? AND at >= ? ORDER BY seq LIMIT 1',
      ),
      evict: db.prepare('DELETE FROM events WHERE session = ? AND stream = ? AND seq < ?'),
      setWindow: db.prepare('UPDATE streams SET oldest = ?, head = ? WHERE session = ? AND stream = ?'),
      finish: db.prepare('UPDATE streams SET finished = 1 WHERE session = ? AND stream = ?'),
      times: db.prepare<[string, number], { at: number }>(
        'SELECT at FROM events WHERE session = ? AND stream = ? ORDER BY seq',
      ),
      after: db.prepare<[string, number, number], { seq: number; message: string }>(
        'SELECT seq, message FROM events WHERE session = ? AND stream = ? AND seq > ? ORDER BY seq',
      ),
      dropEvents: db.prepare('DELETE FROM events WHERE session = ?'),
      dropStreams: db.prepare('DELETE FROM streams WHERE session = ?'),
      saveSession: db.prepare(
        'INSERT INTO sessions (id, record) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET record = excluded.record',
      ),
      loadSession: db.prepare<[string], { record: string }>('SELECT record FROM sessions WHERE id = ?'),
      removeSession: db.prepare('DELETE FROM sessions WHERE id = ?'),
    };
    this.appendAll = db.transaction((batch: readonly QueuedAppend[]) =>
      batch.map((e) => this.appendRows(e.sessionId, e.stream, e.json)),
    );
    this.registry = {
      save: async (record: SessionRecord) => {
        this.q.saveSession.run(record.id, JSON.stringify(record));
      },
      load: async (id: string) => {
        const row = this.q.loadSession.get(id);
        return row ? (JSON.parse(row.record) as SessionRecord) : undefined;
      },
      remove: async (id: string) => {
        this.q.removeSession.run(id);
      },
    };
  }

  async openStream(sessionId: string, stream: number): Promise<void> {
    this.q.open.run(sessionId, stream);
  }

  /** One append's rows, inside the caller's transaction. */
  private appendRows(sessionId: string, stream: number, json: string): number {
    this.q.open.run(sessionId, stream);
    const row = this.q.stream.get(sessionId, stream) as StreamRow;
    const seq = row.head + 1;
    const now = this.now();
    this.q.insert.run(sessionId, stream, seq, now, json);
    this.evictTo(sessionId, stream, { oldest: row.oldest, head: seq }, now);
    return seq;
  }

  /**
   * Queued, and stored with every append that arrives before the event loop turns, in one transaction
   * (one commit instead of one per event: bench, notifications/s). Numbered in call order.
   */
  async append(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number> {
    // Throws (rejecting this call only) on a value JSON cannot hold, before it can join a shared batch.
    const json = JSON.stringify(message);
    return new Promise<number>((done, failed) => {
      if (this.queued.push({ sessionId, stream, json, done, failed }) === 1) {
        setImmediate(() => this.flush());
      }
    });
  }

  /**
   * Stores the queued appends in one transaction: all of them, or none (a session's write-behind relies
   * on it: no event stored after one of its stream that was lost). Called before anything that must
   * come after them.
   */
  private flush(): void {
    const batch = this.queued;
    if (batch.length === 0) return;
    this.queued = [];
    let seqs: number[];
    try {
      seqs = this.appendAll(batch);
    } catch (error) {
      for (const e of batch) e.failed(error);
      return;
    }
    batch.forEach((e, i) => {
      e.done(seqs[i] as number);
    });
  }

  /** Applies the retention rule and stores the new window. */
  private evictTo(
    sessionId: string,
    stream: number,
    w: { oldest: number; head: number },
    now: number,
  ): number {
    const from = retainFrom(
      w,
      this.policy,
      now,
      (cutoff) => this.q.firstSince.get(sessionId, stream, cutoff)?.seq,
    );
    if (from > w.oldest) {
      // The rows actually deleted: exact even if a window was stored ahead of its rows.
      const { changes } = this.q.evict.run(sessionId, stream, from);
      if (changes > 0) this.observer?.evicted(changes, sessionId, stream);
    }
    this.q.setWindow.run(from, w.head, sessionId, stream);
    return from;
  }

  async window(sessionId: string, stream: number): Promise<StreamWindow | undefined> {
    return this.db.transaction(() => this.currentWindow(sessionId, stream))();
  }

  private currentWindow(sessionId: string, stream: number): StreamWindow | undefined {
    const row = this.q.stream.get(sessionId, stream);
    if (!row) return undefined;
    const oldest = this.evictTo(sessionId, stream, row, this.now());
    return {
      oldest,
      head: row.head,
      finished: row.finished === 1,
      appendedAt: this.q.times.all(sessionId, stream).map((r) => r.at),
    };
  }

  async read(
    sessionId: string,
    stream: number,
    afterSeq: number,
  ): Promise<{ events: StoredEvent[]; window: StreamWindow } | undefined> {
    return this.db.transaction(() => {
      const window = this.currentWindow(sessionId, stream);
      if (!window) return undefined;
      const events = this.q.after
        .all(sessionId, stream, afterSeq)
        .map((r) => ({ seq: r.seq, message: JSON.parse(r.message) as JsonRpcMessage }));
      return { events, window };
    })();
  }

  async appendFinal(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number | undefined> {
    this.flush();
    return this.db.transaction(() => {
      this.q.open.run(sessionId, stream);
      if ((this.q.stream.get(sessionId, stream) as StreamRow).finished === 1) return undefined;
      const seq = this.appendRows(sessionId, stream, JSON.stringify(message));
      this.q.finish.run(sessionId, stream);
      return seq;
    })();
  }

  async dropSession(sessionId: string): Promise<void> {
    this.flush();
    this.db.transaction(() => {
      this.q.dropEvents.run(sessionId);
      this.q.dropStreams.run(sessionId);
      this.q.removeSession.run(sessionId);
    })();
  }

  setObserver(observer: EventLogObserver | undefined): void {
    this.observer = observer;
  }

  async close(): Promise<void> {
    if (this.db.open) this.flush();
    if (this.db.open) this.db.close();
  }
}
