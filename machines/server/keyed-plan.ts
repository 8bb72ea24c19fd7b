import { JsonRpcCode } from '../codes.js';
import {
  CANCEL_METHOD,
  CONTINUITY_ERROR_STATUS,
  ContinuityErrorCode,
  type KeyReading,
  readCancelKey,
  readContinuityMeta,
} from '../continuity-extension.js';
import { isResponse, type JsonRpcMessage, type RequestId } from '../jsonrpc.js';
import {
  KEYED_STREAM,
  type KeyedWorkState,
  keyedEventId,
  type MemoEntry,
  stepMemoEntry,
} from './keyed-memo.js';
import { admitUnknownKey, keyedResume, type RecordedOutcome } from './keyed-request.machine.js';
import { lostWhileAttached, type ResumeAnswer, type StreamWindow } from './retention.js';

/**
 * What the server does with one keyed request of the continuity extension (docs/continuity-extension.md
 * §4, §5), as commands: the runtime (src/server/keyed) executes them with a memo store, an event log and
 * HTTP; the simulated world with simulated ones. Which answer, which HTTP status, which id a delivered
 * message carries: all decided here (the key's fate by `keyedRequestMachine`, through `stepMemoEntry`).
 */

/** One attempt of a keyed call: the JSON-RPC id and progress token its own response must carry. */
export interface Attempt {
  readonly id: RequestId;
  /** `params._meta.progressToken` of this attempt, if it asked for progress. */
  readonly progressToken?: string | number;
}

/** An HTTP error answer of a keyed request: a JSON-RPC error body carrying the attempt's id. */
export interface KeyedReply {
  readonly status: number;
  readonly error: { readonly code: number; readonly message: string; readonly data?: unknown };
  /** Sent as `Retry-After` (429). */
  readonly retryAfterSeconds?: number;
}

/** The plan for a keyed `tools/call`. */
export type KeyedPlan =
  /** Nothing runs; answer this. */
  | { readonly kind: 'reply'; readonly reply: KeyedReply }
  /**
   * The key is new: create its entry (atomically: set-if-absent, within the per-principal bound), then
   * run the body and serve the response from the key's log from its start. If the entry exists by then
   * (another attempt won the race), plan again with it; if the bound refuses, answer 429.
   */
  | { readonly kind: 'execute' }
  /**
   * Serve the response from the key's log: events after `afterSeq`, live ones while it runs, then the
   * outcome (recorded, cancelled or unknown) as `attachStep` says. Never runs anything.
   */
  | { readonly kind: 'serve'; readonly afterSeq: number }
  /**
   * The entry is `running` but its owner is gone: record `instance.died` (compare-and-set from running),
   * then plan again with what the store holds.
   */
  | { readonly kind: 'declare-died' }
  /**
   * The entry is `refused` (nothing ran under the key): replace it (compare-and-set from refused) with a
   * fresh running entry, then run the body as for a new key. If another attempt replaced it first, plan
   * again with what the store holds.
   */
  | { readonly kind: 'execute-over' };

/** What `planKeyedCall` is told. */
export interface KeyedCallFacts {
  readonly reading: Extract<KeyReading, { kind: 'keyed' }>;
  readonly fingerprint: string;
  /** The memo's entry for (principal, key), if any. */
  readonly entry: MemoEntry | undefined;
  /** The window of the entry's log (undefined when it has none, or no entry). */
  readonly window: StreamWindow | undefined;
  /** Whether the entry's owner is alive (this instance, or a live lease). Only read for a running entry. */
  readonly ownerAlive: boolean;
  /** How long the memo has been keeping every key it saw (§4 first rows). */
  readonly memoCompleteForMs: number;
  readonly memoWindowMs: number;
}

const INVALID_PARAMS = -32602;

/**
 * Memo lookup + the request's reading → the plan (§4's table). The key's fate is the machine's: the
 * request is a `reissue.arrived` of the stored entry (a duplicate first attempt is a re-issue that saw
 * no event).
 */
export function planKeyedCall(facts: KeyedCallFacts): KeyedPlan {
  const { reading, entry } = facts;
  if (!entry) {
    const decision = admitUnknownKey(reading.reissue, facts.memoCompleteForMs, facts.memoWindowMs);
    return decision.kind === 'execute'
      ? { kind: 'execute' }
      : { kind: 'reply', reply: outcomeUnknownReply() };
  }
  if (entry.state === 'running' && !facts.ownerAlive && entry.fingerprint === facts.fingerprint) {
    return { kind: 'declare-died' };
  }
  const resume: ResumeAnswer = keyedResume(reading.lastEventId, {
    epoch: entry.epoch,
    stream: KEYED_STREAM,
    window: keyedWindow(entry, unopenedLogWindow(entry, facts.window, reading.lastEventId)),
  });
  const step = stepMemoEntry(entry, {
    type: 'reissue.arrived',
    attacher: 'this',
    fingerprint: facts.fingerprint,
    resume,
  });
  const answer = step.emitted.find((e) => e.type === 'keyed.answer');
  if (answer?.type !== 'keyed.answer') return { kind: 'reply', reply: outcomeUnknownReply() };
  const a = answer.answer;
  switch (a.kind) {
    case 'attach':
    case 'recorded':
      return { kind: 'serve', afterSeq: a.afterSeq };
    case 'refused':
      return {
        kind: 'reply',
        reply: {
          status: CONTINUITY_ERROR_STATUS[ContinuityErrorCode.KEY_REUSED],
          error: {
            code: ContinuityErrorCode.KEY_REUSED,
            message: 'Idempotency key reused for a different request (other method, tool or arguments)',
          },
        },
      };
    case 'evicted':
      return { kind: 'reply', reply: evictedReply(a.resume) };
    case 'invalid-cursor':
      return {
        kind: 'reply',
        reply: {
          status: 400,
          error: {
            code: INVALID_PARAMS,
            message: `Invalid params: lastEventId was never issued for this key (${a.resume.reason})`,
            data: { reason: a.resume.reason, requestedId: a.resume.requestedId },
          },
        },
      };
    case 'cancelled':
      return { kind: 'reply', reply: cancelledReply() };
    case 'start-over':
      return { kind: 'execute-over' };
    default:
      return { kind: 'reply', reply: outcomeUnknownReply() };
  }
}

/**
 * The window a cursor is checked against. Once the outcome is recorded, the final response (sequence
 * `finalSeq`) counts as retained whatever the log did with it: the memo keeps it for the memo window
 * (§4), even after the events aged out of the log, or were swept with it, or before the append of the final
 * response landed. So a re-issue after the events' retention learns the exact count it lost and a
 * `resumeAfter` that gets it the recorded response.
 */
export function keyedWindow(
  entry: Pick<MemoEntry, 'state' | 'finalSeq'>,
  window: StreamWindow | undefined,
): StreamWindow | undefined {
  const recorded = entry.state === 'committed' || entry.state === 'answered';
  if (!recorded || entry.finalSeq === undefined) return window;
  const final = entry.finalSeq;
  const w = window ?? { oldest: final, head: final, appendedAt: [], finished: true };
  return { ...w, oldest: Math.min(w.oldest, final), head: Math.max(w.head, final), finished: true };
}

/** -32012, HTTP 200: the server cannot vouch for whether the keyed request ran. */
export function outcomeUnknownReply(): KeyedReply {
  return {
    status: CONTINUITY_ERROR_STATUS[ContinuityErrorCode.OUTCOME_UNKNOWN],
    error: {
      code: ContinuityErrorCode.OUTCOME_UNKNOWN,
      message: 'Outcome unknown: the server cannot tell whether this keyed request ran',
    },
  };
}

/** -32013, HTTP 200: an explicit cancel (§13, or a `notifications/cancelled`) cancelled the key. */
export function cancelledReply(): KeyedReply {
  return {
    status: CONTINUITY_ERROR_STATUS[ContinuityErrorCode.CANCELLED],
    error: {
      code: ContinuityErrorCode.CANCELLED,
      message: 'Cancelled by an explicit cancel',
    },
  };
}

/** -32011, HTTP 410, with the exact count (§4's `data`). */
export function evictedReply(gone: Extract<ResumeAnswer, { kind: 'gone' }>): KeyedReply {
  const { kind: _kind, stream: _stream, ...data } = gone;
  return {
    status: CONTINUITY_ERROR_STATUS[ContinuityErrorCode.EVENTS_EVICTED],
    error: {
      code: ContinuityErrorCode.EVENTS_EVICTED,
      message: `Events evicted: ${gone.lostCount ?? 'an unknown number of'} events after lastEventId are gone`,
      data,
    },
  };
}

/** -32602, HTTP 400: a malformed key or lastEventId (§3). */
export function invalidKeyReply(why: string): KeyedReply {
  return { status: 400, error: { code: INVALID_PARAMS, message: `Invalid params: ${why}` } };
}

/**
 * 429 with Retry-After: the principal's memo (or, without `authenticate`, the caller address's share of
 * it) is full of entries that may not be evicted (§6).
 */
export function memoFullReply(retryAfterSeconds: number, bound?: 'address'): KeyedReply {
  return {
    status: 429,
    error: {
      code: JsonRpcCode.LIMIT_EXCEEDED,
      message: `Too many idempotency keys remembered for this ${bound ?? 'principal'}; retry later`,
    },
    retryAfterSeconds,
  };
}

/** The JSON-RPC error response of `reply` for `attempt`. */
export function replyMessage(reply: KeyedReply, attempt: Pick<Attempt, 'id'>): JsonRpcMessage {
  return { jsonrpc: '2.0', id: attempt.id, error: { ...reply.error } };
}

/** The response to `attempt` carrying a recorded outcome. */
export function outcomeMessage(outcome: RecordedOutcome, attempt: Pick<Attempt, 'id'>): JsonRpcMessage {
  return outcome.kind === 'result'
    ? { jsonrpc: '2.0', id: attempt.id, result: outcome.result as Record<string, unknown> }
    : { jsonrpc: '2.0', id: attempt.id, error: outcome.error };
}

/** The outcome a final response of the SDK records: its result (even `isError: true`) or its error. */
export function outcomeOf(response: JsonRpcMessage): RecordedOutcome | undefined {
  if (!isResponse(response)) return undefined;
  return 'result' in response
    ? { kind: 'result', result: response.result }
    : { kind: 'error', error: response.error };
}

/**
 * A stored event as `attempt` receives it. Progress carries the attempt's own progress token (or is not
 * sent to an attempt that asked for none: it would be unsolicited); anything else goes as it was sent.
 * Responses are never taken from the log: the outcome comes from the memo (`attachStep`).
 */
export function deliverAs(message: JsonRpcMessage, attempt: Attempt): JsonRpcMessage | undefined {
  if (isResponse(message)) return undefined;
  if ('method' in message && message.method === 'notifications/progress') {
    if (attempt.progressToken === undefined) return undefined;
    return { ...message, params: { ...(message.params ?? {}), progressToken: attempt.progressToken } };
  }
  return message;
}

/** What an attached response writes after one look at the key's log and entry. */
export interface AttachStep<E extends { readonly seq: number; readonly message: JsonRpcMessage }> {
  /** Log events to write now, in order, each the next one in sequence (their SSE id: `keyedEventId`). */
  readonly write: readonly E[];
  readonly lastSent: number;
  /**
   * How the response ends, if it does now: the outcome (with its SSE id's seq), -32013, -32012, or `lost`
   * (events it had not written were evicted: the response ends without an answer, so the client
   * re-issues from its cursor and is told the exact gap by a 410).
   */
  readonly end?:
    | { readonly kind: 'outcome'; readonly outcome: RecordedOutcome; readonly seq: number | undefined }
    | { readonly kind: 'cancelled' }
    | { readonly kind: 'outcome-unknown' }
    | { readonly kind: 'lost' };
  /** The entry is running and its owner is gone: record `instance.died`, then look again. */
  readonly declareDied?: boolean;
}

/**
 * The attached-response rule: write only the next event in sequence, never a gap; end with what the
 * entry holds once its work ended. Events after the final response are none (the log is finished with
 * it), and the final response is written from the memo, where it was recorded first.
 */
export function attachStep<E extends { readonly seq: number; readonly message: JsonRpcMessage }>(
  entry: Pick<MemoEntry, 'state' | 'outcome' | 'finalSeq'> | undefined,
  window: StreamWindow | undefined,
  events: readonly E[],
  lastSent: number,
  ownerAlive: boolean,
): AttachStep<E> {
  const w = entry && window ? keyedWindow(entry, window) : window;
  if (w && lostWhileAttached(w, lastSent)) return { write: [], lastSent, end: { kind: 'lost' } };
  const write: E[] = [];
  let cursor = lastSent;
  for (const e of events) {
    if (e.seq !== cursor + 1) continue;
    cursor = e.seq;
    // A response in the log (the final one) is never written from it: the outcome comes from the memo.
    if (!isResponse(e.message)) write.push(e);
  }
  // Forgotten under the stream (memo window shorter than the call): nothing can be vouched for.
  if (!entry) return { write, lastSent: cursor, end: { kind: 'outcome-unknown' } };
  if (entry.state === 'running') {
    return ownerAlive ? { write, lastSent: cursor } : { write, lastSent: cursor, declareDied: true };
  }
  if (entry.state === 'cancelled') return { write, lastSent: cursor, end: { kind: 'cancelled' } };
  if (entry.state === 'outcomeUnknown') return { write, lastSent: cursor, end: { kind: 'outcome-unknown' } };
  // Recorded: the events before the final one were appended before the outcome was recorded, so they
  // are in the log (or evicted: `lost` above); the outcome goes last, under the final's id. When this
  // read of the log came before the body's last appends and this read of the entry after its record
  // (the runtime reads the log first), the events up to the final one are not all here yet: read again
  // rather than end, or they would be skipped without a gap.
  if (entry.finalSeq !== undefined && cursor < entry.finalSeq - 1) return { write, lastSent: cursor };
  return {
    write,
    lastSent: cursor,
    end: { kind: 'outcome', outcome: entry.outcome as RecordedOutcome, seq: entry.finalSeq },
  };
}

/** The SSE id a written event carries (`keyedEventId`), re-exported for executors. */
export { keyedEventId };

/** What a `notifications/cancelled` carrying a key does (§5): always 202; these steps first. */
export type KeyedCancelPlan =
  /** The key is running: record `cancel.requested` (compare-and-set from running), abort the body. */
  | { readonly kind: 'cancel' }
  /** Unknown key, or its work already ended: the recorded outcome stands; nothing changes. */
  | { readonly kind: 'ignore' };

export function planKeyedCancel(entry: MemoEntry | undefined): KeyedCancelPlan {
  if (!entry) return { kind: 'ignore' };
  const step = stepMemoEntry(entry, { type: 'cancel.requested' });
  return step.changed && step.emitted.some((e) => e.type === 'keyed.abort')
    ? { kind: 'cancel' }
    : { kind: 'ignore' };
}

/**
 * The result of a cancel request (§13): the key's work state once the cancel was applied (`cancelled`, or
 * the recorded outcome's state, which a cancel never changes), or `unknown` when the memo holds no entry
 * for the principal's key (never seen, past its window, or another principal's).
 */
export function cancelResult(after: Pick<MemoEntry, 'state'> | undefined): {
  readonly resultType: 'complete';
  readonly keyState: KeyedWorkState | 'unknown';
} {
  return { resultType: 'complete', keyState: after?.state ?? 'unknown' };
}

/**
 * The stored entry after `event`, or undefined when the machine ignores it there (nothing to write). With
 * `watched`, an outcome is recorded as `answered` (the machine's `someoneWatching`), else `committed`.
 */
export function nextEntry(
  entry: MemoEntry,
  event:
    | { readonly type: 'tool.finished'; readonly outcome: RecordedOutcome; readonly finalSeq: number }
    | { readonly type: 'tool.refused'; readonly outcome: RecordedOutcome; readonly finalSeq: number }
    | { readonly type: 'cancel.requested' }
    | { readonly type: 'instance.died' },
  now: number,
  /** A response of this instance is attached: a recorded outcome goes straight to `answered`. */
  watched = false,
): MemoEntry | undefined {
  const step = stepMemoEntry(
    entry,
    event.type === 'tool.finished' || event.type === 'tool.refused'
      ? { type: event.type, outcome: event.outcome }
      : event,
    watched ? ['watcher'] : [],
  );
  if (!step.changed || step.state === 'forgotten') return undefined;
  return {
    ...entry,
    state: step.state,
    ...(step.outcome === undefined ? {} : { outcome: step.outcome }),
    ...(event.type === 'tool.finished' || event.type === 'tool.refused' ? { finalSeq: event.finalSeq } : {}),
    ...(step.emitted.some((e) => e.type === 'keyed.memo-armed') ? { finishedAt: now } : {}),
  };
}

/** What the instance running a body does when the body's response ended (`final`: its answer, if any). */
export type KeyedRunEnd =
  /** The entry moved on meanwhile (cancelled, or declared dead by another instance): it says so already. */
  | { readonly kind: 'nothing' }
  /** The SDK ended without an answer (its stream broke, it threw): the side effect may have happened. */
  | { readonly kind: 'declare-died' }
  /** Record the outcome (compare-and-set from running), then append the final response to the log. */
  | { readonly kind: 'record'; readonly outcome: RecordedOutcome }
  /** Record the refusal (`tool.refused`, compare-and-set from running): nothing ran; then append it. */
  | { readonly kind: 'refused'; readonly outcome: RecordedOutcome };

export function keyedRunEnd(
  current: Pick<MemoEntry, 'state' | 'owner'> | undefined,
  self: string,
  final: JsonRpcMessage | undefined,
  /** The SDK refused the request before running the tool (`refusedBeforeRun` of its status). */
  refused = false,
): KeyedRunEnd {
  if (current?.state !== 'running' || current.owner !== self) return { kind: 'nothing' };
  const outcome = final === undefined ? undefined : outcomeOf(final);
  if (outcome === undefined) return { kind: 'declare-died' };
  return refused ? { kind: 'refused', outcome } : { kind: 'record', outcome };
}

/**
 * How long the attempt that starts a keyed body waits for the SDK's first answer before it is served from
 * the key's log. The SDK answers at once (its stream starts before the tool runs; a refusal is immediate),
 * so the wait only matters for a slow server factory: past it the attempt gets its stream and keep-alives,
 * and a late refusal reaches it through the log as the recorded answer.
 */
export const KEYED_START_WAIT_MS = 1_000;

/**
 * Whether the SDK's HTTP status for a keyed run says it refused the request before running the tool.
 * The v2 SDK answers every check it makes before dispatching (headers against arguments, scopes, the
 * envelope) with a 4xx, and everything after dispatch (a result, a tool's error, invalid arguments as an
 * `isError` result) with 200. 499 is the SDK's "connection closed" during the run: the tool may have run.
 * A 5xx may come after the tool started. Neither is a refusal.
 */
export function refusedBeforeRun(status: number): boolean {
  return status >= 400 && status < 499;
}

/**
 * The final response a refusal is recorded as: the SDK's JSON-RPC error under the request's id (its body
 * may carry `id: null`), or, when the body is no JSON-RPC error, one naming the status.
 */
export function refusalResponse(status: number, body: unknown, id: RequestId): JsonRpcMessage {
  const error = (body as { error?: unknown } | undefined)?.error as
    | { code?: unknown; message?: unknown; data?: unknown }
    | undefined;
  if (error && typeof error.code === 'number' && typeof error.message === 'string')
    return {
      jsonrpc: '2.0',
      id,
      error: {
        code: error.code,
        message: error.message,
        ...(error.data !== undefined ? { data: error.data } : {}),
      },
    };
  return { jsonrpc: '2.0', id, error: { code: -32600, message: `Refused by the server (HTTP ${status})` } };
}

/**
 * Whether a restart (`restart-entry`: a fresh running entry compare-and-set over a refused one) won: what
 * the store holds after it is that fresh entry. Another attempt's restart, or any other move, is a loss.
 */
export function restartWon(
  stored: Pick<MemoEntry, 'state' | 'logId'> | undefined,
  fresh: Pick<MemoEntry, 'logId'>,
): boolean {
  return stored?.state === 'running' && stored.logId === fresh.logId;
}

/**
 * The final response goes to the log only when this instance's recording won, under the seq it recorded,
 * and only to a log that exists: a key's log is opened by its first event (the log's append), so a body
 * that sent none (`finalSeq` 1) has no log to finish. Its readers take the outcome from the memo anyway
 * (`attachStep`), and the window from the entry (`keyedWindow`): one store write fewer per such call.
 */
export function appendsFinal(
  stored: Pick<MemoEntry, 'state' | 'finalSeq'> | undefined,
  finalSeq: number,
): boolean {
  return (
    finalSeq > 1 &&
    (stored?.state === 'committed' || stored?.state === 'answered' || stored?.state === 'refused') &&
    stored.finalSeq === finalSeq
  );
}

/** A body running here is aborted once its entry is no longer running here (cancelled, declared dead). */
export function abortsLocalRun(entry: Pick<MemoEntry, 'state' | 'owner'> | undefined, self: string): boolean {
  return entry?.state !== 'running' || entry.owner !== self;
}

/**
 * Whether a keyed call creates its entry before reading the memo: a first attempt, whose key is new but
 * for a duplicate (the create answers the entry it finds, planned as a read one). A re-issue reads first:
 * an unknown key is run only once the memo is known complete (`admitUnknownKey`).
 */
export function createsFirst(reading: Pick<Extract<KeyReading, { kind: 'keyed' }>, 'reissue'>): boolean {
  return !reading.reissue;
}

/**
 * Whether an attached response's look reads the key's log after `lastSent`, having read the entry: not
 * once the entry holds the outcome and the response wrote every event before the final one (recorded
 * after them: nothing else is left to write, nothing it has not written can be evicted). Then the
 * outcome is its end (`attachStep`), with no log read.
 */
export function followReadsLog(
  entry: Pick<MemoEntry, 'state' | 'finalSeq'> | undefined,
  lastSent: number,
): boolean {
  const recorded = entry?.state === 'committed' || entry?.state === 'answered' || entry?.state === 'refused';
  return !(recorded && entry.finalSeq !== undefined && lastSent >= entry.finalSeq - 1);
}

/**
 * A running key's log is opened by its first event (the log's append), not with its entry: until then
 * there is none, which reads as an empty log for a re-issue without a cursor (it attaches from the
 * start). A cursor into a log that is not there came from a log lost since (evicted outside the
 * retention rules): gone, count unknown (410), as before.
 */
export function unopenedLogWindow(
  entry: Pick<MemoEntry, 'state'>,
  window: StreamWindow | undefined,
  lastEventId: string | undefined,
): StreamWindow | undefined {
  if (window || entry.state !== 'running' || lastEventId !== undefined) return window;
  return { oldest: 1, head: 0, appendedAt: [], finished: false };
}

/** Whether the owner's liveness matters for what is answered: only while the entry runs. */
/**
 * Whether `planKeyedCall` reads how long the memo has been complete (`admitUnknownKey`): only for a
 * re-issue of a key it does not hold; every other call is planned without it (one store call fewer).
 */
export function needsMemoCompleteness(
  reading: Pick<Extract<KeyReading, { kind: 'keyed' }>, 'reissue'>,
  entry: MemoEntry | undefined,
): boolean {
  return entry === undefined && reading.reissue;
}

export function needsOwnerLiveness(entry: Pick<MemoEntry, 'state'> | undefined): boolean {
  return entry?.state === 'running';
}

/** Whether a message of the SDK's response is the body's final answer (to the request it was handed). */
export function isFinalAnswer(message: JsonRpcMessage, requestId: RequestId): boolean {
  return outcomeOf(message) !== undefined && 'id' in message && message.id === requestId;
}

/** What the keyed runtime does with a message the modern endpoint hands it. */
export type KeyedRoute =
  /** Not keyed: the endpoint serves it as the spec says (closing the stream cancels it). */
  | { readonly kind: 'unkeyed' }
  /** Malformed as a keyed message: answered at once (400 -32602), nothing runs. */
  | { readonly kind: 'reply'; readonly reply: KeyedReply; readonly id: RequestId | null }
  /** A `notifications/cancelled` of the principal's key (§5, the older form): always 202. */
  | { readonly kind: 'cancel'; readonly key: string }
  /** The explicit cancel request of the principal's key (§13): answered with the key's state. */
  | { readonly kind: 'cancel-request'; readonly key: string; readonly id: RequestId }
  /** A keyed `tools/call`. */
  | {
      readonly kind: 'call';
      readonly id: RequestId;
      readonly reading: Extract<KeyReading, { kind: 'keyed' }>;
    };

/** Routes a message by the extension's `_meta` keys (`readContinuityMeta`, §3, §5). */
export function routeKeyedMessage(message: JsonRpcMessage, maxKeyLength: number): KeyedRoute {
  if (!('method' in message)) return { kind: 'unkeyed' };
  const id = 'id' in message ? message.id : null;
  if (message.method === CANCEL_METHOD) {
    if (id === null)
      return { kind: 'reply', reply: invalidKeyReply('the cancel is a request: it needs an id'), id };
    const read = readCancelKey(message.params, maxKeyLength);
    if (read.kind === 'invalid') return { kind: 'reply', reply: invalidKeyReply(read.why), id };
    return { kind: 'cancel-request', key: read.key, id };
  }
  if (message.method === 'notifications/cancelled') {
    const reading = readContinuityMeta(message.params, maxKeyLength);
    if (reading.kind === 'unkeyed') return { kind: 'unkeyed' };
    if (reading.kind === 'invalid') return { kind: 'reply', reply: invalidKeyReply(reading.why), id: null };
    return { kind: 'cancel', key: reading.key };
  }
  const reading = readContinuityMeta(message.params, maxKeyLength, message.method);
  if (reading.kind === 'unkeyed') return { kind: 'unkeyed' };
  if (reading.kind === 'invalid') return { kind: 'reply', reply: invalidKeyReply(reading.why), id };
  if (id === null)
    return { kind: 'reply', reply: invalidKeyReply('a keyed tools/call needs an id'), id: null };
  return { kind: 'call', id, reading };
}

/** The id and progress token an attempt's own messages carry (its `params._meta.progressToken`). */
export function attemptOf(message: { readonly id: RequestId; readonly params?: unknown }): Attempt {
  const meta = (message.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  const token = meta?.progressToken;
  return typeof token === 'string' || typeof token === 'number'
    ? { id: message.id, progressToken: token }
    : { id: message.id };
}
