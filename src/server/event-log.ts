import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { RetentionPolicy, StreamWindow } from '../../machines/server/retention.js';
import type { Numbering, StreamEntry, Watermark } from '../../machines/server/shared-record.js';

/**
 * Where a session's server-to-client messages are kept so a dropped stream can be resumed. A backend
 * stores; what is retained and what a cursor gets is decided by `machines/server/retention.ts`, so every
 * backend evicts and answers alike. `eventLogContract` (`mcp-continuity/testing`) is the suite every backend passes.
 *
 * Streams are numbered per session (0: the standalone GET stream). Sequence numbers are dense per stream,
 * starting at 1.
 */
export interface StoredEvent {
  readonly seq: number;
  readonly message: JsonRpcMessage;
  /**
   * The message's JSON text, when the log keeps it (MemoryEventLog does): a replay writes it as it is
   * instead of serializing every message again. Optional; a backend may leave it out.
   */
  readonly data?: string;
}

/** What a durable log keeps about a session so the next process (or another instance) can serve it. */
export interface SessionRecord {
  readonly id: string;
  readonly epoch: string;
  readonly principal?: string;
  /** The client's initialize request, replayed into a fresh SDK server when the session is restored. */
  readonly initialize: JsonRpcMessage;
  /** The session machine's persisted snapshot (request ids seen, streams, lifecycle). */
  readonly snapshot: unknown;
  /**
   * When the session was created (wall clock, ms): an instance that restores it times its
   * `mcp.server.session.duration` from here. Absent in records written before it was kept.
   */
  readonly createdAt?: number;
}

export interface SessionRegistry {
  save(record: SessionRecord): Promise<void>;
  load(id: string): Promise<SessionRecord | undefined>;
  remove(id: string): Promise<void>;
}

/** What `SharedSessionStore.loadSince` read. */
export type LoadedSince =
  | { readonly version: number; readonly record?: undefined; readonly entries?: undefined }
  | {
      readonly version: number;
      readonly record: SessionRecord;
      /** Present when `record` is a core: the entries read beside it. Absent: `record` is whole. */
      readonly entries?: ReadonlyArray<readonly [number, StreamEntry]>;
    };

/**
 * A decision that only admitted requests, committed after another instance moved the record on, and
 * written by the store after that instance's admissions (`rebaseAdmissions`, machines/server/shared-record.ts).
 */
export interface Rebased {
  readonly kind: 'rebased';
  /** The record's version now, the rebased decision included. */
  readonly version: number;
  /** The stored numbering the decision was rebased onto (before its own entries). */
  readonly onto: Numbering;
  /** The entries numbered between the decision's base and `onto`: what the decider catches up on. */
  readonly since: ReadonlyArray<readonly [number, StreamEntry]>;
}

/** A change any instance made, reported to every instance watching a shared store. */
export type StoreChange =
  | { readonly kind: 'appended'; readonly sessionId: string; readonly stream: number }
  /** A client message for this instance's copy of the session, POSTed to another instance. */
  | { readonly kind: 'inbound'; readonly sessionId: string; readonly message: JsonRpcMessage }
  | { readonly kind: 'ended'; readonly sessionId: string; readonly reason: 'expired' | 'terminated' };

/**
 * Several server instances serve the same sessions through this store, without sticky sessions. The
 * session machine still makes every decision; the store makes each one atomic across instances
 * (optimistic concurrency on the session record), tells every instance what the others appended, and
 * knows which instances are alive (leases), so a call whose instance died ends as outcome unknown.
 */
export interface SharedSessionStore {
  /**
   * Writes `record` if the stored one has version `expectedVersion` (0: there is none) and returns true;
   * otherwise writes nothing and returns false. A written record has version `expectedVersion + 1` and
   * counts as touched now.
   */
  commit(record: SessionRecord, expectedVersion: number): Promise<boolean>;
  /** The stored record and its version, or undefined when the session is gone. */
  load(id: string): Promise<{ record: SessionRecord; version: number } | undefined>;
  /** The stored version alone (a cheap check before a full load); undefined when the session is gone. */
  version(id: string): Promise<number | undefined>;
  /**
   * Optional: the layout of machines/server/shared-record.ts. Like `commit`, over `expectedVersion`, but
   * writes `core` (the record with its snapshot's per-stream memory emptied, `coreOf`) and only the stream
   * entries the decision added (`newEntries`); `watermark` is the snapshot's. The cost does not grow with
   * the session's age. In the same step it opens, in the log beside it, the stream of every entry
   * written (as `EventLog.openStream` would): a stream exists in the log as soon as its number is
   * committed, so the plan of a request on a shared store opens nothing apart (`planRequest`). A store
   * with it has `loadSince` too. `facts` is the decision's `settledFacts`; with `rebase` (a decision
   * that only admitted requests, made on a copy whose numbering was at `rebase.base`) a newer stored
   * version is not always a conflict: the store may write the decision after the newer admissions and
   * answer {@link Rebased}.
   */
  commitEntries?(
    core: SessionRecord,
    entries: ReadonlyArray<readonly [number, StreamEntry]>,
    watermark: Watermark,
    expectedVersion: number,
    facts?: string,
    rebase?: { readonly base: Watermark; readonly capacity: number },
  ): Promise<boolean | Rebased>;
  /**
   * Optional, with `commitEntries`: one read that catches a copy at `knownVersion` (whose numbering is at
   * `base`) up. `{ version }` alone when the stored version is `knownVersion`; otherwise the record and,
   * when it is stored as a core, the entries `entriesToRead(base, stored)` names (every entry when `base`
   * is undefined). Undefined when the session is gone.
   */
  loadSince?(id: string, knownVersion: number, base: Watermark | undefined): Promise<LoadedSince | undefined>;
  /**
   * A decision made on `version` that changed nothing the instances must agree on: true (and the session
   * touched) when `version` is still the stored one, false when another instance moved on or the session
   * is gone (the decision is then made again on the newer record). One step, so a decision on a copy
   * that was current costs one round trip, read included.
   */
  confirm(id: string, version: number): Promise<boolean>;
  /** The sessions were used just now, on this instance. */
  touch(ids: readonly string[]): Promise<void>;
  /** How long since any instance touched the session; undefined when it is gone. */
  idleFor(id: string): Promise<number | undefined>;
  /** Names this instance (one store object per server instance) in leases and change reports. */
  readonly instanceId: string;
  /** This instance is alive for `leaseMs` more. */
  renewLease(leaseMs: number): Promise<void>;
  /** This instance stops: its calls are abandoned at once rather than when its lease runs out. */
  dropLease(): Promise<void>;
  /** Which of these instances hold a lease now. */
  alive(instanceIds: readonly string[]): Promise<ReadonlySet<string>>;
  /** Carries a client message to the instance it belongs to (see machines/server/routing.ts). */
  forward(instanceId: string, sessionId: string, message: JsonRpcMessage): Promise<void>;
  /** Tells every other watching instance that a session ended. */
  announceEnded(sessionId: string, reason: 'expired' | 'terminated'): Promise<void>;
  /**
   * Calls `listener` for changes made by other instances (appends, finishes, ends), in order, with
   * blocking reads on the store. Reports are hints to re-read the log, never data: a report can be
   * missed (the feed is bounded, a process can die between its append and its report), so readers also
   * poll now and then. Returns a function that stops watching.
   */
  watch(listener: (change: StoreChange) => void): () => void;
}

/** What a log reports as it works, for metrics. Calls must be cheap and must not throw. */
export interface EventLogObserver {
  /** `count` (> 0) events of one stream fell out of the retention window (its count or age bound). */
  evicted(count: number, sessionId: string, stream: number): void;
}

export interface EventLog {
  /** Where a durable log without a shared store keeps session records (several instances: `shared`). */
  readonly registry?: SessionRegistry;
  /** Present on logs several server instances share (Redis): sessions are served by any of them. */
  readonly shared?: SharedSessionStore;
  /** True when the log survives a process restart (then sessions can too). */
  readonly durable: boolean;
  readonly policy: RetentionPolicy;
  /** Registers a stream; idempotent. Appending to an unknown stream registers it. */
  openStream(sessionId: string, stream: number): Promise<void>;
  /**
   * Optional, true: appends are numbered in the order they are called, even while earlier ones are under
   * way (a queue or one connection, not an `await` before numbering). A session then does not wait for a
   * notification to be stored before it takes the next: the SDK server's `send` resolves once the message
   * is queued (a bounded number per session, write-behind.ts), a failure is thrown by the next send
   * on its stream, and the stream's answer is stored only after all of them (or not vouched for: outcome
   * unknown). What a session hands over together (in one tick) it expects stored together, or not at
   * all (Redis: one script per session, SQLite: one transaction), so no event is stored after a lost one.
   */
  readonly ordersAppends?: boolean;
  /** Stores one message and returns its sequence number. Evicts by count and age as it goes. */
  append(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number>;
  /** Every retained event with seq > afterSeq, in order, and the window they were read from. */
  read(
    sessionId: string,
    stream: number,
    afterSeq: number,
  ): Promise<{ events: StoredEvent[]; window: StreamWindow } | undefined>;
  /** The retained window after age eviction, or undefined for a stream the log does not know. */
  window(sessionId: string, stream: number): Promise<StreamWindow | undefined>;
  /**
   * Appends `message` and finishes the stream in one step, unless the stream is already finished: then
   * nothing is appended and the result is undefined. A call's answer is written exactly once even when
   * two instances race to write it (the one running it, and one declaring it abandoned).
   */
  appendFinal(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number | undefined>;
  /** Forgets everything of a session (it ended). */
  dropSession(sessionId: string): Promise<void>;
  /**
   * Optional: report evictions to `observer` (one at a time; `undefined` removes it). Dropping a
   * session's events because the session ended is not an eviction.
   */
  setObserver?(observer: EventLogObserver | undefined): void;
  close(): Promise<void>;
}
