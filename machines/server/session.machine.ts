import { assign, emit, enqueueActions, setup } from 'xstate';
import { JsonRpcCode, OutcomeUnknownReason } from '../codes.js';
import { parseEventId, STANDALONE_STREAM } from '../event-id.js';
import { DEFAULT_REQUEST_MEMORY, forgetPoint, forgotten } from './request-memory.js';
import { answerCursor, type ResumeAnswer, type StreamWindow } from './retention.js';

/**
 * One server session: live (idle ⇄ busy) until it expires (idle TTL), is terminated (DELETE) or the server
 * shuts down. It numbers streams, remembers every request id it admitted (so a re-sent POST is never run
 * twice), and answers every cursor. Storage and sockets are the runtime's; every decision is here.
 *
 * Answers are emitted as `decision.*` events; the runtime relays them to HTTP.
 */
export interface ServerSessionInput {
  readonly sessionId: string;
  /** Random per log incarnation (see event-id.ts). */
  readonly epoch: string;
  readonly idleTtlMs: number;
  /** Who created the session; another principal presenting the id is answered as if it did not exist. */
  readonly principal?: string;
  /**
   * Several server instances share this session through a store (Redis). Then being idle here says nothing
   * about the others: when the idle TTL runs out the machine asks the store how long the session has been
   * idle everywhere (`expiry.due` → `expiry.checked`) before it expires.
   */
  readonly sharedStore?: boolean;
  /** Requests that may run at once here; another one is refused (`limited`). Default: no bound. */
  readonly maxInFlight?: number;
  /** Request ids remembered (machines/server/request-memory.ts). Default: `DEFAULT_REQUEST_MEMORY`. */
  readonly requestMemory?: number;
}

export type RequestDecision =
  /** Run the request; its messages go on `stream`. */
  | { kind: 'execute'; stream: number }
  /** Seen before: never run again. Replay `stream` from its start (or point the client at it). */
  | { kind: 'duplicate'; stream: number }
  /** `maxInFlight` requests run already: refused, nothing recorded (the client may send it again later). */
  | { kind: 'limited' }
  | { kind: 'unknown-session' };

/**
 * A GET without Last-Event-ID opens the standalone stream. The first one replays what was retained since
 * the session began (messages sent before any GET are kept, not dropped); a later one has had its chance
 * to keep a cursor, so it starts at the head.
 */
export type AttachDecision =
  | { kind: 'attach'; stream: number; from: 'start' | 'head' }
  | { kind: 'unknown-session' };

export type ServerSessionEvent =
  /** `owner`: the instance that will run the request (several instances share the session). */
  | { type: 'request.received'; requestKey: string; principal?: string; owner?: string }
  /** The SDK server answered the request: its answer is stored. */
  | { type: 'request.settled'; requestKey: string }
  /**
   * The SDK server will never answer a running request: the client cancelled it (the SDK drops the
   * answer of a cancelled call), the SDK rejected the message, or its answer could not be stored or the
   * SDK could not be reached. Without this the request would keep the session busy forever.
   */
  | { type: 'request.unanswered'; requestKey: string; cause: UnansweredCause }
  /** A POSTed notification or response: no stream, just admission. */
  | { type: 'message.received'; principal?: string }
  | { type: 'standalone.requested'; principal?: string }
  /** The server sent a message that belongs to no request: it goes on the standalone stream. */
  | { type: 'standalone.used' }
  | { type: 'resume.requested'; lastEventId: string; window: StreamWindow | undefined; principal?: string }
  | { type: 'stream.attached' }
  | { type: 'stream.detached' }
  | { type: 'session.activity' }
  /**
   * A newer snapshot was adopted from the shared store. What is attached and running *here* is a local
   * fact the snapshot cannot carry (another instance wrote it), so the runtime states it.
   */
  | { type: 'session.synced'; attached: number; running: Record<string, number> }
  /** The answer to `expiry.due`: how long the session has been idle on every instance. */
  | { type: 'expiry.checked'; idleMs: number }
  /**
   * The runtime let the idle session sleep (kept only as a persisted snapshot, which carries no timer)
   * and wakes it now, `idleMs` after its last activity: the idle clock goes on from there.
   */
  | { type: 'session.woken'; idleMs: number }
  /** Another instance ended the session (DELETE or expiry); this instance ends its copy. */
  | { type: 'session.gone'; reason: 'expired' | 'terminated' }
  /** Restored from a durable log by a new process: no stream is attached and nothing runs here yet. */
  | { type: 'session.restored' }
  | { type: 'session.delete'; principal?: string }
  | { type: 'log.reset'; epoch: string }
  /** The process is stopping. With a durable log the session outlives it; otherwise it ends here. */
  | { type: 'server.stopping'; durableLog: boolean };

export type ServerSessionEmitted =
  | { type: 'decision.request'; decision: RequestDecision }
  | { type: 'decision.attach'; decision: AttachDecision }
  | { type: 'decision.resume'; answer: ResumeAnswer }
  | { type: 'decision.delete'; accepted: boolean }
  | { type: 'decision.message'; accepted: boolean }
  /**
   * A running request was settled without the SDK's answer: the runtime stops routing to it and ends its
   * stream, after storing `answer` as its final message when there is one.
   */
  | {
      type: 'decision.unanswered';
      requestKey: string;
      stream: number;
      answer: { code: number; message: string; data?: { reason: string } } | undefined;
    }
  /** Entered an end state: attached streams get `event: close` with this reason, then end. */
  | { type: 'session.ended'; reason: 'expired' | 'terminated' | 'shutdown' }
  /** The process stops but the session lives on in a durable log: end streams without `event: close`, so clients resume. */
  | { type: 'session.released' }
  /** Shared store only: the idle TTL ran out here; how long has the session been idle everywhere? */
  | { type: 'expiry.due' };

/**
 * Why a request gets no answer from the SDK: `cancelled` by the client, `rejected` by the SDK before it
 * ran, `failed` before it reached the handler, or `unstored`: the handler ran and answered, but the log
 * would not take the answer, so what it said is lost while its side effects are not.
 */
export type UnansweredCause = 'cancelled' | 'rejected' | 'failed' | 'unstored';

/**
 * What the client gets for a request the SDK will not answer. A cancelled request gets nothing: the
 * client asked for no answer (MCP: a cancelled request SHOULD NOT be answered) and its stream just ends.
 * The others get an error, so the call ends at once instead of at the client's timeout. An unstored
 * answer is *outcome unknown*, never a failure: the tool ran (a charge landed), only its answer is lost.
 */
export function unansweredAnswer(
  cause: UnansweredCause,
): { code: number; message: string; data?: { reason: string } } | undefined {
  if (cause === 'cancelled') return undefined;
  if (cause === 'rejected') return { code: JsonRpcCode.INVALID_REQUEST, message: 'Invalid Request' };
  if (cause === 'unstored') {
    return {
      code: JsonRpcCode.OUTCOME_UNKNOWN,
      message: 'Outcome unknown: the request ran, but its answer could not be stored',
      data: { reason: OutcomeUnknownReason.answerUnstored },
    };
  }
  return { code: JsonRpcCode.INTERNAL_ERROR, message: 'Internal error: the request was not answered' };
}

interface StreamRecord {
  readonly kind: 'request' | 'standalone';
  readonly requestKey?: string;
  /** The instance running the request, when instances share the session. */
  readonly owner?: string;
}

export interface ServerSessionContext {
  sessionId: string;
  principal: string | undefined;
  epoch: string;
  previousEpochs: string[];
  idleTtlMs: number;
  /** The next idle timer, when it is shorter than the TTL (part of the session was idle elsewhere). */
  idleDelayMs: number | undefined;
  sharedStore: boolean;
  nextStream: number;
  streams: Record<number, StreamRecord>;
  /**
   * The request ids admitted in this session → their stream, for streams from `forgottenBelow` on: the
   * bounded request-id memory of machines/server/request-memory.ts (`streams` is bounded with it).
   */
  requests: Record<string, number>;
  /** Streams numbered below this are forgotten (absent: 1, a snapshot from before the bound). */
  forgottenBelow?: number;
  /** How many request streams are remembered (absent: `DEFAULT_REQUEST_MEMORY`). */
  requestMemory?: number;
  /**
   * Requests running on this instance → their stream: admitted, not yet answered or given up. A local
   * fact like `attached` (restated by `session.synced`); `inFlight` is its size.
   */
  running: Record<string, number>;
  inFlight: number;
  /** `ServerSessionInput.maxInFlight`; undefined: no bound. */
  maxInFlight: number | undefined;
  attached: number;
  /** A GET without a cursor has opened the standalone stream before. */
  standaloneOpened: boolean;
}

/**
 * The part of a session's state every instance sharing it must agree on (streams numbered, the
 * standalone stream opened, the epoch, ended or not), as a comparable string. When a decision changes
 * it, the decision is committed to the shared store; counts of what is attached or running on one
 * instance are that instance's own and never committed for their own sake.
 */
export function sharedFacts(snapshot: { context: ServerSessionContext; value: unknown }): string {
  const c = snapshot.context;
  const ended = typeof snapshot.value === 'object' && snapshot.value !== null && 'ended' in snapshot.value;
  return `${c.nextStream}|${c.standaloneOpened}|${STANDALONE_STREAM in c.streams}|${c.epoch}|${ended}`;
}

/**
 * May `caller` use a session created by `owner`? A session made without `authenticate` has no owner
 * and is anyone's who knows its id.
 */
export const ownsSession = (owner: string | undefined, caller: string | undefined): boolean =>
  owner === undefined || caller === owner;

const ownerMismatch = (ctx: ServerSessionContext, event: { principal?: string }): boolean =>
  !ownsSession(ctx.principal, event.principal);

export const serverSessionMachine = setup({
  types: {
    context: {} as ServerSessionContext,
    input: {} as ServerSessionInput,
    events: {} as ServerSessionEvent,
    emitted: {} as ServerSessionEmitted,
  },
  delays: {
    idleTtl: ({ context }) => context.idleDelayMs ?? context.idleTtlMs,
  },
  guards: {
    isBusy: ({ context }) => context.attached > 0 || context.inFlight > 0,
    isSharedStore: ({ context }) => context.sharedStore,
    idleEverywhere: ({ context, event }) =>
      event.type === 'expiry.checked' && event.idleMs >= context.idleTtlMs,
    sleptPastTtl: ({ context, event }) => event.type === 'session.woken' && event.idleMs >= context.idleTtlMs,
    sleptPastTtlShared: ({ context, event }) =>
      context.sharedStore && event.type === 'session.woken' && event.idleMs >= context.idleTtlMs,
    goneByExpiry: ({ event }) => event.type === 'session.gone' && event.reason === 'expired',
    hasDurableLog: ({ event }) => event.type === 'server.stopping' && event.durableLog,
    isForeignPrincipal: ({ context, event }) => 'principal' in event && ownerMismatch(context, event),
    isDuplicateRequest: ({ context, event }) =>
      event.type === 'request.received' && context.requests[event.requestKey] !== undefined,
    atRequestLimit: ({ context }) =>
      context.maxInFlight !== undefined && context.inFlight >= context.maxInFlight,
    isRunning: ({ context, event }) =>
      (event.type === 'request.settled' || event.type === 'request.unanswered') &&
      context.running?.[event.requestKey] !== undefined,
  },
  actions: {
    admitRequest: enqueueActions(({ context, enqueue, event }) => {
      if (event.type !== 'request.received') return;
      const stream = context.nextStream;
      // These records grow for the session's life; copying them on every request made a long session
      // quadratic. They are updated in place: nothing outside this machine keeps a reference to them.
      context.streams[stream] = { kind: 'request', requestKey: event.requestKey, owner: event.owner };
      context.requests[event.requestKey] = stream;
      // The memory is bounded: streams that fell behind the forget point go with their request ids.
      const before = context.forgottenBelow ?? 1;
      const after = forgetPoint(stream + 1, before, context.requestMemory ?? DEFAULT_REQUEST_MEMORY);
      for (let n = Math.max(before, STANDALONE_STREAM + 1); n < after; n++) {
        const key = context.streams[n]?.requestKey;
        if (key !== undefined && context.requests[key] === n) delete context.requests[key];
        delete context.streams[n];
      }
      const running = { ...context.running, [event.requestKey]: stream };
      enqueue.assign({
        nextStream: stream + 1,
        forgottenBelow: after,
        streams: context.streams,
        requests: context.requests,
        running,
        inFlight: Object.keys(running).length,
      });
      enqueue.emit({ type: 'decision.request', decision: { kind: 'execute', stream } });
    }),
    answerDuplicate: emit(({ context, event }) => ({
      type: 'decision.request' as const,
      decision: {
        kind: 'duplicate' as const,
        stream: context.requests[(event as { requestKey: string }).requestKey] as number,
      },
    })),
    settleRequest: assign(({ context, event }) => {
      if (event.type !== 'request.settled' && event.type !== 'request.unanswered') return {};
      const running = { ...context.running };
      delete running[event.requestKey];
      return { running, inFlight: Object.keys(running).length };
    }),
    answerUnanswered: emit(({ context, event }) => {
      const e = event as Extract<ServerSessionEvent, { type: 'request.unanswered' }>;
      return {
        type: 'decision.unanswered' as const,
        requestKey: e.requestKey,
        stream: context.running?.[e.requestKey] as number,
        answer: unansweredAnswer(e.cause),
      };
    }),
    registerStandalone: assign(({ context }) =>
      context.streams[STANDALONE_STREAM]
        ? {}
        : { streams: { ...context.streams, [STANDALONE_STREAM]: { kind: 'standalone' as const } } },
    ),
    attachStandalone: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ standaloneOpened: true });
      enqueue.emit({
        type: 'decision.attach',
        decision: {
          kind: 'attach',
          stream: STANDALONE_STREAM,
          from: context.standaloneOpened ? 'head' : 'start',
        },
      });
    }),
    /** The answer to Last-Event-ID. Named so a test can swap in the design note's broken server. */
    answerResume: emit(({ context, event }) => {
      const e = event as Extract<ServerSessionEvent, { type: 'resume.requested' }>;
      const known = new Set(Object.keys(context.streams).map(Number));
      // A forgotten stream is still this session's: the log's window answers a cursor into it.
      const cursor = parseEventId(e.lastEventId);
      if (cursor && forgotten(cursor.stream, context.forgottenBelow ?? 1)) known.add(cursor.stream);
      return {
        type: 'decision.resume' as const,
        answer: answerCursor(e.lastEventId, {
          epoch: context.epoch,
          previousEpochs: context.previousEpochs,
          knownStreams: known,
          window: e.window,
        }),
      };
    }),
    attached: assign({ attached: ({ context }) => context.attached + 1 }),
    detached: assign({ attached: ({ context }) => Math.max(0, context.attached - 1) }),
    resetLog: assign(({ context, event }) =>
      event.type === 'log.reset'
        ? {
            epoch: event.epoch,
            previousEpochs: [...context.previousEpochs, context.epoch],
            streams: {},
            nextStream: 1,
          }
        : {},
    ),
    acceptDelete: emit({ type: 'decision.delete', accepted: true }),
    answerUnknownSession: enqueueActions(({ enqueue, event }) => {
      if (event.type === 'request.received') {
        enqueue.emit({ type: 'decision.request', decision: { kind: 'unknown-session' } });
      } else if (event.type === 'standalone.requested') {
        enqueue.emit({ type: 'decision.attach', decision: { kind: 'unknown-session' } });
      } else if (event.type === 'resume.requested') {
        enqueue.emit({ type: 'decision.resume', answer: { kind: 'unknown-session' } });
      } else if (event.type === 'session.delete') {
        enqueue.emit({ type: 'decision.delete', accepted: false });
      } else if (event.type === 'message.received') {
        enqueue.emit({ type: 'decision.message', accepted: false });
      }
    }),
  },
}).createMachine({
  id: 'serverSession',
  context: ({ input }) => ({
    sessionId: input.sessionId,
    principal: input.principal,
    epoch: input.epoch,
    previousEpochs: [],
    idleTtlMs: input.idleTtlMs,
    idleDelayMs: undefined,
    sharedStore: input.sharedStore ?? false,
    nextStream: 1,
    streams: {},
    requests: {},
    running: {},
    inFlight: 0,
    maxInFlight: input.maxInFlight,
    requestMemory: input.requestMemory,
    attached: 0,
    standaloneOpened: false,
  }),
  initial: 'live',
  states: {
    live: {
      initial: 'idle',
      on: {
        // A principal that does not own the session is told it does not exist (no oracle for ids).
        'request.received': [
          { guard: 'isForeignPrincipal', actions: 'answerUnknownSession' },
          { guard: 'isDuplicateRequest', actions: 'answerDuplicate' },
          {
            guard: 'atRequestLimit',
            actions: emit({ type: 'decision.request', decision: { kind: 'limited' } }),
          },
          { target: '.busy', actions: 'admitRequest' },
        ],
        // A request settles once: a late or repeated report about it changes nothing.
        'request.settled': { guard: 'isRunning', target: '.settling', actions: 'settleRequest' },
        // Emitted before settling: the runtime reads the stream from the answer, not from the context.
        'request.unanswered': {
          guard: 'isRunning',
          target: '.settling',
          actions: ['answerUnanswered', 'settleRequest'],
        },
        'message.received': [
          { guard: 'isForeignPrincipal', actions: 'answerUnknownSession' },
          { actions: emit({ type: 'decision.message', accepted: true }) },
        ],
        'standalone.requested': [
          { guard: 'isForeignPrincipal', actions: 'answerUnknownSession' },
          { actions: ['registerStandalone', 'attachStandalone'] },
        ],
        'resume.requested': [
          { guard: 'isForeignPrincipal', actions: 'answerUnknownSession' },
          { actions: 'answerResume' },
        ],
        'stream.attached': { target: '.busy', actions: 'attached' },
        // Re-entering idle also re-arms the TTL timer, which a restored snapshot does not do by itself.
        'session.restored': {
          target: '.settling',
          actions: assign({ attached: 0, running: {}, inFlight: 0 }),
        },
        'session.synced': {
          target: '.settling',
          actions: assign(({ event }) => ({
            attached: event.attached,
            running: { ...event.running },
            inFlight: Object.keys(event.running).length,
          })),
        },
        'session.gone': [{ guard: 'goneByExpiry', target: 'ended.expired' }, { target: 'ended.terminated' }],
        'stream.detached': { target: '.settling', actions: 'detached' },
        'standalone.used': { actions: 'registerStandalone' },
        'log.reset': { actions: 'resetLog' },
        'session.delete': [
          { guard: 'isForeignPrincipal', actions: 'answerUnknownSession' },
          { target: 'ended.terminated', actions: 'acceptDelete' },
        ],
        'server.stopping': [
          { guard: 'hasDurableLog', actions: emit({ type: 'session.released' }) },
          { target: 'ended.shutDown' },
        ],
      },
      states: {
        idle: {
          after: {
            idleTtl: [
              { guard: 'isSharedStore', target: 'checkingExpiry' },
              { target: '#serverSession.ended.expired' },
            ],
          },
          on: {
            // Any request restarts the idle clock.
            'session.activity': { target: 'idle', reenter: true },
            'session.woken': [
              { guard: 'sleptPastTtlShared', target: 'checkingExpiry' },
              { guard: 'sleptPastTtl', target: '#serverSession.ended.expired' },
              {
                target: 'idle',
                reenter: true,
                actions: assign(({ context, event }) => ({
                  idleDelayMs: Math.max(1, context.idleTtlMs - (event as { idleMs: number }).idleMs),
                })),
              },
            ],
          },
          exit: assign({ idleDelayMs: undefined }),
        },
        /** Shared store: idle here for a TTL; expire only if idle as long everywhere, else wait the rest. */
        checkingExpiry: {
          entry: emit({ type: 'expiry.due' }),
          on: {
            'session.activity': { target: 'idle' },
            'expiry.checked': [
              { guard: 'idleEverywhere', target: '#serverSession.ended.expired' },
              {
                target: 'idle',
                actions: assign(({ context, event }) => ({
                  idleDelayMs: Math.max(1, context.idleTtlMs - event.idleMs),
                })),
              },
            ],
          },
        },
        busy: {},
        /** Transient: after something finished, is anything still going on? */
        settling: {
          always: [{ guard: 'isBusy', target: 'busy' }, { target: 'idle' }],
        },
      },
    },
    ended: {
      initial: 'terminated',
      on: {
        'request.received': { actions: 'answerUnknownSession' },
        'standalone.requested': { actions: 'answerUnknownSession' },
        'resume.requested': { actions: 'answerUnknownSession' },
        'session.delete': { actions: 'answerUnknownSession' },
        'message.received': { actions: 'answerUnknownSession' },
      },
      states: {
        expired: { entry: emit({ type: 'session.ended', reason: 'expired' }) },
        terminated: { entry: emit({ type: 'session.ended', reason: 'terminated' }) },
        shutDown: { entry: emit({ type: 'session.ended', reason: 'shutdown' }) },
      },
    },
  },
});
