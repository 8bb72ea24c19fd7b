import { type ActorRefFrom, and, assign, enqueueActions, setup } from 'xstate';
import { DEFAULT_RECONNECT_POLICY, type ReconnectPolicy, reconnectDelay } from '../backoff.js';
import { JsonRpcCode, OutcomeUnknownReason } from '../codes.js';
import type { GapDetails } from '../decide.js';
import {
  isRequest,
  isResponse,
  type JsonRpcError,
  type JsonRpcMessage,
  type JsonRpcRequest,
  type RequestId,
  requestKey,
} from '../jsonrpc.js';
import type { ServerAdvertisement } from '../validity.js';
import { type CursorRecord, recordBelongsTo, type StreamCursor } from './cursor.js';
import {
  defaultRetryPolicy,
  inboundOf,
  type Ledger,
  learnAnnotations,
  ledgerAdd,
  ledgerOnSessionLost,
  ledgerSettle,
  outcomeUnknownError,
  pendingByKey,
  pendingEntries,
  type RetryPolicy,
  type ToolAnnotations,
} from './ledger.js';
import {
  acceptableSessionId,
  DEFAULT_STALL_TIMEOUT_MS,
  MAX_DERIVED_STALL_MS,
  MIN_DERIVED_STALL_MS,
  timerMs,
} from './limits.js';
import type { PostFacts } from './post-failure.js';
import {
  type StreamInput,
  type StreamKind,
  type StreamOutcome,
  type StreamReport,
  streamMachine,
} from './stream.machine.js';

/**
 * The client's session: uninitialized → initializing → active ⇄ reinitializing, ending terminated
 * (server said `event: close`) or closed (the application closed it). Streams are child actors; their
 * faults never move this machine. Only a successful initialize, a 404, a close event or `app.close` do.
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
  | { type: 'app.send'; message: JsonRpcMessage }
  | { type: 'app.protocolVersion'; version: string }
  | { type: 'app.close' };

export interface StreamEntry {
  readonly ref: ActorRefFrom<typeof streamMachine>;
  readonly streamId: string;
  readonly kind: StreamKind;
  /** The child's actor id is `stream-<slot>`. */
  readonly slot: number;
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
  pool: Array<{ readonly ref: StreamEntry['ref']; readonly slot: number }>;
  slotCount: number;
}

export const STANDALONE_KEY = 'standalone';

const outcomeReason: Partial<Record<StreamOutcome['kind'], OutcomeUnknownReason>> = {
  'given-up': OutcomeUnknownReason.reconnectGivenUp,
  unresumable: OutcomeUnknownReason.streamUnresumable,
  'response-evicted': OutcomeUnknownReason.responseEvicted,
  'epoch-changed': OutcomeUnknownReason.epochChanged,
  'session-terminated': OutcomeUnknownReason.sessionLost,
  'closed-by-server': OutcomeUnknownReason.serverClosedSession,
};

function failedError(id: RequestId, status: number, body: unknown): JsonRpcError {
  if (status >= 300 && status < 400)
    return {
      jsonrpc: '2.0',
      id,
      error: {
        code: JsonRpcCode.UNEXPECTED_STATUS,
        message: `The server redirected (HTTP ${status}); redirects are never followed, so the session id, headers and call stay with the configured URL`,
        data: { status, body },
      },
    };
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: JsonRpcCode.UNEXPECTED_STATUS,
      message: `The server answered HTTP ${status}; the client does not guess what that means for the call`,
      data: { status, body },
    },
  };
}

function requestFailed(id: RequestId, message: string): JsonRpcError {
  return { jsonrpc: '2.0', id, error: { code: JsonRpcCode.REQUEST_FAILED, message } };
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
const initKey = (ctx: ClientContext, reinit: boolean): string | undefined => {
  const id = reinit ? ctx.reinitId : ctx.initializeRequest?.id;
  return id === undefined ? undefined : requestKey(id);
};

/** Takes a running stream out (a cancelled call's): stopped, not pooled, since it has not ended. */
function dropStream(context: ClientContext, key: string): StreamEntry | undefined {
  const entry = context.streams[key];
  delete context.streams[key];
  delete context.cursors[key];
  return entry;
}

/** The id a `notifications/cancelled` names, as the ledger keys it. */
function cancelledKey(message: JsonRpcMessage): string | undefined {
  if (!('method' in message) || message.method !== 'notifications/cancelled' || 'id' in message)
    return undefined;
  const id = message.params?.requestId;
  return typeof id === 'string' || typeof id === 'number' ? requestKey(id) : undefined;
}

/**
 * Inside `setup`'s own action definitions the named actions are not typed yet, so enqueueing one by name
 * needs this one narrow cast; the names are still checked against the list below.
 */
type NamedAction =
  | 'deliver'
  | 'deliverOrphan'
  | 'notifyGap'
  | 'persistCursor'
  | 'sendDelete'
  | 'reportError'
  | 'spawnStream'
  | 'cancelCall'
  | 'reportFailure';
const named = (enqueue: unknown) => enqueue as (action: { type: NamedAction; params?: unknown }) => void;

/**
 * Forgets an ended stream: its entry and cursor go (in place, see `ClientContext`), and its actor, which
 * has ended and does nothing more, waits in the pool to carry a later stream.
 */
function forgetStream(context: ClientContext, key: string): StreamEntry | undefined {
  const entry = context.streams[key];
  delete context.streams[key];
  delete context.cursors[key];
  if (entry) context.pool.push({ ref: entry.ref, slot: entry.slot });
  return entry;
}

type SpawnArgs = { key: string; kind: StreamKind; body?: JsonRpcMessage; lastEventId?: string };

export const clientSessionMachine = setup({
  types: {
    context: {} as ClientContext,
    input: {} as ClientInput,
    events: {} as ClientEvent,
  },
  actors: { stream: streamMachine },
  delays: {
    reinitDelay: ({ context }) => context.reinitDelayMs,
    /** A session that stays active this long has proved itself: re-initializes count from zero again. */
    sessionProven: ({ context }) => timerMs(context.config.policy.maxDelayMs),
  },
  actions: {
    /** Placeholders the runtime provides: hand a message to the application (SDK `onmessage`)… */
    deliver: (_, _params: { message: JsonRpcMessage }) => undefined,
    /** …a replayed response to a request this process never sent (after a client restart)… */
    deliverOrphan: (_, _params: { message: JsonRpcMessage }) => undefined,
    notifyGap: (_, _params: GapReport) => undefined,
    /** …write the cursor record (null: forget it)… */
    persistCursor: (_, _params: { record: CursorRecord | null }) => undefined,
    /** …terminate the session on the server (HTTP DELETE)… */
    sendDelete: (_, _params: { sessionId: string }) => undefined,
    /** …report a transport error that belongs to no request (SDK `onerror`)… */
    reportError: (_, _params: { message: string; detail?: unknown }) => undefined,
    /** …report that the transport has failed for good (SDK `onerror`, then `onclose`)… */
    reportFailure: (_, _params: { message: string; detail?: unknown }) => undefined,
    /** …and that the server ended the session (`event: close`): the transport is closed (SDK `onclose`). */
    reportTerminated: (_, _params: undefined) => undefined,

    /** Starts a stream: on an ended actor from the pool, else on a new one. */
    spawnStream: enqueueActions(({ context, enqueue }, args: SpawnArgs) => {
      const body = args.body;
      const request = args.kind === 'request' && body !== undefined && isRequest(body) ? body : undefined;
      const post: PostFacts = {
        initialize: request?.method === 'initialize',
        serverDeduplicates: context.advertisement?.duplicateRequestProtection === true,
        readOnly: request !== undefined && context.config.retryPolicy(request, context.annotations),
      };
      const input: StreamInput = {
        key: args.key,
        streamId: `${args.key}#${context.spawned}`,
        kind: args.kind,
        sessionId: context.sessionId,
        protocolVersion: context.protocolVersion,
        body,
        lastEventId: args.lastEventId,
        policy: context.config.policy,
        stallTimeoutMs: stallTimeoutFor(context.config, context.advertisement),
        jitterSeed: (context.config.seed + context.spawned * 7919) >>> 0,
        post,
      };
      if (args.kind !== 'message')
        context.cursors[args.key] = { kind: args.kind, lastEventId: args.lastEventId };
      const pooled = context.pool.pop();
      if (pooled) {
        enqueue.sendTo(pooled.ref, { type: 'stream.reuse', input });
        context.streams[args.key] = { ...pooled, streamId: input.streamId, kind: args.kind };
        enqueue.assign({ spawned: context.spawned + 1 });
        return;
      }
      const slot = context.slotCount;
      enqueue.assign(({ spawn }) => {
        const ref = spawn('stream', { id: `stream-${slot}`, input });
        context.streams[args.key] = { ref, streamId: input.streamId, kind: args.kind, slot };
        return { spawned: context.spawned + 1, slotCount: slot + 1 };
      });
    }),

    /** Sends an application message on the current session: a request gets its own stream. */
    dispatch: enqueueActions(({ context, enqueue }, { message }: { message: JsonRpcMessage }) => {
      named(enqueue)({ type: 'cancelCall', params: { message } });
      if (isRequest(message)) {
        ledgerAdd(context.ledger, message);
        named(enqueue)({
          type: 'spawnStream',
          params: { key: requestKey(message.id), kind: 'request', body: message },
        });
        return;
      }
      named(enqueue)({
        type: 'spawnStream',
        params: { key: `message:${context.spawned}`, kind: 'message', body: message },
      });
      if (
        'method' in message &&
        message.method === 'notifications/initialized' &&
        !context.streams[STANDALONE_KEY]
      ) {
        named(enqueue)({ type: 'spawnStream', params: { key: STANDALONE_KEY, kind: 'standalone' } });
      }
    }),

    /**
     * The application gave up on a call (`notifications/cancelled`, which the SDK also sends when its own
     * request timeout fires): the call's stream stops and its ledger entry goes; nothing is delivered for
     * it (the SDK has already ended it). The notification itself is still sent to the server.
     */
    cancelCall: enqueueActions(({ context, enqueue }, { message }: { message: JsonRpcMessage }) => {
      const key = cancelledKey(message);
      // The initialize is the session's, not a call: it runs to its end (the SDK gave up on connect anyway).
      if (key === undefined || key === initKey(context, false)) return;
      const pending = pendingByKey(context.ledger, key);
      if (pending) ledgerSettle(context.ledger, pending.request.id, 'failed');
      const entry = dropStream(context, key);
      if (entry) enqueue.stopChild(entry.ref);
      const queued = (m: JsonRpcMessage) => !(isRequest(m) && requestKey(m.id) === key);
      if (context.resendQueue.some((m) => !queued(m)) || context.queue.some((m) => !queued(m)))
        enqueue.assign({
          resendQueue: context.resendQueue.filter(queued),
          queue: context.queue.filter(queued),
        });
      if (pending || entry)
        named(enqueue)({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),

    startInitialize: enqueueActions(({ context, enqueue, event }) => {
      if (event.type !== 'app.send' || !isRequest(event.message)) return;
      enqueue.assign({ initializeRequest: event.message, ledger: ledgerAdd(context.ledger, event.message) });
      named(enqueue)({
        type: 'spawnStream',
        params: { key: requestKey(event.message.id), kind: 'request', body: event.message },
      });
    }),

    adoptSession: enqueueActions(({ context, enqueue, event }) => {
      if (event.type !== 'stream.opened' || event.sessionId === undefined) return;
      if (!acceptableSessionId(event.sessionId)) {
        named(enqueue)({
          type: 'reportError',
          params: { message: 'the server sent a session id that is too long or not visible ASCII; not used' },
        });
        return;
      }
      enqueue.assign({
        sessionId: event.sessionId,
        advertisement: event.advertisement ?? context.advertisement,
      });
    }),

    /**
     * A message from the server: settle the ledger and hand it on, or route a stranger's response aside.
     * The ledger is settled in place (see `ClientContext`); only learned annotations are assigned.
     */
    receive: enqueueActions(({ context, enqueue, event }) => {
      const messages =
        event.type === 'stream.messages'
          ? event.messages
          : event.type === 'stream.message' || event.type === 'stream.answered'
            ? [event]
            : [];
      // Learned across the whole batch, then assigned once: each assign would start from the old context.
      let annotations = context.annotations;
      for (const { message } of messages) {
        const inbound = inboundOf(context.ledger, context.config.requestOwner, message);
        if (inbound.kind === 'orphan') {
          named(enqueue)({ type: 'deliverOrphan', params: { message } });
          continue;
        }
        if (inbound.kind === 'answer' && isResponse(message)) {
          const answered = 'result' in message;
          ledgerSettle(context.ledger, inbound.entry.request.id, answered ? 'answered' : 'failed');
          if (answered && inbound.entry.request.method === 'tools/list')
            annotations = learnAnnotations(annotations, message.result);
        }
        named(enqueue)({ type: 'deliver', params: { message } });
      }
      if (annotations !== context.annotations) enqueue.assign({ annotations });
    }),

    /**
     * Several messages of one stream in one event (`stream.messages`), where the session's state may move
     * between them (initializing, re-initializing): raised again one by one, in order, each handled as
     * its own `stream.message`; the last carries the cursor.
     */
    receiveOneByOne: enqueueActions(({ enqueue, event }) => {
      if (event.type !== 'stream.messages') return;
      const last = event.messages.length - 1;
      event.messages.forEach((m, i) => {
        enqueue.raise({
          type: 'stream.message',
          key: event.key,
          streamId: event.streamId,
          eventId: m.eventId,
          message: m.message,
          ...(i === last ? { cursor: event.cursor } : {}),
        });
      });
    }),

    /**
     * A request stream's answer and its end (`stream.answered`): what `stream.message` and then
     * `stream.ended` (`done`) did, less the cursor write in between, which the stream's end removes again
     * before anyone could read it.
     */
    endAnswered: enqueueActions(({ context, enqueue, event }) => {
      if (event.type !== 'stream.answered') return;
      forgetStream(context, event.key);
      named(enqueue)({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),

    /** The cursor moved: recorded (in place, see `ClientContext`) and persisted. */
    recordCursor: enqueueActions(({ context, enqueue, event }) => {
      if (event.type !== 'stream.cursor') return;
      const existing = context.cursors[event.key];
      // Replaced, not mutated: a record already handed to the store holds the old entry.
      if (existing) context.cursors[event.key] = { ...existing, lastEventId: event.lastEventId };
      named(enqueue)({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),

    /**
     * A message that came as an SSE event carries its stream's cursor: recorded and persisted here as a
     * `stream.cursor` would be (streams send one event per message, not two). A report from a stream that
     * has been replaced moves nothing.
     */
    recordMessageCursor: enqueueActions(({ context, enqueue, event }) => {
      if ((event.type !== 'stream.message' && event.type !== 'stream.messages') || !event.cursor) return;
      if (context.streams[event.key]?.streamId !== event.streamId) return;
      const existing = context.cursors[event.key];
      if (existing) context.cursors[event.key] = { ...existing, lastEventId: event.cursor.lastEventId };
      named(enqueue)({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),

    /** The same, after events this transition raised: it keeps the order a separate `stream.cursor` had. */
    raiseMessageCursor: enqueueActions(({ enqueue, event }) => {
      if (event.type !== 'stream.message' || !event.cursor) return;
      enqueue.raise({
        type: 'stream.cursor',
        key: event.key,
        streamId: event.streamId,
        lastEventId: event.cursor.lastEventId,
      });
    }),

    persist: enqueueActions(({ context, enqueue }) => {
      named(enqueue)({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),

    forwardGap: enqueueActions(({ context, enqueue, event }) => {
      if (event.type !== 'stream.gap') return;
      named(enqueue)({
        type: 'notifyGap',
        params: { ...event.gap, streamKey: event.key, sessionId: context.sessionId },
      });
    }),

    /** A stream ended: forget it, and settle its request if it ended without an answer. */
    settleEndedStream: enqueueActions(({ context, enqueue, event }) => {
      if (event.type !== 'stream.ended') return;
      const entry = forgetStream(context, event.key);
      const outcome = event.outcome;
      const pending = entry?.kind === 'request' ? pendingByKey(context.ledger, event.key) : undefined;
      // A request stream that ended without its answer (a 202, a 204 or 405 to its resume) still ends its
      // call: nothing else will, short of the SDK's own timeout.
      if ((outcome.kind === 'done' || outcome.kind === 'stopped') && !pending) return;
      if (!pending) {
        named(enqueue)({
          type: 'reportError',
          params: { message: `stream ${event.key} ended: ${outcome.kind}`, detail: outcome },
        });
        // Whatever that stream would still have carried will not arrive: say so, size unknown. (A request
        // stream with no pending entry was restored from another process: its answer is lost too.)
        if (entry?.kind === 'standalone' || entry?.kind === 'request') {
          named(enqueue)({
            type: 'notifyGap',
            params: {
              streamKey: event.key,
              reason: outcome.kind,
              lostCount: null,
              sessionId: context.sessionId,
            },
          });
        }
        return;
      }
      const id = pending.request.id;
      if (outcome.kind === 'refused') {
        enqueue.assign({ ledger: ledgerSettle(context.ledger, id, 'failed') });
        named(enqueue)({
          type: 'deliver',
          params: { message: failedError(id, outcome.status, outcome.body) },
        });
        return;
      }
      const reason = outcomeReason[outcome.kind] ?? OutcomeUnknownReason.streamUnresumable;
      enqueue.assign({ ledger: ledgerSettle(context.ledger, id, 'outcome-unknown') });
      named(enqueue)({ type: 'deliver', params: { message: outcomeUnknownError(id, reason) } });
    }),

    stopAllStreams: enqueueActions(({ context, enqueue }) => {
      for (const entry of Object.values(context.streams)) enqueue.stopChild(entry.ref);
      for (const pooled of context.pool) enqueue.stopChild(pooled.ref);
      enqueue.assign({ streams: {}, cursors: {}, pool: [], slotCount: 0 });
    }),

    /** Every pending call ends as outcome unknown: the session or the transport is gone for good. */
    settleAllUnknown: enqueueActions(({ context, enqueue }, { reason }: { reason: OutcomeUnknownReason }) => {
      let ledger = context.ledger;
      for (const entry of pendingEntries(ledger)) {
        ledger = ledgerSettle(ledger, entry.request.id, 'outcome-unknown');
        named(enqueue)({
          type: 'deliver',
          params: { message: outcomeUnknownError(entry.request.id, reason) },
        });
      }
      // Requests waiting to be re-sent are still pending in the ledger: settled above, once.
      enqueue.assign({ ledger, resendQueue: [] });
    }),

    /**
     * The session is gone (404). Settle what was in flight: re-send what the policy allows, declare the
     * rest outcome unknown. Then initialize a new session with the application's original parameters.
     */
    loseSession: enqueueActions(({ context, enqueue }) => {
      const proven = new Set(context.provenUnexecuted);
      const policy: RetryPolicy = (request, annotations) =>
        proven.has(requestKey(request.id)) || context.config.retryPolicy(request, annotations);
      const lost = ledgerOnSessionLost(context.ledger, policy, context.annotations);
      for (const request of lost.unknown) {
        named(enqueue)({
          type: 'deliver',
          params: { message: outcomeUnknownError(request.id, OutcomeUnknownReason.sessionLost) },
        });
      }
      named(enqueue)({
        type: 'notifyGap',
        params: {
          streamKey: STANDALONE_KEY,
          reason: OutcomeUnknownReason.sessionLost,
          lostCount: null,
          sessionId: context.sessionId,
        },
      });
      named(enqueue)({ type: 'persistCursor', params: { record: null } });
      const reinitId = `mcp-continuity-reinit-${context.spawned}`;
      const backoff = context.config.policy;
      enqueue.assign({
        ledger: lost.ledger,
        resendQueue: [...context.resendQueue, ...lost.resend],
        sessionId: undefined,
        reinitId,
        provenUnexecuted: [],
        reinits: context.reinits + 1,
        // The first re-initialize is immediate (a restarted server); a session lost again before it proved
        // itself waits as a reconnect attempt would, so a server that 404s everything cannot make us spin.
        reinitDelayMs:
          context.reinits === 0
            ? 0
            : reconnectDelay(
                context.reinits - 1,
                backoff,
                undefined,
                (context.config.seed ^ 0x5bd1e995) >>> 0,
              ),
      });
    }),

    /** Sends the new session's initialize, with the application's original parameters. */
    spawnReinitialize: enqueueActions(({ context, enqueue }, { now }: { now: boolean }) => {
      const reinitId = context.reinitId;
      if (!context.initializeRequest || reinitId === undefined) return;
      // On entry only when there is no wait; when the wait ends only if there was one.
      if (now !== (context.reinitDelayMs === 0)) return;
      named(enqueue)({
        type: 'spawnStream',
        params: {
          key: requestKey(reinitId),
          kind: 'request',
          body: { ...context.initializeRequest, id: reinitId },
        },
      });
    }),

    forgetReinits: assign({ reinits: 0 }),

    /** The session is gone (404): nothing of it is kept, persisted or deleted on close. */
    forgetSession: enqueueActions(({ enqueue }) => {
      enqueue.assign({ sessionId: undefined });
      named(enqueue)({ type: 'persistCursor', params: { record: null } });
    }),

    /**
     * The session could not be re-established: the transport is failed for good; the application is told
     * why. Either the new session's initialize failed (its stream ended without an answer, or the server
     * answered it with an error), or sessions kept being lost as soon as they were made.
     */
    reportGivenUp: enqueueActions(({ context, enqueue, event }) => {
      const reinit = 'key' in event && event.key === initKey(context, true);
      const failure =
        event.type === 'stream.ended'
          ? event.outcome
          : event.type === 'stream.message'
            ? event.message
            : undefined;
      named(enqueue)({
        type: 'reportFailure',
        params: reinit
          ? { message: 'the session was lost and re-initializing it failed', detail: failure }
          : {
              message: `the session was lost ${context.reinits + 1} times in a row, each time soon after it was established; the client gave up re-initializing`,
              detail: { reinits: context.reinits + 1 },
            },
      });
    }),

    reportForeignRecord: enqueueActions(({ context, enqueue }) => {
      if (!context.foreignRecord) return;
      named(enqueue)({
        type: 'reportError',
        params: {
          message: `the cursor record names another server than ${context.config.serverUrl ?? 'this one'}: not used`,
        },
      });
      enqueue.assign({ foreignRecord: false });
    }),

    /** The new session answered: announce it, reopen the GET stream, re-send, then flush the queue. */
    completeReinitialize: enqueueActions(({ context, enqueue }) => {
      named(enqueue)({
        type: 'spawnStream',
        params: {
          key: `message:${context.spawned}`,
          kind: 'message',
          body: { jsonrpc: '2.0', method: 'notifications/initialized' },
        },
      });
      named(enqueue)({ type: 'spawnStream', params: { key: STANDALONE_KEY, kind: 'standalone' } });
      for (const request of context.resendQueue) {
        named(enqueue)({
          type: 'spawnStream',
          params: { key: requestKey(request.id), kind: 'request', body: request },
        });
      }
      for (const message of context.queue) enqueue.raise({ type: 'app.send', message });
      enqueue.assign({ resendQueue: [], queue: [], reinitId: undefined });
    }),

    resumeRestored: enqueueActions(({ context, enqueue }) => {
      const restored = context.restored;
      if (!restored) return;
      enqueue.assign({
        sessionId: restored.sessionId,
        protocolVersion: restored.protocolVersion,
        initializeRequest: restored.initializeRequest,
        advertisement: restored.advertisement,
        restored: undefined,
      });
      for (const [key, cursor] of Object.entries(restored.streams)) {
        if (cursor.lastEventId === undefined && cursor.kind === 'request') {
          // Died before its first event id: nothing to resume; its answer, if any, is unreachable.
          named(enqueue)({
            type: 'notifyGap',
            params: {
              streamKey: key,
              reason: OutcomeUnknownReason.streamUnresumable,
              lostCount: null,
              sessionId: restored.sessionId,
            },
          });
          continue;
        }
        named(enqueue)({
          type: 'spawnStream',
          params: { key, kind: cursor.kind, lastEventId: cursor.lastEventId },
        });
      }
      if (!restored.streams[STANDALONE_KEY])
        named(enqueue)({ type: 'spawnStream', params: { key: STANDALONE_KEY, kind: 'standalone' } });
    }),

    noteUnexecuted: assign({
      provenUnexecuted: ({ context, event }) =>
        event.type === 'stream.ended' && event.outcome.kind === 'session-terminated' && event.outcome.neverRan
          ? [...context.provenUnexecuted, event.key]
          : context.provenUnexecuted,
    }),

    queueMessage: enqueueActions(({ enqueue, event }) => {
      if (event.type !== 'app.send') return;
      named(enqueue)({ type: 'cancelCall', params: { message: event.message } });
      enqueue.assign(({ context: now }) => ({ queue: [...now.queue, event.message] }));
    }),

    /** Requests held while the session was being re-established, which will now never be sent: they fail. */
    rejectQueued: enqueueActions(({ context, enqueue }) => {
      for (const message of context.queue) {
        if (!isRequest(message)) continue;
        named(enqueue)({
          type: 'deliver',
          params: { message: requestFailed(message.id, 'The session has ended; create a new transport') },
        });
      }
      enqueue.assign({ queue: [] });
    }),

    rejectAfterEnd: enqueueActions(({ enqueue, event }) => {
      if (event.type !== 'app.send' || !isRequest(event.message)) return;
      named(enqueue)({
        type: 'deliver',
        params: { message: requestFailed(event.message.id, 'The session has ended; create a new transport') },
      });
    }),

    rememberProtocolVersion: assign({
      protocolVersion: ({ context, event }) =>
        event.type === 'app.protocolVersion' ? event.version : context.protocolVersion,
    }),

    deleteSession: enqueueActions(({ context, enqueue }) => {
      if (context.sessionId !== undefined)
        named(enqueue)({ type: 'sendDelete', params: { sessionId: context.sessionId } });
      named(enqueue)({ type: 'persistCursor', params: { record: null } });
    }),
  },
  guards: {
    hasRestoredSession: ({ context }) => context.restored !== undefined,
    isStaleReport: ({ context, event }) =>
      'streamId' in event && context.streams[event.key]?.streamId !== event.streamId,
    isInitialize: ({ event }) =>
      event.type === 'app.send' && isRequest(event.message) && event.message.method === 'initialize',
    isRequestMessage: ({ event }) => event.type === 'app.send' && isRequest(event.message),
    isInitAnswer: ({ context, event }) =>
      event.type === 'stream.message' && event.key === initKey(context, false),
    isReinitAnswer: ({ context, event }) =>
      event.type === 'stream.message' && event.key === initKey(context, true) && 'result' in event.message,
    isReinitRejected: ({ context, event }) =>
      event.type === 'stream.message' && event.key === initKey(context, true) && !('result' in event.message),
    isInitAccepted: ({ event }) => event.type === 'stream.message' && 'result' in event.message,
    initStreamFailed: ({ context, event }) =>
      event.type === 'stream.ended' && event.outcome.kind !== 'done' && event.key === initKey(context, false),
    /** The session was lost more often in a row than the policy retries: stop re-initializing. */
    reinitsExhausted: ({ context }) => context.reinits > context.config.policy.maxRetries,
    reinitStreamFailed: ({ context, event }) =>
      event.type === 'stream.ended' && event.outcome.kind !== 'done' && event.key === initKey(context, true),
    /** 404 on a session-scoped request: the only transport report that ends a session. */
    sessionTerminated: ({ event }) =>
      event.type === 'stream.ended' && event.outcome.kind === 'session-terminated',
    closedByServer: ({ event }) => event.type === 'stream.ended' && event.outcome.kind === 'closed-by-server',
  },
}).createMachine({
  id: 'client',
  context: ({ input }) => ({
    config: {
      policy: input.policy ?? DEFAULT_RECONNECT_POLICY,
      stallTimeoutMs: input.stallTimeoutMs,
      retryPolicy: input.retryPolicy ?? defaultRetryPolicy,
      seed: input.seed ?? 1,
      serverUrl: input.serverUrl,
      requestOwner: input.requestOwner,
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
    slotCount: 0,
  }),
  initial: 'uninitialized',
  on: {
    'stream.message': { guard: 'isStaleReport' },
    'stream.messages': { guard: 'isStaleReport' },
    'stream.answered': [{ guard: 'isStaleReport' }, { actions: ['receive', 'endAnswered'] }],
    'stream.cursor': [{ guard: 'isStaleReport' }, { actions: 'recordCursor' }],
    'stream.gap': [{ guard: 'isStaleReport' }, { actions: 'forwardGap' }],
    'stream.opened': { guard: 'isStaleReport' },
    'stream.ended': [{ guard: 'isStaleReport' }, { actions: ['settleEndedStream', 'persist'] }],
    'app.protocolVersion': { actions: 'rememberProtocolVersion' },
    'app.close': {
      target: '.closed',
      actions: [
        'stopAllStreams',
        { type: 'settleAllUnknown', params: { reason: OutcomeUnknownReason.transportClosed } },
        'rejectQueued',
        'deleteSession',
      ],
    },
  },
  states: {
    uninitialized: {
      entry: 'reportForeignRecord',
      always: { guard: 'hasRestoredSession', target: 'active', actions: ['resumeRestored', 'persist'] },
      on: {
        'app.send': [
          { guard: 'isInitialize', target: 'initializing', actions: 'startInitialize' },
          { guard: 'isRequestMessage', actions: 'rejectAfterEnd' },
        ],
      },
    },
    initializing: {
      on: {
        'stream.opened': { actions: 'adoptSession' },
        'stream.message': [
          { guard: 'isStaleReport' },
          {
            guard: and(['isInitAnswer', 'isInitAccepted']),
            target: 'active',
            actions: ['receive', 'persist', 'recordMessageCursor'],
          },
          { guard: 'isInitAnswer', target: 'uninitialized', actions: ['receive', 'recordMessageCursor'] },
          { actions: ['receive', 'recordMessageCursor'] },
        ],
        'stream.messages': { actions: 'receiveOneByOne' },
        'stream.ended': [
          { guard: 'isStaleReport' },
          {
            guard: 'initStreamFailed',
            target: 'uninitialized',
            actions: ['settleEndedStream', 'rejectQueued'],
          },
        ],
        'app.send': { actions: 'queueMessage' },
      },
    },
    active: {
      after: { sessionProven: { actions: 'forgetReinits' } },
      on: {
        'app.send': { actions: { type: 'dispatch', params: ({ event }) => ({ message: event.message }) } },
        'stream.message': { actions: ['receive', 'recordMessageCursor'] },
        'stream.messages': { actions: ['receive', 'recordMessageCursor'] },
        // A stale stream's answer is still delivered, as a stale `stream.message` is here.
        'stream.answered': [
          { guard: 'isStaleReport', actions: 'receive' },
          { actions: ['receive', 'endAnswered'] },
        ],
        'stream.ended': [
          { guard: 'isStaleReport' },
          {
            guard: and(['sessionTerminated', 'reinitsExhausted']),
            target: 'failed',
            actions: 'noteUnexecuted',
          },
          { guard: 'sessionTerminated', target: 'reinitializing', actions: 'noteUnexecuted' },
          { guard: 'closedByServer', target: 'terminated' },
        ],
      },
    },
    reinitializing: {
      // An atomic state (its value stays `reinitializing`): the initialize goes out at once, or after the
      // backoff `loseSession` chose.
      entry: ['stopAllStreams', 'loseSession', { type: 'spawnReinitialize', params: { now: true } }],
      after: { reinitDelay: { actions: { type: 'spawnReinitialize', params: { now: false } } } },
      on: {
        'stream.opened': { actions: 'adoptSession' },
        'stream.message': [
          { guard: 'isStaleReport' },
          {
            guard: 'isReinitAnswer',
            target: 'active',
            actions: ['completeReinitialize', 'persist', 'raiseMessageCursor'],
          },
          { guard: 'isReinitRejected', target: 'failed' },
          { actions: ['receive', 'recordMessageCursor'] },
        ],
        'stream.messages': { actions: 'receiveOneByOne' },
        'stream.ended': [{ guard: 'isStaleReport' }, { guard: 'reinitStreamFailed', target: 'failed' }],
        'app.send': { actions: 'queueMessage' },
      },
    },
    terminated: {
      entry: [
        'stopAllStreams',
        { type: 'settleAllUnknown', params: { reason: OutcomeUnknownReason.serverClosedSession } },
        'rejectQueued',
        'persist',
        'reportTerminated',
      ],
      on: { 'app.send': { actions: 'rejectAfterEnd' } },
    },
    /**
     * The session could not be re-established: its new initialize failed, or it kept being lost soon after
     * it was made (a server that 404s everything after initialize). Every call has ended; the transport
     * reports the failure (`MCPC_REINITIALIZE_GIVEN_UP`) and closes.
     */
    failed: {
      entry: [
        'stopAllStreams',
        { type: 'settleAllUnknown', params: { reason: OutcomeUnknownReason.sessionLost } },
        'rejectQueued',
        'forgetSession',
        'reportGivenUp',
      ],
      on: { 'app.send': { actions: 'rejectAfterEnd' } },
    },
    closed: { type: 'final' },
  },
});
