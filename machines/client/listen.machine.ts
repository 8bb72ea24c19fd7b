import { assign, enqueueActions, fromCallback, setup } from 'xstate';
import { DEFAULT_RECONNECT_POLICY, type ReconnectPolicy, reconnectDelay } from '../backoff.js';
import {
  CLIENT_CAPABILITIES_META_KEY,
  ListenMeta,
  MAX_POSITION_LENGTH,
  readListenMissed,
  withContinuityDeclared,
} from '../continuity-extension.js';
import type { JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, RequestId } from '../jsonrpc.js';
import { ACKNOWLEDGED_METHOD, LISTEN_METHOD, SUBSCRIPTION_ID_META_KEY } from '../listen-wire.js';
import type { Exchange, IoEvent, SseEvent } from './io.js';
import { asJsonRpcMessage } from './wire.js';

/**
 * One `subscriptions/listen` stream of MCP 2026-07-28, kept open across breaks (issue 17 item 2).
 *
 *   connecting → streaming (acknowledged) → broken → backoff → connecting (a re-POST, new id) →
 *   streaming, acknowledged again: report the gap, tell the application to re-list → … until the
 *   application closes it, the server ends it, or the server refuses it for good.
 *
 * The application (the official v2 `Client`) holds ONE response body for the whole life of the
 * subscription: the runtime (`src/client/modern/listen.ts`) writes into it what this machine emits
 * (`listen.deliver`), so a break is seen only through what is delivered after the re-open.
 *
 * Decisions, all here:
 * - The first attempt's answer, when it is not an event stream (a refused connection, a 4xx, a JSON
 *   error), is the server's: handed to the application unchanged (`notOpened`); nothing is retried
 *   before the application has a stream, so it sees every refusal as the server made it.
 * - Once the application holds the stream, every break (reset, clean end without a response) is
 *   re-opened after `reconnectDelay` (full jitter; the server's `retry:` a floor, capped). Attempts
 *   count failures since the last PROGRESS: a message other than an acknowledgement, or a stream that
 *   stayed acknowledged for `policy.maxDelayMs` (`listenSteady`). An acknowledgement alone is not
 *   progress: a server that acknowledges and closes at once was re-opened ~4 times a second forever
 *   (issue 22 item 9), now it is backed off like one that refuses, as the 2025 streams are (a stream that
 *   stays up as long as the longest backoff starts them over, so re-opens never outpace the backoff's
 *   ceiling); each re-open after a break of an acknowledged stream is a real gap (changes published
 *   while it was down are owed) and is reported, at the backoff's pace. Past `policy.maxRetries` the ceiling stays at
 *   `maxDelayMs` and the machine keeps polling, like the 2025 standalone GET stream: the listen
 *   stream has no call to unblock, and giving up would only lose notifications silently.
 * - It gives up only when the server refuses the re-open for good: a 4xx other than 408/425/429
 *   (the same request will never be accepted: auth expired, endpoint gone; the application's own
 *   `listen()` re-authenticates). A JSON-RPC answer to the listen request (its graceful-close result,
 *   or an error such as the subscription limit) ends the subscription as the server said
 *   (`endedByServer`), delivered to the application under the first id.
 * - The first acknowledgement is delivered; later ones (after a re-open) are not (the application
 *   already has one). Instead, when the stream had been acknowledged before it broke, the machine
 *   emits the gap (`listen.gap`) and the re-list advice (`listen.relist`), and delivers one synthesized
 *   change notification per type to re-list, so the application's own list-changed handlers (and the
 *   v2 client's response cache) re-list. A break before any acknowledgement loses nothing: no gap.
 * - The gap's size. Every listen request declares the continuity extension; a server that serves its
 *   listen part (docs/continuity-extension.md §12) puts a position on the acknowledgement and on every
 *   change notification. The machine keeps the last one it received and sends it on each re-open;
 *   when the re-open's acknowledgement carries a well-formed `missed`, the gap is EXACT: its count, and
 *   only the types it names are re-listed (nothing at all when the count is 0). Anything else (no
 *   position yet, no `missed`, a malformed one, one naming a type the filter never asked for) is a gap
 *   of unknown size: every subscribed type is re-listed, as without the extension.
 * - The server stamps each message with the request's id (`io.modelcontextprotocol/subscriptionId`);
 *   every re-open has a new id, so delivered messages are stamped back to the first id, which the
 *   application's subscription knows.
 */

export { ACKNOWLEDGED_METHOD, LISTEN_METHOD, SUBSCRIPTION_ID_META_KEY } from '../listen-wire.js';
/** Marks a change notification this client synthesized after a gap (not sent by the server). */
export const RELIST_META_KEY = 'io.github.mcp-continuity/relist';

/** What the client opted in to (the spec's `SubscriptionFilter`). */
export interface SubscriptionFilter {
  readonly toolsListChanged?: boolean;
  readonly promptsListChanged?: boolean;
  readonly resourcesListChanged?: boolean;
  readonly resourceSubscriptions?: readonly string[];
}

/** What could have been missed while the stream was down. */
export type ListenMissed =
  /** Nobody can know: no extension, or the server could not vouch for a count (another instance, evicted). */
  | { readonly kind: 'unknown' }
  /** With the extension's listen part (docs/continuity-extension.md §12): exactly this many changes. */
  | { readonly kind: 'exact'; readonly count: number };

/** A gap as the machine reports it; the runtime adds the wall-clock times. */
export interface ListenGapFacts {
  readonly missed: ListenMissed;
  /** Re-open attempts it took (1 when the first re-open succeeded). */
  readonly attempts: number;
  /** What the application should re-list (see `relistOf`). */
  readonly relist: readonly string[];
  /** The subscription id the application knows (the first listen request's id). */
  readonly subscriptionId: RequestId;
}

export interface ListenInput {
  /** The listen request as the application sent it; its id is the subscription id from then on. */
  readonly request: JsonRpcRequest;
  readonly policy?: ReconnectPolicy;
  readonly jitterSeed: number;
  /**
   * No byte (not even a keep-alive comment) for this long counts as a break, before the headers or on
   * the stream: a connection that died silently (a black-holed route) is re-opened instead of waited
   * on forever. 0 turns it off. The official server sends a keep-alive every 15 s by default.
   */
  readonly stallTimeoutMs?: number;
  /**
   * Declare the continuity extension on every listen request and send the last position on a re-open, so
   * a server with its listen part reports exact gaps. Default true; a server without it ignores both.
   */
  readonly useExtension?: boolean;
}

export interface ListenContext {
  readonly request: JsonRpcRequest;
  readonly policy: ReconnectPolicy;
  readonly jitterSeed: number;
  readonly stallTimeoutMs: number;
  readonly useExtension: boolean;
  /** The last position (the extension's) received on any stream of this subscription. */
  lastPosition: string | undefined;
  /** The position the attempt in flight said it re-opens from (sent as `lastPosition`). */
  reopenedFrom: string | undefined;
  /** The id of the attempt in flight (the first id, then one per re-open). */
  currentId: RequestId;
  /** The application holds the stream: from now on every answer is ours to handle. */
  handedOver: boolean;
  /** The application has received an acknowledgement. */
  acknowledged: boolean;
  /** The stream broke after an acknowledgement and no re-open has been acknowledged since. */
  gapOpen: boolean;
  /** Failed attempts since the last progress (a message other than an ack, or a steady stream). */
  attempt: number;
  /** Re-opens ever started, never reset: names re-open ids and mixes the jitter. */
  reopens: number;
  /** Re-open attempts since the break the open gap started with. */
  attemptsInGap: number;
  serverRetryMs: number | undefined;
  nextDelayMs: number;
  /** The status that made the machine give up, when it did. */
  refusal: number | undefined;
}

export type ListenCommand = { type: 'app.close' };

/** What the machine tells the runtime (XState `emit`). */
export type ListenEmitted =
  /** Give the application its response now: a 200 event stream whose body the runtime writes. */
  | { type: 'listen.handover' }
  /** Write these messages into the application's body, in order. */
  | { type: 'listen.deliver'; messages: readonly JsonRpcMessage[] }
  | { type: 'listen.broken'; attempt: number }
  | { type: 'listen.gap'; gap: ListenGapFacts }
  | { type: 'listen.relist'; what: readonly string[] };

/** A 4xx that the same request will meet again: re-opening is pointless. */
export function isPermanentRefusal(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 425 && status !== 429;
}

/** The first answer is a stream the machine keeps: anything else is passed through unchanged. */
export function isListenStream(status: number, contentType: string | null): boolean {
  return status === 200 && (contentType ?? '').toLowerCase().startsWith('text/event-stream');
}

/** A request is one this machine keeps open: a JSON-RPC `subscriptions/listen` request with an id. */
export function asListenRequest(body: unknown): JsonRpcRequest | undefined {
  const message = asJsonRpcMessage(body);
  if (message === undefined || !('method' in message) || !('id' in message)) return undefined;
  return message.method === LISTEN_METHOD ? (message as JsonRpcRequest) : undefined;
}

/** The id of re-open number `n` (1-based): a new id each time, as the spec asks of a re-issue. */
export function reopenId(first: RequestId, n: number): string {
  return `${String(first)}~reopen-${n}`;
}

/** The filter a request asked for. */
export function requestedFilter(request: JsonRpcRequest): SubscriptionFilter {
  return filterOf((request.params as { notifications?: unknown } | undefined)?.notifications);
}

/**
 * A filter as read off the wire (the server's acknowledgement says what it honoured): only `true` flags and
 * an array of strings count; anything else is absent. A hostile or broken server's ack never throws here.
 */
export function filterOf(value: unknown): SubscriptionFilter {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  const raw = value as Record<string, unknown>;
  const uris = Array.isArray(raw.resourceSubscriptions)
    ? raw.resourceSubscriptions.filter((u): u is string => typeof u === 'string')
    : [];
  return {
    ...(raw.toolsListChanged === true ? { toolsListChanged: true } : {}),
    ...(raw.promptsListChanged === true ? { promptsListChanged: true } : {}),
    ...(raw.resourcesListChanged === true ? { resourcesListChanged: true } : {}),
    ...(uris.length > 0 ? { resourceSubscriptions: uris } : {}),
  };
}

/**
 * What to re-list for a filter: `tools`, `prompts`, `resources` (the lists) and `resource:<uri>` for
 * each subscribed resource (read it again).
 */
export function relistOf(filter: SubscriptionFilter): string[] {
  const what: string[] = [];
  if (filter.toolsListChanged === true) what.push('tools');
  if (filter.promptsListChanged === true) what.push('prompts');
  if (filter.resourcesListChanged === true) what.push('resources');
  for (const uri of filter.resourceSubscriptions ?? [])
    if (typeof uri === 'string') what.push(`resource:${uri}`);
  return what;
}

/**
 * One change notification per subscribed type, as the server would have sent it, stamped with the
 * subscription id and marked as synthesized. Delivered through the application's own handlers: a
 * `list_changed` means "the list may have changed", which is exactly what a gap says, and it is the
 * only signal that also evicts the v2 client's cached lists.
 */
export function relistNotifications(
  filter: SubscriptionFilter,
  subscriptionId: RequestId,
): JsonRpcNotification[] {
  const meta = { [SUBSCRIPTION_ID_META_KEY]: subscriptionId, [RELIST_META_KEY]: true };
  const notes: JsonRpcNotification[] = [];
  const note = (method: string, extra: Record<string, unknown> = {}) =>
    notes.push({ jsonrpc: '2.0', method, params: { ...extra, _meta: meta } });
  if (filter.toolsListChanged === true) note('notifications/tools/list_changed');
  if (filter.promptsListChanged === true) note('notifications/prompts/list_changed');
  if (filter.resourcesListChanged === true) note('notifications/resources/list_changed');
  for (const uri of filter.resourceSubscriptions ?? [])
    if (typeof uri === 'string') note('notifications/resources/updated', { uri });
  return notes;
}

/** A message as the application must see it: the subscription id (and a response's id) put back to the first. */
export function stampedBack(message: JsonRpcMessage, first: RequestId, current: RequestId): JsonRpcMessage {
  if (first === current) return message;
  const withMeta = <T extends { _meta?: unknown }>(holder: T | undefined): T | undefined => {
    const meta = holder?._meta as Record<string, unknown> | undefined;
    if (meta === undefined || meta[SUBSCRIPTION_ID_META_KEY] !== current) return holder;
    return { ...holder, _meta: { ...meta, [SUBSCRIPTION_ID_META_KEY]: first } } as T;
  };
  if ('method' in message) {
    const params = withMeta(message.params as { _meta?: unknown } | undefined);
    return params === message.params ? message : ({ ...message, params } as JsonRpcMessage);
  }
  if (message.id !== current) return message;
  if ('result' in message)
    return {
      ...message,
      id: first,
      result: withMeta(message.result as { _meta?: unknown }) ?? message.result,
    };
  return { ...message, id: first };
}

/** The listen request's own answer (result or error) for the attempt in flight. */
function answersAttempt(message: JsonRpcMessage | undefined, current: RequestId): boolean {
  return message !== undefined && !('method' in message) && message.id === current;
}

const isAck = (message: JsonRpcMessage | undefined): boolean =>
  message !== undefined && 'method' in message && message.method === ACKNOWLEDGED_METHOD;

const messagesOf = (event: IoEvent | ListenCommand): JsonRpcMessage[] => {
  const events: readonly SseEvent[] =
    event.type === 'sse.events' ? event.events : event.type === 'sse.event' ? [event] : [];
  return events.flatMap((e) =>
    e.message !== undefined && (e.event === undefined || e.event === 'message') ? [e.message] : [],
  );
};

const retryOf = (event: IoEvent | ListenCommand): number | undefined =>
  event.type === 'sse.retry' ? event.ms : event.type === 'sse.events' ? event.retryMs : undefined;

/**
 * The exchange for the attempt in flight: the application's request, under the attempt's id; with the
 * extension declared, and on a re-open the last position received.
 */
export function exchangeFor(ctx: ListenContext): Exchange {
  if (!ctx.useExtension) return { method: 'POST', body: { ...ctx.request, id: ctx.currentId } };
  const params = (ctx.request.params ?? {}) as Record<string, unknown>;
  const meta = (typeof params._meta === 'object' && params._meta !== null ? params._meta : {}) as Record<
    string,
    unknown
  >;
  const next: Record<string, unknown> = {
    ...meta,
    [CLIENT_CAPABILITIES_META_KEY]: withContinuityDeclared(meta[CLIENT_CAPABILITIES_META_KEY]),
  };
  if (ctx.reopenedFrom !== undefined) next[ListenMeta.lastPosition] = ctx.reopenedFrom;
  return { method: 'POST', body: { ...ctx.request, id: ctx.currentId, params: { ...params, _meta: next } } };
}

/** The extension's position on a message (`_meta` of its params), when it has a usable one. */
export function positionOfMessage(message: JsonRpcMessage): string | undefined {
  if (!('method' in message)) return undefined;
  const meta = (message.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  const position = meta?.[ListenMeta.position];
  return typeof position === 'string' && position.length > 0 && position.length <= MAX_POSITION_LENGTH
    ? position
    : undefined;
}

/**
 * What a re-open's acknowledgement says was missed: exact when it carries a well-formed `missed` for the
 * position the re-open sent, naming only types the filter subscribed to; otherwise unknown.
 */
export function missedOf(
  ack: JsonRpcNotification,
  reopenedFrom: string | undefined,
  filter: SubscriptionFilter,
): { missed: ListenMissed; relist: readonly string[] } {
  const all = relistOf(filter);
  const report = reopenedFrom !== undefined ? readListenMissed(ack.params?._meta) : undefined;
  if (report === undefined || !report.relist.every((item) => all.includes(item)))
    return { missed: { kind: 'unknown' }, relist: all };
  return { missed: { kind: 'exact', count: report.count }, relist: report.relist };
}

/** The part of a filter that `relist` names (for the synthesized change notifications). */
export function narrowedFilter(filter: SubscriptionFilter, relist: readonly string[]): SubscriptionFilter {
  const has = (item: string) => relist.includes(item);
  const uris = (filter.resourceSubscriptions ?? []).filter((uri) => has(`resource:${uri}`));
  return {
    ...(filter.toolsListChanged === true && has('tools') ? { toolsListChanged: true } : {}),
    ...(filter.promptsListChanged === true && has('prompts') ? { promptsListChanged: true } : {}),
    ...(filter.resourcesListChanged === true && has('resources') ? { resourcesListChanged: true } : {}),
    ...(uris.length > 0 ? { resourceSubscriptions: uris } : {}),
  };
}

export const listenMachine = setup({
  types: {
    context: {} as ListenContext,
    input: {} as ListenInput,
    events: {} as IoEvent | ListenCommand,
    emitted: {} as ListenEmitted,
  },
  actors: {
    /** Placeholder: the runtime supplies fetch + SSE parsing (src/client/exchange.ts), a simulation its network. */
    exchange: fromCallback<IoEvent, Exchange>(() => undefined),
  },
  delays: {
    /** The wait before a re-open: full jitter under the backoff ceiling, the server's `retry:` a floor. */
    listenBackoff: ({ context }) => context.nextDelayMs,
    /** Silence that counts as a dead connection. */
    listenStall: ({ context }) => context.stallTimeoutMs,
    /** An acknowledged stream up this long is progress: as long as the longest backoff. */
    listenSteady: ({ context }) => context.policy.maxDelayMs,
  },
  guards: {
    stallDetectionOn: ({ context }) => context.stallTimeoutMs > 0,
    /** The stream in flight has been acknowledged (a re-open's ack closes the gap its break opened). */
    acknowledgedHere: ({ context }) => context.acknowledged && !context.gapOpen,
    handedOver: ({ context }) => context.handedOver,
    permanentRefusal: ({ event }) => event.type === 'http.response' && isPermanentRefusal(event.status),
    /** A JSON answer that is the listen request's own answer: the server ended or refused the subscription. */
    jsonAnswer: ({ context, event }) =>
      event.type === 'http.response' && answersAttempt(asJsonRpcMessage(event.body), context.currentId),
    /** A run of events holding the listen request's own answer: the subscription ends with it. */
    streamAnswered: ({ context, event }) =>
      messagesOf(event).some((m) => answersAttempt(m, context.currentId)),
  },
  actions: {
    handOver: enqueueActions(({ context, enqueue }) => {
      if (context.handedOver) return;
      enqueue.assign({ handedOver: true });
      enqueue.emit({ type: 'listen.handover' });
    }),
    noteRetry: assign({
      serverRetryMs: ({ context, event }) => retryOf(event) ?? context.serverRetryMs,
    }),
    /**
     * A run of events: delivered in order, stamped back to the first id, up to and including the listen
     * request's own answer. A re-ack after a gap becomes the gap report and the re-list notifications.
     */
    absorb: enqueueActions(({ context, event, enqueue }) => {
      const first = context.request.id;
      const out: JsonRpcMessage[] = [];
      let acknowledged = context.acknowledged;
      let gapOpen = context.gapOpen;
      let attempt = context.attempt;
      let attemptsInGap = context.attemptsInGap;
      let lastPosition = context.lastPosition;
      for (const message of messagesOf(event)) {
        lastPosition = positionOfMessage(message) ?? lastPosition;
        if (isAck(message)) {
          // Not progress: a server may acknowledge and close at once (see the header).
          if (!acknowledged) {
            acknowledged = true;
            out.push(stampedBack(message, first, context.currentId));
          } else if (gapOpen) {
            const honored = (message as JsonRpcNotification).params?.notifications;
            const filter = honored !== undefined ? filterOf(honored) : requestedFilter(context.request);
            const { missed, relist } = missedOf(message as JsonRpcNotification, context.reopenedFrom, filter);
            if (out.length > 0) enqueue.emit({ type: 'listen.deliver', messages: out.splice(0) });
            enqueue.emit({
              type: 'listen.gap',
              gap: { missed, attempts: attemptsInGap, relist, subscriptionId: first },
            });
            // An exact gap of 0 changes: nothing to re-list.
            if (relist.length > 0) {
              enqueue.emit({ type: 'listen.relist', what: relist });
              out.push(...relistNotifications(narrowedFilter(filter, relist), first));
            }
            gapOpen = false;
            attemptsInGap = 0;
          }
          continue;
        }
        // A message the application gets: progress, the attempts start over.
        attempt = 0;
        out.push(stampedBack(message, first, context.currentId));
        if (answersAttempt(message, context.currentId)) break;
      }
      enqueue.assign({ acknowledged, gapOpen, attempt, attemptsInGap, lastPosition });
      if (out.length > 0) enqueue.emit({ type: 'listen.deliver', messages: out });
    }),
    deliverJsonAnswer: enqueueActions(({ context, event, enqueue }) => {
      const message = event.type === 'http.response' ? asJsonRpcMessage(event.body) : undefined;
      if (message !== undefined)
        enqueue.emit({
          type: 'listen.deliver',
          messages: [stampedBack(message, context.request.id, context.currentId)],
        });
    }),
    noteBreak: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ gapOpen: context.gapOpen || context.acknowledged });
      enqueue.emit({ type: 'listen.broken', attempt: context.attempt });
    }),
    scheduleReopen: assign({
      nextDelayMs: ({ context }) =>
        reconnectDelay(
          context.attempt,
          context.policy,
          context.serverRetryMs,
          (context.jitterSeed + Math.imul(context.reopens, 0x2545f491)) >>> 0,
        ),
      attempt: ({ context }) => context.attempt + 1,
    }),
    startReopen: assign({
      reopens: ({ context }) => context.reopens + 1,
      currentId: ({ context }) => reopenId(context.request.id, context.reopens + 1),
      reopenedFrom: ({ context }) => context.lastPosition,
      attemptsInGap: ({ context }) => context.attemptsInGap + 1,
    }),
    noteRefusal: assign({
      refusal: ({ event }) => (event.type === 'http.response' ? event.status : undefined),
    }),
  },
}).createMachine({
  id: 'listen',
  context: ({ input }) => ({
    request: input.request,
    policy: input.policy ?? DEFAULT_RECONNECT_POLICY,
    jitterSeed: input.jitterSeed,
    stallTimeoutMs: input.stallTimeoutMs ?? 0,
    useExtension: input.useExtension ?? true,
    lastPosition: undefined,
    reopenedFrom: undefined,
    currentId: input.request.id,
    handedOver: false,
    acknowledged: false,
    gapOpen: false,
    attempt: 0,
    reopens: 0,
    attemptsInGap: 0,
    serverRetryMs: undefined,
    nextDelayMs: 0,
    refusal: undefined,
  }),
  initial: 'exchanging',
  on: { 'app.close': '.closed' },
  states: {
    /** One attempt's HTTP exchange, from the POST to the end of its body. */
    exchanging: {
      invoke: { src: 'exchange', input: ({ context }) => exchangeFor(context) },
      // Not restarted by what arrives (only `streaming` is re-entered): up since the POST.
      after: { listenSteady: { guard: 'acknowledgedHere', actions: assign({ attempt: 0 }) } },
      initial: 'connecting',
      states: {
        connecting: {
          // Silent before the headers: a stall. Before the handover that is the first attempt failing
          // (the application gets the error), after it a break.
          after: { listenStall: { guard: 'stallDetectionOn', target: '#listen.stalled' } },
          on: {
            'sse.activity': { target: 'connecting', reenter: true },
            'http.stream': { target: 'streaming', actions: 'handOver' },
            'http.response': [
              // The first attempt's answer is the server's to give: the application gets it unchanged.
              { guard: { type: 'handedOver' }, target: '#listen.decidingRefusal' },
              { target: '#listen.notOpened' },
            ],
            'net.failed': [
              { guard: 'handedOver', target: '#listen.broken' },
              { target: '#listen.notOpened' },
            ],
          },
        },
        /** Reading the stream; acknowledged or not yet (`context.acknowledged`). */
        streaming: {
          // Every unit that arrives re-enters this state, which restarts the stall timer.
          after: { listenStall: { guard: 'stallDetectionOn', target: '#listen.broken' } },
          on: {
            'sse.events': [
              { guard: 'streamAnswered', target: '#listen.endedByServer', actions: ['noteRetry', 'absorb'] },
              { target: 'streaming', reenter: true, actions: ['noteRetry', 'absorb'] },
            ],
            'sse.event': [
              { guard: 'streamAnswered', target: '#listen.endedByServer', actions: 'absorb' },
              { target: 'streaming', reenter: true, actions: 'absorb' },
            ],
            'sse.retry': { target: 'streaming', reenter: true, actions: 'noteRetry' },
            'sse.activity': { target: 'streaming', reenter: true },
            'net.ended': '#listen.broken',
            'net.failed': '#listen.broken',
          },
        },
      },
    },
    /** A re-open answered without a stream (the application already holds one). */
    decidingRefusal: {
      always: [
        { guard: 'jsonAnswer', target: 'endedByServer', actions: 'deliverJsonAnswer' },
        { guard: 'permanentRefusal', target: 'givenUp', actions: 'noteRefusal' },
        { target: 'backoff', actions: 'scheduleReopen' },
      ],
    },
    /** No byte before the headers for `stallTimeoutMs`. */
    stalled: {
      always: [{ guard: 'handedOver', target: 'broken' }, { target: 'notOpened' }],
    },
    /** The stream broke: a gap opens if it had been acknowledged. */
    broken: {
      entry: 'noteBreak',
      always: { target: 'backoff', actions: 'scheduleReopen' },
    },
    backoff: {
      after: { listenBackoff: { target: 'exchanging', actions: 'startReopen' } },
    },
    /** The first attempt was refused or failed: the application got the server's answer unchanged. */
    notOpened: { type: 'final' },
    /** The server answered the listen request (graceful close or an error): delivered, the body ends. */
    endedByServer: { type: 'final' },
    /** A re-open was refused for good (`context.refusal`): the body ends with an error. */
    givenUp: { type: 'final' },
    /** The application closed the subscription: nothing is re-opened. */
    closed: { type: 'final' },
  },
});
