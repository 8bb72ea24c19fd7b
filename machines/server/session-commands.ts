import { parseEventId, STANDALONE_STREAM } from '../event-id.js';
import { isResponse, type JsonRpcMessage, type RequestId, requestKey } from '../jsonrpc.js';
import { type ServerLimits, tooManyOpenRequests } from './limits.js';
import { type ErrorReply, limitReached, resumeRejected, SESSION_NOT_FOUND } from './replies.js';
import { lostWhileAttached, type ResumeAnswer, type StreamWindow } from './retention.js';
import type { AttachDecision, RequestDecision } from './session.machine.js';

/**
 * What a session does with its machine's answer, as commands. The runtime (src/server) executes them
 * with a log, sockets and timers; the simulated world (properties/world) with simulated ones. Neither
 * decides anything of its own: which answer, which stream, what is stored and in which order is here.
 */

/** Before the response opens: bookkeeping and storage, in order. */
export type PrepareCommand =
  /** A use of the session: its idle clock restarts (`session.activity`). */
  | { readonly kind: 'record-activity' }
  /** The request runs here: its answer and related notifications go to `stream`. */
  | { readonly kind: 'run-here'; readonly requestKey: string; readonly stream: number }
  /** The stream exists in the log before anything is written to or read from it. */
  | { readonly kind: 'open-stream'; readonly stream: number }
  /** The session record is written to the log's registry (a durable log outlives the process). */
  | { readonly kind: 'persist' };

/** Once the response is open (an SSE stream), in order. */
export type ResponseCommand =
  /** The priming event: an id the client can resume from before the first real event, with `retry`. */
  | { readonly kind: 'prime'; readonly stream: number; readonly seq: number | 'head' }
  /** Only the `retry` field (a resumed stream's client already holds a cursor). */
  | { readonly kind: 'retry' }
  /**
   * This response becomes the stream's reader (ending any previous reader of it): the log's events
   * after `afterSeq` are written in order, then what is appended, until the stream finishes.
   */
  | {
      readonly kind: 'attach';
      readonly stream: number;
      readonly afterSeq: number | 'head';
      /** False when this request opened the stream just now: it holds nothing yet, no read is needed. */
      readonly readBack: boolean;
    }
  /** The SDK server (the world's tool) is handed the request. */
  | { readonly kind: 'execute'; readonly requestKey: string; readonly stream: number };

export type SessionPlan =
  | { readonly kind: 'error'; readonly error: ErrorReply; readonly prepare: PrepareCommand[] }
  /** A repeated request id: never run twice; answered with the original stream, replayed from `seq`. */
  | {
      readonly kind: 'resume';
      readonly stream: number;
      readonly seq: number;
      readonly prepare: PrepareCommand[];
    }
  | { readonly kind: 'stream'; readonly prepare: PrepareCommand[]; readonly respond: ResponseCommand[] }
  /** A notification or response the SDK server is handed: 202. */
  | { readonly kind: 'accept'; readonly prepare: PrepareCommand[] };

/** Facts about where the session is kept, that change what is persisted. */
export interface Keeping {
  /**
   * Several instances share the session's record: every decision that changes what they must agree on
   * commits it, and opens the streams it numbered, so nothing is persisted or opened separately.
   */
  readonly sharedStore: boolean;
}

/** A POSTed request, after the machine's `decision.request`. */
export function planRequest(
  decision: RequestDecision,
  key: string,
  keeping: Keeping,
  limits: Pick<ServerLimits, 'maxOpenRequestStreamsPerSession' | 'retryAfterSeconds'>,
): SessionPlan {
  if (decision.kind === 'unknown-session') return notFound;
  if (decision.kind === 'limited') {
    return { kind: 'error', error: limitReached(tooManyOpenRequests(limits)), prepare: [] };
  }
  const activity: PrepareCommand = { kind: 'record-activity' };
  if (decision.kind === 'duplicate')
    return { kind: 'resume', stream: decision.stream, seq: 0, prepare: [activity] };
  const { stream } = decision;
  return {
    kind: 'stream',
    prepare: [
      activity,
      { kind: 'run-here', requestKey: key, stream },
      // Sharing a store, the commit that admitted the request opened its stream in the same step
      // (machines/server/shared-record.ts); alone, the log opens it here.
      ...(keeping.sharedStore ? [] : [{ kind: 'open-stream', stream } as const]),
      ...persisted(keeping),
    ],
    respond: [
      { kind: 'prime', stream, seq: 0 },
      { kind: 'attach', stream, afterSeq: 0, readBack: false },
      { kind: 'execute', requestKey: key, stream },
    ],
  };
}

/** GET + Last-Event-ID, after the machine's `decision.resume`: the refusal, or a replay that continues live. */
export function planResume(answer: ResumeAnswer): SessionPlan {
  if (answer.kind === 'unknown-session') return notFound;
  // A refused cursor is still a use of the session (its client is there): the idle clock restarts.
  if (answer.kind !== 'replay') {
    return { kind: 'error', error: resumeRejected(answer), prepare: [{ kind: 'record-activity' }] };
  }
  return {
    kind: 'stream',
    prepare: [{ kind: 'record-activity' }],
    respond: [
      { kind: 'retry' },
      { kind: 'attach', stream: answer.stream, afterSeq: answer.afterSeq, readBack: true },
    ],
  };
}

/** GET without a cursor, after the machine's `decision.attach`: the standalone stream, from its start or head. */
export function planStandalone(decision: AttachDecision, keeping: Keeping): SessionPlan {
  if (decision.kind === 'unknown-session') return notFound;
  const at = decision.from === 'start' ? 0 : 'head';
  return {
    kind: 'stream',
    prepare: [
      { kind: 'record-activity' },
      { kind: 'open-stream', stream: STANDALONE_STREAM },
      ...persisted(keeping),
    ],
    respond: [
      { kind: 'prime', stream: STANDALONE_STREAM, seq: at },
      { kind: 'attach', stream: STANDALONE_STREAM, afterSeq: at, readBack: true },
    ],
  };
}

/** Not this caller's session, or no longer a session: nothing happens to it. */
const notFound: SessionPlan = { kind: 'error', error: SESSION_NOT_FOUND, prepare: [] };

const persisted = (keeping: Keeping): PrepareCommand[] => (keeping.sharedStore ? [] : [{ kind: 'persist' }]);

/**
 * The stream a `Last-Event-ID` points into, when it is a cursor of this epoch: its log window is read for
 * the machine's answer. Any other cursor is answered by the machine without one.
 */
export function cursorStream(lastEventId: string, epoch: string): number | undefined {
  const cursor = parseEventId(lastEventId);
  return cursor && cursor.epoch === epoch ? cursor.stream : undefined;
}

/** A POSTed notification or response, after the machine's `decision.message`. */
export function planMessage(accepted: boolean): SessionPlan {
  return accepted ? { kind: 'accept', prepare: [{ kind: 'record-activity' }] } : notFound;
}

/**
 * Where a message the SDK server sends goes. A response goes to its request's stream and finishes it
 * (`final`), or nowhere when that request no longer runs here (given up, or answered for by another
 * instance); anything else goes to the stream of the request it relates to, else the standalone stream.
 */
export type OutboundRoute =
  | { readonly kind: 'drop' }
  | { readonly kind: 'final'; readonly stream: number; readonly requestKey: string }
  | { readonly kind: 'event'; readonly stream: number };

export function routeOutbound(
  message: JsonRpcMessage,
  relatedRequestId: RequestId | undefined,
  running: ReadonlyMap<string, number>,
): OutboundRoute {
  if (isResponse(message)) {
    const key = message.id === null ? undefined : requestKey(message.id);
    const stream = key === undefined ? undefined : running.get(key);
    return key === undefined || stream === undefined
      ? { kind: 'drop' }
      : { kind: 'final', stream, requestKey: key };
  }
  const stream = relatedRequestId === undefined ? undefined : running.get(requestKey(relatedRequestId));
  return { kind: 'event', stream: stream ?? STANDALONE_STREAM };
}

/** Events read back from a stream's log for a reader that has written up to `lastSent`. */
export interface ReplayStep<E extends { readonly seq: number }> {
  /** The events to write now, in order: each is the next one the client lacks. */
  readonly write: readonly E[];
  /** The reader's cursor after writing them. */
  readonly lastSent: number;
  /**
   * `lost`: events it has not written were evicted meanwhile (a reader slower than retention); writing on
   * would skip them, so the response ends and the client resumes into a 410 that says what it lost.
   * `finished`: the stream's answer is written; the response ends. Undefined: it stays attached.
   */
  readonly end?: 'lost' | 'finished';
}

/** The replay rule: only the next event in sequence is ever written, never a gap. */
export function replayStep<E extends { readonly seq: number }>(
  window: StreamWindow,
  events: readonly E[],
  lastSent: number,
): ReplayStep<E> {
  if (lostWhileAttached(window, lastSent)) return { write: [], lastSent, end: 'lost' };
  const write: E[] = [];
  let cursor = lastSent;
  for (const e of events) {
    if (e.seq !== cursor + 1) continue;
    write.push(e);
    cursor = e.seq;
  }
  return { write, lastSent: cursor, ...(window.finished ? { end: 'finished' } : {}) };
}
