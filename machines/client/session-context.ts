import type { ActorRefFrom } from 'xstate';
import { DEFAULT_RECONNECT_POLICY, type ReconnectPolicy } from '../backoff.js';
import type { GapDetails } from '../decide.js';
import { type JsonRpcMessage, type JsonRpcRequest, requestKey } from '../jsonrpc.js';
import type { ServerAdvertisement } from '../validity.js';
import { type CursorRecord, recordBelongsTo, type StreamCursor } from './cursor.js';
import { defaultRetryPolicy, type Ledger, type RetryPolicy, type ToolAnnotations } from './ledger.js';
import { DEFAULT_STALL_TIMEOUT_MS, MAX_DERIVED_STALL_MS, MIN_DERIVED_STALL_MS, timerMs } from './limits.js';
import type { StreamKind, StreamReport, streamMachine } from './stream.machine.js';

/**
 * The client session's context, input and events (the chart is in session.machine.ts). Streams are child
 * actors; their faults never move the session. Only a successful initialize, a 404, a close event or
 * `app.close` do.
 *
 * How the session behaves: from the transport's options, fixed for its life.
 */
export interface ClientConfig {
  readonly policy: ReconnectPolicy;
  /**
   * No byte for this long counts as a reset, in every phase of an exchange (connect, headers, body). 0:
   * off. Undefined: three heartbeats of a server that advertises its heartbeat (within
   * [MIN_DERIVED_STALL_MS, MAX_DERIVED_STALL_MS]), else `DEFAULT_STALL_TIMEOUT_MS` (five minutes).
   */
  readonly stallTimeoutMs: number | undefined;
  readonly retryPolicy: RetryPolicy;
  /** Seeds reconnect jitter (the runtime passes a random one; tests a fixed one). */
  readonly seed: number;
  /**
   * The server this client talks to. A restored cursor record of another server (or of none) is not
   * used: its session id and cursors are never sent here. Undefined: any record is used (simulations).
   */
  readonly serverUrl?: string;
  /**
   * This process's tag on the request ids it sends (machines/request-tag.ts): a progress notification
   * tagged by another owner is an orphan. Undefined: ids are not tagged (simulations).
   */
  readonly requestOwner?: string;
  /**
   * The application gave an `authProvider`: a 401 (or 403 insufficient_scope) is answered by authorizing
   * and sending the same request again (authorization.ts), not by failing the call.
   */
  readonly authorization?: boolean;
}

export interface ClientInput extends Partial<ClientConfig> {
  /** A cursor record from the store: resume that session instead of initializing. */
  readonly restored?: CursorRecord;
}

/** Delivered to `onGap`: where events were lost, how many, and why. */
export interface GapReport extends Partial<GapDetails> {
  /** The client's stream key: a request's key (`n:7`) or `standalone`. */
  readonly streamKey: string;
  readonly reason: string;
  readonly lostCount: number | null;
  readonly sessionId?: string;
}

export type ClientEvent =
  | StreamReport
  /**
   * `resumptionToken` (the SDK's send option, on a request): the request is not POSTed; its stream resumes
   * from that event id, and the response there answers it.
   */
  | { type: 'app.send'; message: JsonRpcMessage; resumptionToken?: string }
  | { type: 'app.protocolVersion'; version: string }
  /** The application resumes a stream itself (`resumeStream`): `key` from `appResumeKey` (app-resume.ts). */
  | { type: 'app.resume'; key: string; lastEventId: string }
  | { type: 'app.close' };

export interface StreamEntry {
  readonly ref: ActorRefFrom<typeof streamMachine>;
  readonly streamId: string;
  readonly kind: StreamKind;
}

export interface ClientContext {
  config: ClientConfig;
  restored: CursorRecord | undefined;
  sessionId: string | undefined;
  protocolVersion: string | undefined;
  initializeRequest: JsonRpcRequest | undefined;
  advertisement: ServerAdvertisement | undefined;
  /**
   * `ledger`, `streams` and `cursors` gain a key and lose it again on every call. They are updated in
   * place, like the server session's records: copying them per call cost ~0.2 ms with 50 calls in flight
   * (docs/benchmarks.md, row 2). They are not handed back to `assign` either: every `assign` copies the
   * whole context and clones the snapshot, for no change here. Nothing outside this machine keeps a
   * reference to them; a persisted cursor record gets its own copy (`cursorRecordOf`).
   */
  ledger: Ledger;
  annotations: ToolAnnotations;
  streams: Record<string, StreamEntry>;
  cursors: Record<string, StreamCursor>;
  /** Messages the application sent while the session was being re-established. */
  queue: JsonRpcMessage[];
  /** Requests the retry policy allowed to be sent again on the new session. */
  resendQueue: JsonRpcRequest[];
  reinitId: string | undefined;
  /**
   * Re-initializations since a session last stayed active for the policy's longest delay. The first is
   * immediate; each later one waits like a reconnect attempt; past the policy's retries the transport fails.
   */
  reinits: number;
  /** The wait before the re-initialize being prepared. */
  reinitDelayMs: number;
  /** A restored record that named another server was ignored: reported once, at start. */
  foreignRecord: boolean;
  /** Requests whose own POST was answered 404: they cannot have run, so they are sent again. */
  provenUnexecuted: string[];
  /** Counts spawned streams: unique stream ids and jitter seeds. */
  spawned: number;
  /**
   * Ended streams, kept to be started again (`stream.reuse`) instead of spawning a new actor: XState copies
   * its children object on every spawn and every stop (~40-85 µs per call with 50 in flight), and creating
   * an actor and its first snapshot costs about as much again. Staleness is judged by `streamId`, which is
   * new for every stream, whichever actor carries it.
   */
  pool: Array<StreamEntry['ref']>;
}

export const STANDALONE_KEY = 'standalone';

/** The session's context at its start, from the transport's input. */
export function initialClientContext(input: ClientInput): ClientContext {
  return {
    config: {
      policy: input.policy ?? DEFAULT_RECONNECT_POLICY,
      stallTimeoutMs: input.stallTimeoutMs,
      retryPolicy: input.retryPolicy ?? defaultRetryPolicy,
      seed: input.seed ?? 1,
      serverUrl: input.serverUrl,
      requestOwner: input.requestOwner,
      authorization: input.authorization,
    },
    restored: input.restored && recordBelongsTo(input.restored, input.serverUrl) ? input.restored : undefined,
    foreignRecord: input.restored !== undefined && !recordBelongsTo(input.restored, input.serverUrl),
    reinits: 0,
    reinitDelayMs: 0,
    sessionId: undefined,
    protocolVersion: undefined,
    initializeRequest: undefined,
    advertisement: undefined,
    ledger: {},
    annotations: {},
    streams: {},
    cursors: {},
    queue: [],
    resendQueue: [],
    reinitId: undefined,
    provenUnexecuted: [],
    spawned: 0,
    pool: [],
  };
}

/** Heartbeats a stream may miss before it counts as stalled, when the client derives the timeout. */
export const STALL_HEARTBEATS = 3;

/**
 * The stall timeout of every stream: the application's (fit to a timer), else three advertised heartbeats
 * within bounds (a server cannot make it 1 ms, or days), else `DEFAULT_STALL_TIMEOUT_MS`: a black hole ends
 * in bounded time even with a server that says nothing of its heartbeat.
 */
export function stallTimeoutFor(
  config: ClientConfig,
  advertisement: ServerAdvertisement | undefined,
): number {
  if (config.stallTimeoutMs !== undefined) return timerMs(config.stallTimeoutMs);
  const heartbeat = advertisement?.heartbeatMs;
  if (heartbeat === undefined || !(heartbeat > 0)) return DEFAULT_STALL_TIMEOUT_MS;
  return Math.min(MAX_DERIVED_STALL_MS, Math.max(MIN_DERIVED_STALL_MS, STALL_HEARTBEATS * heartbeat));
}

export function cursorRecordOf(ctx: ClientContext): CursorRecord | null {
  if (ctx.sessionId === undefined) return null;
  return {
    ...(ctx.config.serverUrl === undefined ? {} : { serverUrl: ctx.config.serverUrl }),
    sessionId: ctx.sessionId,
    protocolVersion: ctx.protocolVersion,
    initializeRequest: ctx.initializeRequest,
    advertisement: ctx.advertisement,
    streams: copyCursors(ctx.cursors),
  };
}

/**
 * A record handed to the store must not change afterwards, and `cursors` is updated in place. Entries are
 * replaced, never mutated, so a shallow copy is enough. Stream keys are new on every call, and building a
 * plain object from ever-new keys costs V8 a hidden class per key (~28 µs for 50 keys); a null-prototype
 * object is a hash table from the start (~5 µs).
 */
function copyCursors(cursors: Record<string, StreamCursor>): Record<string, StreamCursor> {
  const copy: Record<string, StreamCursor> = Object.create(null);
  for (const key in cursors) copy[key] = cursors[key] as StreamCursor;
  return copy;
}

/** The request key of the initialize in flight, in the states that have one. */
export const initKey = (ctx: ClientContext, reinit: boolean): string | undefined => {
  const id = reinit ? ctx.reinitId : ctx.initializeRequest?.id;
  return id === undefined ? undefined : requestKey(id);
};
