import { and, assign, enqueueActions, fromCallback, fromPromise, sendParent, setup } from 'xstate';
import { type ReconnectPolicy, reconnectDelay } from '../backoff.js';
import { StopReason } from '../codes.js';
import { type CloseDecision, classifyClose, type GapDetails } from '../decide.js';
import type { JsonRpcMessage } from '../jsonrpc.js';
import type { ServerAdvertisement } from '../validity.js';
import { type Absorbed, absorbEvents, type DeliveredMessage, rememberIds } from './absorb.js';
import {
  type AuthChallenge,
  type AuthorizationResult,
  afterUnauthorized,
  challengeOf,
  decideChallenge,
  provesNotRun,
} from './authorization.js';
import type { Exchange, IoEvent, SseEvent } from './io.js';
import { serverRetryFloor } from './limits.js';
import { isJsonRpcErrorBody, notFoundClose } from './not-found.js';
import { decidePostFailure, type PostFacts } from './post-failure.js';
import { asJsonRpcMessage } from './wire.js';

/**
 * One SSE stream of a client: connecting → streaming → backoff → … until it ends. It owns its cursor
 * (Last-Event-ID) and classifies every close with the design note's procedure. It never touches the
 * session: it reports to its parent, which alone moves the session region.
 *
 * Kinds: `request` (a POST whose answer may stream), `standalone` (the GET stream), `message` (a POST of a
 * notification or response, answered 202).
 */
export type StreamKind = 'request' | 'standalone' | 'message';

export interface StreamInput {
  /** The parent's name for this stream: the request's ledger key, or `standalone`. */
  readonly key: string;
  /** Unique per spawned stream, echoed in every report so the parent can drop a stale one. */
  readonly streamId: string;
  readonly kind: StreamKind;
  readonly sessionId?: string;
  readonly protocolVersion?: string;
  readonly body?: JsonRpcMessage;
  /** A cursor restored from the cursor store: resume instead of POSTing. */
  readonly lastEventId?: string;
  readonly policy: ReconnectPolicy;
  /**
   * No byte for this long counts as a reset, in every phase of an exchange: connecting, waiting for the
   * headers, reading a JSON body or an event stream. 0 turns stall detection off.
   */
  readonly stallTimeoutMs: number;
  readonly jitterSeed: number;
  /** What the session knew of the POSTed request, for `decidePostFailure` (machines/client/post-failure.ts). */
  readonly post: PostFacts;
  /** The application gave an `authProvider`: a 401 (or 403 insufficient_scope) is answered by authorizing. */
  readonly authorize?: boolean;
}

/** How a stream ended, reported to the parent. */
export type StreamOutcome =
  | { kind: 'done' }
  | { kind: 'closed-by-server' }
  /** `neverRan`: the 404 answered the request's own POST, so it cannot have run. */
  | { kind: 'session-terminated'; neverRan: boolean }
  | { kind: 'stopped'; reason: string }
  /**
   * Retries ran out. `neverRan`: a call's stream whose every attempt was refused before a byte left (no
   * connection, or no token to send): a definite failure, not an outcome unknown.
   */
  | { kind: 'given-up'; reason: string; neverRan?: boolean }
  | { kind: 'unresumable' }
  | { kind: 'response-evicted' }
  | { kind: 'epoch-changed' }
  | { kind: 'refused'; status: number; body?: unknown }
  /**
   * Authorization could not give a token (it failed, or needs the user), and the request never ran: it
   * ends with the SDK's `UnauthorizedError` (authorization.ts, `afterUnauthorized`).
   */
  | { kind: 'unauthorized'; status: number; body?: unknown };

export type StreamReport =
  | {
      type: 'stream.opened';
      key: string;
      streamId: string;
      sessionId?: string;
      advertisement?: ServerAdvertisement;
    }
  /**
   * A message. One that came as an SSE event also carries the stream's cursor after it (`cursor`), which
   * the parent records and persists as it would a `stream.cursor`: one parent event per message, not two.
   */
  | {
      type: 'stream.message';
      key: string;
      streamId: string;
      eventId?: string;
      message: JsonRpcMessage;
      cursor?: { lastEventId: string | undefined };
    }
  /**
   * Several messages from one run of SSE events (a parsed chunk), in order, and the cursor after them:
   * the parent takes them as it would take one `stream.message` each, the cursor moving once.
   */
  | {
      type: 'stream.messages';
      key: string;
      streamId: string;
      messages: readonly DeliveredMessage[];
      cursor: { lastEventId: string | undefined };
    }
  /**
   * A request stream's own answer, on a stream that has a session: the message and the stream's end in one
   * event. The parent handles it as the `stream.message` and then the `stream.ended` (`done`) it replaces;
   * the cursor it would have recorded in between is dropped with the stream, so it is not carried.
   */
  | { type: 'stream.answered'; key: string; streamId: string; eventId?: string; message: JsonRpcMessage }
  /** The cursor moved without a message (undefined: forgotten, after a log reset). The parent persists it. */
  | { type: 'stream.cursor'; key: string; streamId: string; lastEventId: string | undefined }
  | { type: 'stream.gap'; key: string; streamId: string; gap: GapDetails }
  | { type: 'stream.ended'; key: string; streamId: string; outcome: StreamOutcome };

/**
 * From the parent: an ended stream is started again as a new stream (a new `streamId`, fresh context).
 * Spawning and stopping an actor per request was most of XState's cost per call (the parent's children
 * object is copied on every spawn and every stop); an ended stream waits in the parent's pool instead.
 */
export type StreamCommand = { type: 'stream.reuse'; input: StreamInput };

/**
 * From the runtime, to a stream waiting for authorization: the application completed it (`finishAuth`),
 * so the provider has a token.
 */
export type AuthorizationGranted = { type: 'auth.granted' };

/**
 * Sixteen keys or fewer: XState copies the context with `Object.assign({}, …)` on every `assign`, and V8
 * turns an object built that way with twenty or more properties into a hash table (dictionary mode), which
 * made every copy and every read of a stream's context slow (~45 µs per call in docs/benchmarks.md row 2).
 * Hence the stream's fixed description is one nested object.
 */
export interface StreamContext {
  /** What the parent asked for; never changes while the stream lives. Its `lastEventId` is the starting cursor only. */
  readonly stream: StreamInput;
  /**
   * Failed attempts since the stream last made progress (delivered a message or moved its cursor). Opening
   * alone does not reset it: a server that opens streams and closes them at once is backed off like one
   * that refuses them.
   */
  attempt: number;
  /** Every reconnect of this stream, never reset: mixed into the jitter so equal attempts differ. */
  reconnects: number;
  lastEventId: string | undefined;
  /** Ids already delivered, for servers whose ids are opaque (bounded). */
  recentIds: string[];
  serverRetryMs: number | undefined;
  /** The server said (in a 410 body) that this stream has ended on its side. */
  serverStreamComplete: boolean;
  decision: CloseDecision | undefined;
  nextDelayMs: number;
  /** A gap was reported and no stream has opened since. */
  gapSinceOpen: boolean;
  /** Some attempt of this stream may have reached the server (anything but a refusal or a 404). */
  mayHaveRun: boolean;
  /** The server opened this stream (an event stream) at least once: it knows it (`decideNotFound`). */
  opened: boolean;
  /**
   * What the last run of SSE events did (`absorbEvents`); read by the actions and guards after it, and
   * forgotten when the exchange ends.
   */
  absorbed: Absorbed | undefined;
  /** Authorizations run since the stream last made progress (bounded: `MAX_AUTHORIZATIONS`). */
  authorizations: number;
  /** The last response's authorization challenge (a 401, or a 403 insufficient_scope), if it was one. */
  challenge: AuthChallenge | undefined;
}

/** What to ask for next: a resume whenever a cursor exists, else the original POST or a fresh GET. */
export function exchangeFor(ctx: StreamContext): Exchange {
  const common = {
    streamId: ctx.stream.streamId,
    sessionId: ctx.stream.sessionId,
    protocolVersion: ctx.stream.protocolVersion,
  };
  if (ctx.lastEventId !== undefined) return { method: 'GET', ...common, lastEventId: ctx.lastEventId };
  if (ctx.stream.kind === 'standalone') return { method: 'GET', ...common };
  return { method: 'POST', ...common, body: ctx.stream.body };
}

/**
 * What a status other than a 200 event stream means for this stream: the close table (`classifyClose`),
 * and for a 404 whether it ends the session or only this stream (`notFoundClose`, not-found.ts).
 */
export function responseDecision(ctx: StreamContext, status: number, body: unknown): CloseDecision {
  const decision = classifyClose({ kind: 'http-status', status, body });
  if (decision.action !== 'session-terminated') return decision;
  const exchange = exchangeFor(ctx);
  return notFoundClose({
    method: exchange.method,
    stream: ctx.stream.kind === 'standalone' ? 'standalone' : 'request',
    carriedSessionId: exchange.sessionId !== undefined,
    servedBefore: ctx.opened || ctx.lastEventId !== undefined,
    jsonRpcBody: isJsonRpcErrorBody(body),
  });
}

/**
 * A stream's context at its start. Every field is spelled out, not `...input`: the spread built a slow
 * object shape (~13 µs per stream), and every `assign` copies this object again.
 */
function initialContext(input: StreamInput): StreamContext {
  return {
    stream: input,
    attempt: 0,
    reconnects: 0,
    lastEventId: input.lastEventId,
    recentIds: [],
    serverRetryMs: undefined,
    serverStreamComplete: false,
    decision: undefined,
    nextDelayMs: 0,
    gapSinceOpen: false,
    mayHaveRun: false,
    opened: false,
    absorbed: undefined,
    authorizations: 0,
    challenge: undefined,
  };
}

const sseEventsOf = (event: IoEvent | StreamCommand | AuthorizationGranted): readonly SseEvent[] =>
  event.type === 'sse.events' ? event.events : event.type === 'sse.event' ? [event] : [];

const report = (ctx: StreamContext) => ({ key: ctx.stream.key, streamId: ctx.stream.streamId });

/**
 * An ended stream (every end state): it has reported its end and does nothing until its parent stops it
 * or starts it again (`stream.reuse`). Not final states: a final one would also send the parent an
 * `xstate.done.actor.*` event, and could not be started again.
 */
const ENDED = { on: { 'stream.reuse': { target: '#stream.connecting', actions: 'reuse' } } } as const;

export const streamMachine = setup({
  types: {
    context: {} as StreamContext,
    input: {} as StreamInput,
    events: {} as IoEvent | StreamCommand | AuthorizationGranted,
  },
  actors: {
    /** Placeholder: the runtime supplies fetch + SSE parsing, the simulation its network. */
    exchange: fromCallback<IoEvent, Exchange>(() => undefined),
    /**
     * Placeholder: the runtime runs the provider's authorization (the SDK's `auth()`) for a challenge.
     * Without a runtime that can, nothing is authorized.
     */
    authorize: fromPromise<AuthorizationResult, AuthChallenge>(async () => 'failed'),
    /**
     * Placeholder: the runtime tells the application that authorization needs it (`UnauthorizedError`) and
     * sends `auth.granted` once `finishAuth` has given the provider a token.
     */
    awaitAuthorization: fromCallback<AuthorizationGranted, AuthChallenge>(() => undefined),
  },
  delays: {
    reconnectDelay: ({ context }) => context.nextDelayMs,
    stallTimeout: ({ context }) => context.stream.stallTimeoutMs,
  },
  guards: {
    isAccepted: ({ event }) => event.type === 'http.response' && event.status === 202,
    // A 2xx body that is not a JSON-RPC message answers nothing: the status decides (a refusal).
    isJsonAnswer: ({ event }) =>
      event.type === 'http.response' &&
      event.status >= 200 &&
      event.status < 300 &&
      asJsonRpcMessage(event.body) !== undefined,
    /** The last run of events ended with `event: close`. */
    closeReceived: ({ context }) => context.absorbed?.end?.kind === 'close',
    /**
     * The last run ended with the request's own answer, on a stream spawned with a session id. Such a stream
     * exists only while its session is active, so its parent needs no `stream.opened` and takes the answer
     * and the end as one event.
     */
    answeredInSession: ({ context }) =>
      context.absorbed?.end?.kind === 'answered' && context.absorbed.end.inSession,
    /** The last run ended with the request's own answer on a stream without a session: handed on as a message. */
    answeredWithoutSession: ({ context }) =>
      context.absorbed?.end?.kind === 'answered' && !context.absorbed.end.inSession,
    /** `stream.opened` tells the parent a session id and advertisement; a stream that has one needs no report. */
    hasSession: ({ context }) => context.stream.sessionId !== undefined,
    firstGapSinceOpen: ({ context }) => !context.gapSinceOpen,
    isStandaloneGap: ({ context }) =>
      context.stream.kind === 'standalone' && context.decision?.action === 'events-lost',
    stallDetectionOn: ({ context }) => context.stream.stallTimeoutMs > 0,
    serverSaidComplete: ({ context }) => context.serverStreamComplete,
    // The deciding state's guards read the decision the `classify*` actions stored.
    mayReconnect: ({ context }) => {
      const d = context.decision;
      if (d?.action !== 'reconnect') return false;
      // The standalone stream has no caller to unblock: giving up would only lose events. It keeps
      // polling at the longest delay while the session lives (as EventSource does).
      if (context.stream.kind === 'standalone') return true;
      if (context.attempt >= context.stream.policy.maxRetries) return false;
      return (
        decidePostFailure({
          reason: d.reason,
          kind: context.stream.kind,
          hasCursor: context.lastEventId !== undefined,
          facts: context.stream.post,
        }) !== 'outcome-unknown'
      );
    },
    reconnectsExhausted: ({ context }) =>
      context.decision?.action === 'reconnect' &&
      context.stream.kind !== 'standalone' &&
      context.attempt >= context.stream.policy.maxRetries,
    /**
     * A server that answers every resume with a 410 and a `resumeAfter` gets as many resumes as any other
     * failure: the policy's retries, then the call ends. (The standalone stream keeps polling, backed off.)
     */
    gapResumesExhausted: ({ context }) =>
      context.decision?.action === 'events-lost' &&
      context.decision.gap.resumeAfter !== undefined &&
      context.stream.kind !== 'standalone' &&
      context.attempt >= context.stream.policy.maxRetries,
    isTransportFault: ({ context }) => context.decision?.action === 'reconnect',
    /** The server asked for authorization, and the application gave a provider to answer it. */
    isChallenge: ({ context }) => context.challenge !== undefined && context.stream.authorize === true,
    mayAuthorize: ({ context }) =>
      decideChallenge({
        providerConfigured: context.stream.authorize === true,
        authorizations: context.authorizations,
      }) === 'authorize',
    /** Without a token, this stream's request never ran: it ends (`UnauthorizedError`) instead of waiting. */
    rejectWhenUnauthorized: ({ context }) =>
      afterUnauthorized({
        kind: context.stream.kind,
        hasCursor: context.lastEventId !== undefined,
        mayHaveRun: context.mayHaveRun,
      }) === 'reject',
    isAuthorized: ({ event }) =>
      'output' in event && (event as { output: AuthorizationResult }).output === 'authorized',
    /**
     * Authorized: the refused attempt goes again, as the post-failure table's unauthorized row says (the same
     * Last-Event-ID when there is a cursor, else the same request).
     */
    mayRetryAuthorized: ({ context }) =>
      context.stream.kind === 'standalone' ||
      decidePostFailure({
        reason: 'unauthorized',
        kind: context.stream.kind,
        hasCursor: context.lastEventId !== undefined,
        facts: context.stream.post,
      }) !== 'outcome-unknown',
    isSessionGone: ({ context }) => context.decision?.action === 'session-terminated',
    isEventsLost: ({ context }) => context.decision?.action === 'events-lost',
    canResumeAfterGap: ({ context }) =>
      context.decision?.action === 'events-lost' && context.decision.gap.resumeAfter !== undefined,
    isStop: ({ context }) => context.decision?.action === 'stop',
    /** The server sent `event: close`: its session is ending, which the parent (not this stream) acts on. */
    isSessionClosing: ({ context }) =>
      context.decision?.action === 'stop' && context.decision.reason === StopReason.closeEvent,
    isEpochChange: ({ context }) =>
      context.decision?.action === 'events-lost' && context.decision.gap.reason === 'epoch_changed',
  },
  actions: {
    // Only a refused connection, a 404 and an authorization refusal (401/403) prove that an attempt did not
    // run; anything else may have.
    classifyResponse: assign({
      decision: ({ context, event }) =>
        event.type === 'http.response' ? responseDecision(context, event.status, event.body) : undefined,
      mayHaveRun: ({ context, event }) =>
        context.mayHaveRun || (event.type === 'http.response' && !provesNotRun(event.status)),
      challenge: ({ event }) =>
        event.type === 'http.response' ? challengeOf(event.status, event.wwwAuthenticate) : undefined,
    }),
    countAuthorization: assign({ authorizations: ({ context }) => context.authorizations + 1 }),
    /** The application authorized (`finishAuth`): the bound starts over. */
    forgetAuthorizations: assign({ authorizations: 0, challenge: undefined }),
    classifyFault: assign({
      decision: ({ event }) =>
        event.type === 'net.failed' ? classifyClose({ kind: 'network', fault: event.fault }) : undefined,
      mayHaveRun: ({ context, event }) =>
        context.mayHaveRun || (event.type === 'net.failed' && event.fault !== 'refused'),
    }),
    classifyPrematureEnd: assign({
      decision: () => classifyClose({ kind: 'network', fault: 'reset' }),
      mayHaveRun: true,
    }),
    classifyEnd: assign({ decision: () => classifyClose({ kind: 'end-of-stream' }) }),
    classifyCloseEvent: assign({ decision: () => classifyClose({ kind: 'close-event' }) }),
    // A stall can strike after the request left (waiting for headers): it may have run.
    classifyStall: assign({
      decision: () => classifyClose({ kind: 'network', fault: 'stall' }),
      mayHaveRun: true,
    }),
    /** A stream opened: the request may have run. Attempts start over only on progress (see `absorb`). */
    markOpened: assign({ gapSinceOpen: false, mayHaveRun: true, opened: true }),
    markGap: assign({ gapSinceOpen: true }),
    scheduleReconnect: assign(({ context }) => ({
      nextDelayMs: reconnectDelay(
        context.attempt,
        context.stream.policy,
        context.serverRetryMs,
        (context.stream.jitterSeed + Math.imul(context.reconnects, 0x2545f491)) >>> 0,
      ),
      attempt: context.attempt + 1,
      reconnects: context.reconnects + 1,
    })),
    // The server's `retry:` is kept clamped (`serverRetryFloor`): it becomes a timer.
    rememberRetry: assign({
      serverRetryMs: ({ context, event }) =>
        event.type === 'sse.retry'
          ? (serverRetryFloor(event.ms) ?? context.serverRetryMs)
          : event.type === 'sse.events'
            ? (serverRetryFloor(event.retryMs) ?? context.serverRetryMs)
            : context.serverRetryMs,
    }),
    /**
     * Decides what a run of SSE events (one or a parsed chunk) does: see `absorbEvents`. A run that made
     * progress (a message, or a new event id) starts the attempts over.
     */
    absorb: assign(({ context, event }) => {
      const absorbed = absorbEvents(context.stream, context, sseEventsOf(event));
      const progress =
        absorbed.messages.length > 0 || absorbed.newIds.length > 0 || absorbed.end !== undefined;
      return {
        absorbed,
        attempt: progress ? 0 : context.attempt,
        authorizations: progress ? 0 : context.authorizations,
      };
    }),
    /**
     * Records the run's cursor; the parent persists it. Overlaps never move it. `recentIds` is updated in
     * place (copying 512 ids on every event was most of this action's cost); nothing outside this actor
     * holds it.
     */
    recordCursor: assign(({ context }) => {
      const absorbed = context.absorbed;
      if (!absorbed || absorbed.newIds.length === 0) return {};
      return {
        lastEventId: absorbed.lastEventId,
        recentIds: rememberIds(context.recentIds, absorbed.newIds),
      };
    }),
    /**
     * Hands the run's messages to the parent with the cursor after them (`recordCursor` has run): one
     * `stream.message`, or one `stream.messages` for several; a cursor that moved alone goes as
     * `stream.cursor`. An answer that ended the stream follows as `stream.answered`; the cursor it would
     * have carried is dropped with the stream.
     */
    forwardAbsorbed: enqueueActions(({ context, enqueue }) => {
      const absorbed = context.absorbed;
      if (!absorbed) return;
      const { messages, end } = absorbed;
      const cursor = { lastEventId: context.lastEventId };
      const first = messages[0];
      if (messages.length === 1 && first)
        enqueue.sendParent({ type: 'stream.message', ...report(context), ...first, cursor });
      else if (messages.length > 1)
        enqueue.sendParent({ type: 'stream.messages', ...report(context), messages, cursor });
      else if (absorbed.newIds.length > 0 && !(end?.kind === 'answered' && end.inSession))
        enqueue.sendParent({ type: 'stream.cursor', ...report(context), lastEventId: context.lastEventId });
      if (end?.kind === 'answered' && end.inSession)
        enqueue.sendParent({ type: 'stream.answered', ...report(context), ...end.answer });
    }),
    forwardCursor: sendParent(({ context }) => ({
      type: 'stream.cursor',
      ...report(context),
      lastEventId: context.lastEventId,
    })),
    forwardJsonAnswer: sendParent(({ context, event }) => ({
      type: 'stream.message',
      ...report(context),
      message: (event as Extract<IoEvent, { type: 'http.response' }>).body,
    })),
    reportOpened: sendParent(({ context, event }) => {
      const e = event as Extract<IoEvent, { type: 'http.stream' | 'http.response' }>;
      return {
        type: 'stream.opened',
        ...report(context),
        sessionId: e.sessionId,
        advertisement: e.advertisement,
      };
    }),
    reportGap: sendParent(({ context }) => ({
      type: 'stream.gap',
      ...report(context),
      gap: (context.decision as Extract<CloseDecision, { action: 'events-lost' }>).gap,
    })),
    /** After a 410, resume at the oldest retained event: only the evicted range is lost. */
    resumeAtOldest: assign(({ context }) => {
      const gap = (context.decision as Extract<CloseDecision, { action: 'events-lost' }>).gap;
      return { lastEventId: gap.resumeAfter, serverStreamComplete: gap.streamComplete };
    }),
    forgetAbsorbed: assign({ absorbed: undefined }),
    /** A standalone stream whose log was reset starts over: there is nothing left to resume. */
    forgetCursor: assign({ lastEventId: undefined, recentIds: [] }),
    /** A new stream in this actor: everything from the previous one is forgotten. */
    reuse: assign(({ event }) => (event.type === 'stream.reuse' ? initialContext(event.input) : {})),
    reportEnded: sendParent(({ context }, outcome: StreamOutcome) => ({
      type: 'stream.ended',
      ...report(context),
      outcome,
    })),
  },
}).createMachine({
  id: 'stream',
  context: ({ input }) => initialContext(input),
  initial: 'connecting',
  states: {
    connecting: {
      invoke: { src: 'exchange', input: ({ context }) => exchangeFor(context) },
      // Once the exchange is over, what its last run of events did is read by nothing more.
      exit: 'forgetAbsorbed',
      initial: 'awaitingResponse',
      states: {
        awaitingResponse: {
          // Connecting, waiting for the headers, reading a JSON body: no byte for this long is a stall too.
          after: {
            stallTimeout: { guard: 'stallDetectionOn', target: '#stream.deciding', actions: 'classifyStall' },
          },
          on: {
            // Bytes of a body that is not an event stream arrived: the timer starts over.
            'sse.activity': { target: 'awaitingResponse', reenter: true },
            'http.stream': [
              { guard: 'hasSession', target: 'streaming', actions: 'markOpened' },
              { target: 'streaming', actions: ['markOpened', 'reportOpened'] },
            ],
            'http.response': [
              { guard: and(['isAccepted', 'hasSession']), target: '#stream.done' },
              { guard: 'isAccepted', target: '#stream.done', actions: 'reportOpened' },
              {
                guard: and(['isJsonAnswer', 'hasSession']),
                target: '#stream.done',
                actions: 'forwardJsonAnswer',
              },
              {
                guard: 'isJsonAnswer',
                target: '#stream.done',
                actions: ['reportOpened', 'forwardJsonAnswer'],
              },
              { target: '#stream.deciding', actions: 'classifyResponse' },
            ],
            'net.failed': { target: '#stream.deciding', actions: 'classifyFault' },
            // The connection closed before a status line: the same as a reset.
            'net.ended': { target: '#stream.deciding', actions: 'classifyPrematureEnd' },
          },
        },
        streaming: {
          always: [
            // A request stream is done once its answer is in, whether or not the server ends it.
            { guard: 'answeredWithoutSession', target: '#stream.done' },
            // `event: close` is decided like every other close (`classifyClose`), in `deciding`.
            { guard: 'closeReceived', target: '#stream.deciding', actions: 'classifyCloseEvent' },
            { guard: 'answeredInSession', target: '#stream.answered' },
          ],
          after: {
            stallTimeout: { guard: 'stallDetectionOn', target: '#stream.deciding', actions: 'classifyStall' },
          },
          on: {
            'sse.activity': { target: 'streaming', reenter: true },
            // Bytes arrived: proof of life, like any event.
            'sse.retry': { target: 'streaming', reenter: true, actions: 'rememberRetry' },
            // Every event, even a replay overlap, is proof of life: the stall timer starts over.
            'sse.event': {
              target: 'streaming',
              reenter: true,
              actions: ['absorb', 'recordCursor', 'forwardAbsorbed'],
            },
            'sse.events': {
              target: 'streaming',
              reenter: true,
              actions: ['rememberRetry', 'absorb', 'recordCursor', 'forwardAbsorbed'],
            },
            'net.ended': [
              { guard: 'serverSaidComplete', target: '#stream.responseEvicted' },
              { target: '#stream.deciding', actions: 'classifyEnd' },
            ],
            'net.failed': { target: '#stream.deciding', actions: 'classifyFault' },
          },
        },
      },
    },
    deciding: {
      always: [
        { guard: 'mayReconnect', target: 'backoff' },
        { guard: 'reconnectsExhausted', target: 'givenUp' },
        { guard: 'isTransportFault', target: 'unresumable' },
        { guard: 'isSessionGone', target: 'sessionTerminated' },
        { guard: 'gapResumesExhausted', target: 'givenUp', actions: 'reportGap' },
        // The server that reported the gap is up: resume at once, the first time. A second gap before any
        // stream opened again waits for backoff, so a server answering 410 forever cannot make us spin.
        {
          guard: and(['canResumeAfterGap', 'firstGapSinceOpen']),
          target: 'connecting',
          actions: ['reportGap', 'resumeAtOldest', 'forwardCursor', 'markGap'],
        },
        {
          guard: 'canResumeAfterGap',
          target: 'backoff',
          actions: ['reportGap', 'resumeAtOldest', 'forwardCursor'],
        },
        {
          guard: and(['isStandaloneGap', 'firstGapSinceOpen']),
          target: 'connecting',
          actions: ['reportGap', 'forgetCursor', 'forwardCursor', 'markGap'],
        },
        {
          guard: 'isStandaloneGap',
          target: 'backoff',
          actions: ['reportGap', 'forgetCursor', 'forwardCursor'],
        },
        { guard: 'isEpochChange', target: 'epochChanged', actions: 'reportGap' },
        { guard: 'isEventsLost', target: 'responseEvicted', actions: 'reportGap' },
        { guard: 'isSessionClosing', target: 'closedByServer' },
        { guard: 'isStop', target: 'stopped' },
        { guard: and(['isChallenge', 'mayAuthorize']), target: 'authorizing' },
        { guard: and(['isChallenge', 'rejectWhenUnauthorized']), target: 'unauthorized' },
        { guard: 'isChallenge', target: 'awaitingAuthorization' },
        { target: 'refused' },
      ],
    },
    /**
     * The server asked for a token: the runtime runs the provider's authorization (a refresh, a fresh
     * authorization, a scope step-up). Then the refused attempt goes again; nothing else about the stream
     * changes (no backoff, no attempt counted: the server answered, and nothing ran).
     */
    authorizing: {
      entry: 'countAuthorization',
      invoke: {
        src: 'authorize',
        input: ({ context }) => context.challenge as AuthChallenge,
        onDone: [
          { guard: and(['isAuthorized', 'mayRetryAuthorized']), target: 'connecting' },
          { guard: 'rejectWhenUnauthorized', target: 'unauthorized' },
          { target: 'awaitingAuthorization' },
        ],
        onError: [
          { guard: 'rejectWhenUnauthorized', target: 'unauthorized' },
          { target: 'awaitingAuthorization' },
        ],
      },
    },
    /**
     * No token without the application (the user must authorize, or authorization failed), and this stream
     * must not be lost: a call that may have run, or the standalone stream. It waits, cursor kept, until
     * the application's `finishAuth` (`auth.granted`), then goes again: an expired token is never a lost
     * session, a gap, or an unknown outcome. Its call stays pending (the SDK's own timeout still applies).
     */
    awaitingAuthorization: {
      invoke: { src: 'awaitAuthorization', input: ({ context }) => context.challenge as AuthChallenge },
      on: { 'auth.granted': { target: 'connecting', actions: 'forgetAuthorizations' } },
    },
    backoff: {
      entry: 'scheduleReconnect',
      after: { reconnectDelay: 'connecting' },
    },
    done: { ...ENDED, entry: { type: 'reportEnded', params: { kind: 'done' } } },
    /** Done, and the parent was told so with the answer (`stream.answered`): no report of its own. */
    answered: ENDED,
    closedByServer: { ...ENDED, entry: { type: 'reportEnded', params: { kind: 'closed-by-server' } } },
    sessionTerminated: {
      ...ENDED,
      entry: {
        type: 'reportEnded',
        params: ({ context }) => ({
          kind: 'session-terminated',
          // The 404 proves only that this attempt did not run; an earlier one may have reached the server.
          neverRan:
            context.stream.kind === 'request' && context.lastEventId === undefined && !context.mayHaveRun,
        }),
      },
    },
    unresumable: { ...ENDED, entry: { type: 'reportEnded', params: { kind: 'unresumable' } } },
    responseEvicted: { ...ENDED, entry: { type: 'reportEnded', params: { kind: 'response-evicted' } } },
    epochChanged: { ...ENDED, entry: { type: 'reportEnded', params: { kind: 'epoch-changed' } } },
    givenUp: {
      ...ENDED,
      entry: {
        type: 'reportEnded',
        params: ({ context }) => ({
          kind: 'given-up',
          neverRan:
            context.stream.kind === 'request' && context.lastEventId === undefined && !context.mayHaveRun,
          reason:
            context.decision?.action === 'reconnect'
              ? context.decision.reason
              : context.decision?.action === 'events-lost'
                ? context.decision.gap.reason
                : 'unknown',
        }),
      },
    },
    stopped: {
      ...ENDED,
      entry: {
        type: 'reportEnded',
        params: ({ context }) => ({
          kind: 'stopped',
          reason: context.decision?.action === 'stop' ? context.decision.reason : 'unknown',
        }),
      },
    },
    unauthorized: {
      ...ENDED,
      entry: {
        type: 'reportEnded',
        params: ({ context }) =>
          context.decision?.action === 'refuse'
            ? { kind: 'unauthorized', status: context.decision.status, body: context.decision.body }
            : { kind: 'unauthorized', status: context.challenge?.status ?? 401 },
      },
    },
    refused: {
      ...ENDED,
      entry: {
        type: 'reportEnded',
        params: ({ context }) =>
          context.decision?.action === 'refuse'
            ? { kind: 'refused', status: context.decision.status, body: context.decision.body }
            : { kind: 'refused', status: 0 },
      },
    },
  },
});
