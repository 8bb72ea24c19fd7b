import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { RetentionPolicy, StreamWindow } from '../../machines/server/retention.js';

/**
 * Where a session's server-to-client messages are kept so a dropped stream can be resumed. A backend
 * stores; what is retained and what a cursor gets is decided by `machines/server/retention.ts`, so every
 * backend evicts and answers alike. `test/server/event-log.contract.ts` is the suite every backend passes.
 *
 * Streams are numbered per session (0: the standalone GET stream). Sequence numbers are dense per stream,
 * starting at 1.
 */
export interface StoredEvent {
  readonly seq: number;
  readonly message: JsonRpcMessage;
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
}

export interface SessionRegistry {
  save(record: SessionRecord): Promise<void>;
  load(id: string): Promise<SessionRecord | undefined>;
  remove(id: string): Promise<void>;
}

export interface EventLog {
  /** Present on durable logs: sessions outlive the process that created them. */
  readonly registry?: SessionRegistry;
  /** True when the log survives a process restart (then sessions can too). */
  readonly durable: boolean;
  readonly policy: RetentionPolicy;
  /** Registers a stream; idempotent. Appending to, or finishing, an unknown stream registers it. */
  openStream(sessionId: string, stream: number): Promise<void>;
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
  /** The stream's last message was appended (a response): nothing more will come. */
  finish(sessionId: string, stream: number): Promise<void>;
  /** Forgets everything of a session (it ended). */
  dropSession(sessionId: string): Promise<void>;
  close(): Promise<void>;
}
