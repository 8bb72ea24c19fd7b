import { parseEventId } from '../event-id.js';
import { isRequest, isResponse, type JsonRpcMessage, type JsonRpcRequest } from '../jsonrpc.js';
import type { SseEvent } from './io.js';
import { acceptableEventId } from './limits.js';
import { malformedAnswer } from './wire.js';

/** What the decisions about SSE events read of their stream: what it is… */
export interface StreamView {
  readonly kind: 'request' | 'standalone' | 'message';
  readonly sessionId?: string;
  readonly body?: JsonRpcMessage;
  /** The cursor the stream was started from (a restored stream's, or a request's `resumptionToken`). */
  readonly lastEventId?: string;
}

/** …and how far it got. */
export interface StreamCursorView {
  readonly lastEventId: string | undefined;
  /** Ids already delivered, for servers whose ids are opaque (bounded, oldest first). */
  readonly recentIds: readonly string[];
}

export interface DeliveredMessage {
  readonly eventId?: string;
  readonly message: JsonRpcMessage;
}

/**
 * What a run of SSE events does to an open stream, decided event by event as if they had come one at a
 * time: the stream machine takes a whole parsed chunk in one step with this.
 */
export interface Absorbed {
  /** Messages for the parent, in order. Replay overlaps and priming events are not among them. */
  readonly messages: DeliveredMessage[];
  /** The cursor after the run: the id of the last event that was neither an overlap nor the end. */
  readonly lastEventId: string | undefined;
  /** The ids that moved the cursor, in order (the stream remembers them for opaque-id servers). */
  readonly newIds: string[];
  /**
   * What ended the stream inside the run; events after it are not read. `close`: the server sent
   * `event: close`. `answered`: the request's own answer. On a stream that has a session (`inSession`)
   * the parent takes it together with the stream's end, so it is not in `messages` and does not move the
   * cursor; on a stream without one (the initialize's) it is the last of `messages`, like any message.
   */
  readonly end:
    | { readonly kind: 'close' }
    | { readonly kind: 'answered'; readonly answer: DeliveredMessage; readonly inSession: boolean }
    | undefined;
}

/** True when `id` was delivered before: same-stream ids of ours compare by sequence, others by memory. */
export function alreadyDelivered(ctx: StreamCursorView, id: string): boolean {
  return deliveredBefore(ctx.lastEventId, () => ctx.recentIds, id);
}

/** How many delivered ids a stream remembers, for servers whose ids are opaque. */
export const RECENT_IDS = 512;

/** Adds delivered ids to a stream's memory of them, in place, keeping the newest `RECENT_IDS`. */
export function rememberIds(recent: string[], ids: readonly string[]): string[] {
  recent.push(...ids.slice(-RECENT_IDS));
  if (recent.length > RECENT_IDS) recent.splice(0, recent.length - RECENT_IDS);
  return recent;
}

/** Same-stream ids of ours compare by sequence; any other id is looked up in the remembered ones. */
function deliveredBefore(
  lastEventId: string | undefined,
  recentIds: () => readonly string[],
  id: string,
): boolean {
  const seen = lastEventId === undefined ? undefined : parseEventId(lastEventId);
  const next = parseEventId(id);
  if (seen && next && seen.epoch === next.epoch && seen.stream === next.stream) return next.seq <= seen.seq;
  return recentIds().includes(id);
}

/**
 * The request stream's own answer: a response to the request it POSTed. A request stream without a body
 * (restored from the cursor record by a new process, or resumed by the application) never knew its
 * request; a request stream carries one response, its request's, so any response there is its answer and
 * ends it. Otherwise the stream would outlive its answer and resume from the answer's id until it gave up.
 */
export const answersOwnRequest = (view: StreamView, message: JsonRpcMessage | undefined): boolean =>
  message !== undefined &&
  view.kind === 'request' &&
  isResponse(message) &&
  (view.body === undefined || message.id === (view.body as JsonRpcRequest).id);

/**
 * A request the application sent with the SDK's `resumptionToken` is never POSTed: its stream resumes the
 * stream of the request it stands for (started with both a body and a cursor), and a response there is its
 * answer, whatever id it carries, as the SDK's `replayMessageId` makes it. (The SDK rewrites result
 * responses only; an error answer left with the old id would leave the call waiting for its timeout.)
 */
function asReplayedAnswer(view: StreamView, message: JsonRpcMessage | undefined): JsonRpcMessage | undefined {
  if (message === undefined || view.lastEventId === undefined || view.kind !== 'request') return message;
  const body = view.body;
  if (body === undefined || !isRequest(body) || !isResponse(message) || message.id === body.id)
    return message;
  return { ...message, id: body.id };
}

/**
 * Reads a run of events on an open stream, in order:
 * - `event: close` ends the stream; nothing after it is read;
 * - an event whose id was delivered before is a replay overlap: dropped (still proof of life);
 * - an event without data is a priming event: it only moves the cursor;
 * - the request's own answer ends the stream (`end.answered`). On a stream with a session, which exists
 *   only while its session is active, the parent takes answer and end as one; on a stream without one
 *   it is handed on as the last message;
 * - any other message is handed on and moves the cursor.
 */
export function absorbEvents(
  view: StreamView,
  cursor: StreamCursorView,
  events: readonly SseEvent[],
): Absorbed {
  const messages: DeliveredMessage[] = [];
  const newIds: string[] = [];
  let lastEventId = cursor.lastEventId;
  // The remembered ids as they stand at each event, as if the events had come one by one (bounded the
  // same way). Copied on the first lookup after this run delivered an id; kept up to date from then on.
  let recent: string[] | undefined;
  const remembered = (): readonly string[] => {
    if (newIds.length === 0) return cursor.recentIds;
    recent ??= [...cursor.recentIds, ...newIds].slice(-RECENT_IDS);
    return recent;
  };
  for (const event of events) {
    if (event.event === 'close') return { messages, lastEventId, newIds, end: { kind: 'close' } };
    // An over-long id is a protocol error: the event counts, its id is never kept nor sent back.
    const id = acceptableEventId(event.id) ? event.id : undefined;
    if (id !== undefined) {
      if (deliveredBefore(lastEventId, remembered, id)) continue;
    }
    const message = asReplayedAnswer(view, event.message ?? malformedOwnAnswer(view, event));
    if (message !== undefined && view.sessionId !== undefined && answersOwnRequest(view, message)) {
      const answer = { eventId: id, message };
      return { messages, lastEventId, newIds, end: { kind: 'answered', answer, inSession: true } };
    }
    if (id !== undefined) {
      lastEventId = id;
      newIds.push(id);
      if (recent) rememberIds(recent, [id]);
    }
    if (message === undefined) continue;
    const delivered = { eventId: id, message };
    messages.push(delivered);
    if (answersOwnRequest(view, message))
      return {
        messages,
        lastEventId,
        newIds,
        end: { kind: 'answered', answer: delivered, inSession: false },
      };
  }
  return { messages, lastEventId, newIds, end: undefined };
}

/** An event that is not JSON-RPC but names this stream's request: its answer, unreadable. The call ends. */
function malformedOwnAnswer(view: StreamView, event: SseEvent): JsonRpcMessage | undefined {
  const own = view.kind === 'request' ? (view.body as JsonRpcRequest | undefined)?.id : undefined;
  return own !== undefined && event.invalid?.id === own ? malformedAnswer(own) : undefined;
}
