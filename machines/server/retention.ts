import { ResumeRejection } from '../codes.js';
import { type EventCursor, formatEventId, parseEventId } from '../event-id.js';

/**
 * The retained window of one stream and the answer to a cursor. Storage (memory, SQLite, Redis) keeps
 * the events; these functions decide what is kept and what a resume gets, so every backend agrees.
 */
export interface RetentionPolicy {
  /** Events kept per stream; the oldest go first. */
  readonly maxEventsPerStream: number;
  /** Events older than this are evicted. */
  readonly retentionMs: number;
}

export const DEFAULT_RETENTION_POLICY: RetentionPolicy = { maxEventsPerStream: 1000, retentionMs: 600_000 };

/**
 * Sequence numbers `oldest..head` are retained (empty when `oldest > head`). `appendedAt[i]` is the time
 * event `oldest + i` was appended. Sequence 0 is the priming event, never stored, never lost.
 */
export interface StreamWindow {
  readonly oldest: number;
  readonly head: number;
  readonly appendedAt: readonly number[];
  /** The stream has ended on the server (its response was written); nothing more will be appended. */
  readonly finished: boolean;
}

export const EMPTY_WINDOW: StreamWindow = { oldest: 1, head: 0, appendedAt: [], finished: false };

export function retainedCount(w: StreamWindow): number {
  return w.head - w.oldest + 1;
}

/** Appends one event at time `at`, then evicts; returns the new window and the event's sequence number. */
export function appendToWindow(
  w: StreamWindow,
  at: number,
  policy: RetentionPolicy,
): { window: StreamWindow; seq: number } {
  const seq = w.head + 1;
  const grown = { ...w, head: seq, appendedAt: [...w.appendedAt, at] };
  return { window: evictWindow(grown, at, policy), seq };
}

/**
 * The first sequence number to keep: the count bound and the age bound, whichever keeps less. Stores
 * that can look up "the first event appended at or after a time" (an index on SQLite, a stream id on
 * Redis) call this directly; `evictWindow` uses it on an in-memory window.
 */
export function retainFrom(
  w: { readonly oldest: number; readonly head: number },
  policy: RetentionPolicy,
  now: number,
  firstSeqAtOrAfter: (cutoff: number) => number | undefined,
): number {
  const byCount = w.head - policy.maxEventsPerStream + 1;
  const byAge = firstSeqAtOrAfter(now - policy.retentionMs) ?? w.head + 1;
  return Math.max(w.oldest, byCount, byAge);
}

/** Drops events beyond the count bound and those older than the retention period, oldest first. */
export function evictWindow(w: StreamWindow, now: number, policy: RetentionPolicy): StreamWindow {
  const from = retainFrom(w, policy, now, (cutoff) => {
    const i = w.appendedAt.findIndex((t) => t >= cutoff);
    return i < 0 ? undefined : w.oldest + i;
  });
  const drop = from - w.oldest;
  if (drop === 0) return w;
  return { ...w, oldest: from, appendedAt: w.appendedAt.slice(drop) };
}

export function finishWindow(w: StreamWindow): StreamWindow {
  return w.finished ? w : { ...w, finished: true };
}

/** What the session knows that a cursor is checked against. */
export interface CursorContext {
  readonly epoch: string;
  /** Epochs of logs this session had before a reset: a cursor into one lost everything it pointed at. */
  readonly previousEpochs: readonly string[];
  /** Stream numbers this session has opened. */
  readonly knownStreams: ReadonlySet<number>;
  /** The retained window of the cursor's stream, read from the log (after age eviction at `now`). */
  readonly window: StreamWindow | undefined;
}

export type ResumeAnswer =
  /** Replay every retained event with seq > afterSeq on `stream`, in order, then continue live. */
  | { readonly kind: 'replay'; readonly stream: number; readonly afterSeq: number }
  /** 410: events were evicted (or the log was reset); the body carries the details. */
  | {
      readonly kind: 'gone';
      readonly reason: typeof ResumeRejection.windowExceeded | typeof ResumeRejection.epochChanged;
      readonly stream: number;
      readonly requestedId: string;
      readonly oldestId?: string;
      readonly headId?: string;
      readonly lostCount: number | null;
      readonly resumeAfter?: string;
      readonly streamComplete: boolean;
    }
  /** 400: not a cursor this session ever issued. */
  | {
      readonly kind: 'invalid';
      readonly reason: typeof ResumeRejection.malformedCursor | typeof ResumeRejection.foreignCursor;
      readonly requestedId: string;
    }
  /** 404: the session itself is gone. */
  | { readonly kind: 'unknown-session' };

/** The HTTP status each answer is sent with. */
export const RESUME_STATUS: Record<ResumeAnswer['kind'], number> = {
  replay: 200,
  gone: 410,
  invalid: 400,
  'unknown-session': 404,
};

/**
 * Answers `Last-Event-ID`. Never a silent resume at head, never another stream's or session's events.
 * The spec is silent on unknown cursors; this is the gap the design note's condition 3 closes.
 */
export function answerCursor(lastEventId: string, ctx: CursorContext): ResumeAnswer {
  const cursor = parseEventId(lastEventId);
  if (!cursor) return { kind: 'invalid', reason: ResumeRejection.malformedCursor, requestedId: lastEventId };
  if (ctx.previousEpochs.includes(cursor.epoch)) {
    return {
      kind: 'gone',
      reason: ResumeRejection.epochChanged,
      stream: cursor.stream,
      requestedId: lastEventId,
      lostCount: null,
      streamComplete: true,
    };
  }
  if (cursor.epoch !== ctx.epoch || !ctx.knownStreams.has(cursor.stream)) {
    return { kind: 'invalid', reason: ResumeRejection.foreignCursor, requestedId: lastEventId };
  }
  const w = ctx.window;
  if (!w) {
    // A stream this session opened whose every event has aged out and been swept: gone, size unknown.
    return {
      kind: 'gone',
      reason: ResumeRejection.windowExceeded,
      stream: cursor.stream,
      requestedId: lastEventId,
      lostCount: null,
      streamComplete: true,
    };
  }
  if (cursor.seq > w.head) {
    // A cursor past the head was never issued by this log.
    return { kind: 'invalid', reason: ResumeRejection.foreignCursor, requestedId: lastEventId };
  }
  if (cursor.seq >= w.oldest - 1) return { kind: 'replay', stream: cursor.stream, afterSeq: cursor.seq };
  const at = (seq: number): string => formatEventId({ ...cursor, seq } satisfies EventCursor);
  return {
    kind: 'gone',
    reason: ResumeRejection.windowExceeded,
    stream: cursor.stream,
    requestedId: lastEventId,
    oldestId: at(w.oldest),
    headId: at(w.head),
    lostCount: w.oldest - 1 - cursor.seq,
    resumeAfter: at(w.oldest - 1),
    streamComplete: w.finished,
  };
}

/**
 * A log's sweep forgets a stream that is finished and has nothing left to replay: from then on it reads as
 * unknown (no window), and a cursor into it is answered gone with an unknown count. Unfinished streams are
 * kept even when empty: their head is what the next sequence number and cursor checks are based on.
 */
export const forgottenBySweep = (w: Pick<StreamWindow, 'finished' | 'head' | 'oldest'>): boolean =>
  w.finished && w.head < w.oldest;

/**
 * A response attached to a stream has written up to `lastSent`; the log now holds `w`. True when events
 * it has not written yet were evicted meanwhile (a reader slower than the retention bound): writing on
 * would skip them. The response must end instead, so the client resumes with its cursor and is told
 * exactly what it lost (410).
 */
export function lostWhileAttached(w: StreamWindow, lastSent: number): boolean {
  return w.oldest > lastSent + 1 && w.head > lastSent;
}

/**
 * The request streams whose answer will never be written: the instance running the request is gone (the
 * process died and restarted, or, with several instances, its lease ran out) and the stream is not
 * finished. Each gets an outcome-unknown answer; the rest are complete or still running somewhere alive.
 * `isOwnerAlive` defaults to "nobody": a single process restarting outlives none of its old requests.
 */
export function interruptedRequests(
  streams: Readonly<
    Record<number, { readonly kind: string; readonly requestKey?: string; readonly owner?: string }>
  >,
  windowOf: (stream: number) => StreamWindow | undefined,
  isOwnerAlive: (owner: string | undefined) => boolean = () => false,
): Array<{ stream: number; requestKey: string }> {
  const out: Array<{ stream: number; requestKey: string }> = [];
  for (const [n, record] of Object.entries(streams)) {
    if (record.kind !== 'request' || record.requestKey === undefined) continue;
    if (isOwnerAlive(record.owner)) continue;
    const window = windowOf(Number(n));
    if (window && !window.finished) out.push({ stream: Number(n), requestKey: record.requestKey });
  }
  return out;
}
