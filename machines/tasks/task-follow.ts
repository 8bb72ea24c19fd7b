import { backoffCeiling } from '../backoff.js';
import { JsonRpcCode } from '../codes.js';
import { ContinuityErrorCode } from '../continuity-extension.js';
import { type TaskStatus, TERMINAL_STATUSES } from './task.machine.js';
import { TASK_NOT_FOUND_CODE, type TaskError } from './task-record.js';

/**
 * The client's decisions while it follows one task of the tasks extension to its end, pure: when to poll
 * `tasks/get` (the server's `pollIntervalMs`, backed off after failures), what a failed `tasks/get`,
 * `tasks/update` or `tasks/cancel` means (the draft calls them safe to retry: it is retried, never read as
 * a failed task), which input requests to hand the application (each key once: a key whose answer was
 * not acknowledged stays reserved and its answer is re-sent, never asked again), and how the task ends
 * for the application (its result, its error, cancelled, expired, or outcome unknown with the task id
 * when the server stays unreachable). The shell (src/client/modern/tasks-follow.ts) sends and waits.
 *
 * These are the official `@modelcontextprotocol/ext-tasks` 0.2.2 client's three faults the issue lists,
 * decided the other way: no retry of a creation here (the continuity key does that), a failed poll is
 * retried, a failed update keeps its keys.
 */

/** How a followed task is polled and when an unreachable server makes its outcome unknown. */
export interface FollowPolicy {
  /** The fewest milliseconds between two `tasks/get` (a server's smaller `pollIntervalMs` is raised to it). */
  readonly minPollMs: number;
  /** The most milliseconds between two requests (a server's larger interval, a long backoff, are capped). */
  readonly maxPollMs: number;
  /** The first retry's wait after a failed request; doubled per failure in a row. */
  readonly retryDelayMs: number;
  /** Failing in a row for this long ends the follow as outcome unknown (the task may still be running). */
  readonly giveUpAfterMs: number;
  /** A `tasks/*` request with no answer for this long is given up (a fault, retried like a cut). */
  readonly requestTimeoutMs: number;
}

export const DEFAULT_FOLLOW_POLICY: FollowPolicy = {
  minPollMs: 100,
  maxPollMs: 30_000,
  retryDelayMs: 250,
  giveUpAfterMs: 120_000,
  requestTimeoutMs: 30_000,
};

/** What one request of the follow got, as the shell read it (it classifies nothing). */
export type FollowFact =
  /** An HTTP answer: its status, and the JSON-RPC response's `result` or `error` when it carried one. */
  | {
      readonly kind: 'answer';
      readonly status: number;
      readonly result?: unknown;
      readonly error?: TaskError;
      readonly at: number;
    }
  /** The request failed on the way (a cut, a refused connection, a reset, a stall): nothing was read. */
  | { readonly kind: 'fault'; readonly at: number }
  /** The application answered input requests (keys it was handed). */
  | { readonly kind: 'answers'; readonly responses: Readonly<Record<string, unknown>>; readonly at: number }
  /** The application gave up on the call (its abort signal): the task is cancelled. */
  | { readonly kind: 'app-cancel'; readonly at: number };

/** How a followed task ended for the application. */
export type FollowOutcome =
  | { readonly kind: 'completed'; readonly result: unknown }
  /** The task failed on the server: its own JSON-RPC error. */
  | { readonly kind: 'failed'; readonly error: TaskError }
  | { readonly kind: 'cancelled' }
  /** The task is past its TTL or purged after it (the draft's "Task has expired"). */
  | { readonly kind: 'expired' }
  /** Unreachable for `giveUpAfterMs`, unknown to the server, or refused: the task may be running. */
  | { readonly kind: 'unknown'; readonly reason: string; readonly error?: TaskError }
  /** The server asks for input and the application has no way to answer it. */
  | { readonly kind: 'input-unanswerable'; readonly inputRequests: Readonly<Record<string, unknown>> };

/** What the shell does next. */
export type FollowAction =
  | { readonly kind: 'get'; readonly afterMs: number }
  | {
      readonly kind: 'update';
      readonly inputResponses: Readonly<Record<string, unknown>>;
      readonly afterMs: number;
    }
  | { readonly kind: 'cancel'; readonly afterMs: number }
  /** Hand these requests (never handed before) to the application, and report its answers. */
  | { readonly kind: 'ask'; readonly inputRequests: Readonly<Record<string, unknown>> }
  | { readonly kind: 'end'; readonly outcome: FollowOutcome };

export interface FollowState {
  readonly taskId: string;
  readonly status?: TaskStatus;
  readonly pollIntervalMs: number;
  /** Requests of the current exchange that failed in a row, and since when. */
  readonly failures: number;
  readonly failingSince?: number;
  /** The request in flight, retried as it was after a fault. */
  readonly pending: FollowAction;
  /** Every input key handed to the application: never handed again. */
  readonly asked: readonly string[];
  /** Answers not yet acknowledged by the server: re-sent, never asked again. */
  readonly unacked: Readonly<Record<string, unknown>>;
  /** The application can answer input requests. */
  readonly canAsk: boolean;
  /** The application cancelled: every further step drives `tasks/cancel` to an ack. */
  readonly cancelling: boolean;
}

export interface FollowStep {
  readonly state: FollowState;
  readonly action: FollowAction;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const STATUSES: ReadonlySet<string> = new Set([
  'working',
  'input_required',
  'completed',
  'failed',
  'cancelled',
]);

/** The task id of a `tools/call` result that is a task handle (`resultType: "task"`), else undefined. */
export function taskHandleOf(result: unknown): string | undefined {
  if (!isObject(result) || result.resultType !== 'task') return undefined;
  return typeof result.taskId === 'string' && result.taskId.length > 0 ? result.taskId : undefined;
}

/**
 * Starts following the task `taskId`: from the creating call's handle (`CreateTaskResult`: its poll
 * interval is kept, its first `tasks/get` waits for it), or from a journaled id after a restart (a
 * `tasks/get` now).
 */
export function startFollow(
  taskId: string,
  canAsk: boolean,
  handle: Record<string, unknown> | undefined,
  policy: FollowPolicy,
): FollowStep {
  const pending: FollowAction = { kind: 'get', afterMs: 0 };
  const state: FollowState = {
    taskId,
    pollIntervalMs: 0,
    failures: 0,
    pending,
    asked: [],
    unacked: {},
    canAsk,
    cancelling: false,
  };
  return handle ? onTask(state, handle, policy) : { state, action: pending };
}

function pollDelay(state: FollowState, policy: FollowPolicy): number {
  return Math.min(policy.maxPollMs, Math.max(policy.minPollMs, state.pollIntervalMs));
}

function go(state: FollowState, action: FollowAction): FollowStep {
  return { state: { ...state, pending: action }, action };
}

const end = (state: FollowState, outcome: FollowOutcome): FollowStep => go(state, { kind: 'end', outcome });

/** One fact in, the next action out. */
export function followStep(state: FollowState, fact: FollowFact, policy: FollowPolicy): FollowStep {
  if (state.pending.kind === 'end') return { state, action: state.pending };
  if (fact.kind === 'app-cancel')
    return go(
      { ...state, cancelling: true, failures: 0, failingSince: undefined },
      { kind: 'cancel', afterMs: 0 },
    );
  if (fact.kind === 'fault' || (fact.kind === 'answer' && retryableStatus(fact.status, fact.error)))
    return retry(state, fact.at, policy);
  const ok: FollowState = { ...state, failures: 0, failingSince: undefined };
  if (state.cancelling) {
    // An ack, or any answer to the cancel (the task is gone, already terminal): the call is over.
    if (fact.kind === 'answer') return end(ok, { kind: 'cancelled' });
    return { state: ok, action: ok.pending };
  }
  switch (fact.kind) {
    case 'answers': {
      const mine = Object.fromEntries(Object.entries(fact.responses).filter(([k]) => ok.asked.includes(k)));
      const unacked = { ...ok.unacked, ...mine };
      return go({ ...ok, unacked }, { kind: 'update', inputResponses: unacked, afterMs: 0 });
    }
    case 'answer': {
      if (fact.error !== undefined || fact.status !== 200 || !isObject(fact.result))
        return end(ok, errorOutcome(fact.error, fact.status));
      // The update was taken: its keys are answered for good (and still never asked again).
      if (ok.pending.kind === 'update') return go({ ...ok, unacked: {} }, { kind: 'get', afterMs: 0 });
      return onTask(ok, fact.result, policy);
    }
  }
}

function onTask(state: FollowState, task: Record<string, unknown>, policy: FollowPolicy): FollowStep {
  const status =
    typeof task.status === 'string' && STATUSES.has(task.status) ? (task.status as TaskStatus) : undefined;
  const interval =
    typeof task.pollIntervalMs === 'number' && task.pollIntervalMs >= 0 ? task.pollIntervalMs : 0;
  const next: FollowState = {
    ...state,
    pollIntervalMs: interval || state.pollIntervalMs,
    ...(status ? { status } : {}),
  };
  // A handle (CreateTaskResult) inlines nothing: a terminal one is read again with tasks/get.
  const detailed = task.resultType !== 'task';
  if (status === undefined) return end(next, { kind: 'unknown', reason: 'malformed_task' });
  if (TERMINAL_STATUSES.has(status) && !detailed) return go(next, { kind: 'get', afterMs: 0 });
  if (status === 'completed') return end(next, { kind: 'completed', result: task.result ?? {} });
  if (status === 'failed')
    return end(next, {
      kind: 'failed',
      error: isTaskError(task.error) ? task.error : { code: -32603, message: 'Task failed' },
    });
  if (status === 'cancelled') return end(next, { kind: 'cancelled' });
  if (status === 'input_required' && detailed) {
    const requests = isObject(task.inputRequests) ? task.inputRequests : {};
    // Answered but not acknowledged (a lost update ack): sent again, the question is not asked again.
    const resend = Object.fromEntries(Object.entries(next.unacked).filter(([k]) => k in requests));
    if (Object.keys(resend).length > 0)
      return go(next, { kind: 'update', inputResponses: resend, afterMs: 0 });
    const fresh = Object.fromEntries(Object.entries(requests).filter(([k]) => !next.asked.includes(k)));
    if (Object.keys(fresh).length > 0) {
      if (!next.canAsk) return end(next, { kind: 'input-unanswerable', inputRequests: fresh });
      return go(
        { ...next, asked: [...next.asked, ...Object.keys(fresh)] },
        { kind: 'ask', inputRequests: fresh },
      );
    }
  }
  return go(next, { kind: 'get', afterMs: pollDelay(next, policy) });
}

/** A fault: the same request again after a backoff, until the server has been unreachable for too long. */
function retry(state: FollowState, at: number, policy: FollowPolicy): FollowStep {
  const since = state.failingSince ?? at;
  const failed: FollowState = { ...state, failures: state.failures + 1, failingSince: since };
  if (at - since >= policy.giveUpAfterMs)
    return end(failed, {
      kind: 'unknown',
      reason: state.cancelling ? 'cancel_unconfirmed' : 'task_unreachable',
    });
  const wait = Math.max(
    pollDelay(state, policy),
    backoffCeiling(state.failures, {
      initialDelayMs: policy.retryDelayMs,
      maxDelayMs: policy.maxPollMs,
      factor: 2,
      maxRetries: Number.POSITIVE_INFINITY,
      jitter: 'none',
    }),
  );
  const again =
    state.pending.kind === 'ask' || state.pending.kind === 'end'
      ? state.pending
      : { ...state.pending, afterMs: Math.min(wait, policy.maxPollMs) };
  return go(failed, again);
}

/** Statuses and errors that say "not served, try again": the balancer's 502/503/504, 429, 408, 500 without a JSON-RPC error. */
function retryableStatus(status: number, error: TaskError | undefined): boolean {
  if (error !== undefined) return false;
  return status === 408 || status === 429 || status >= 500;
}

/** A JSON-RPC error answer to `tasks/*`: expired (the draft's message), not found, or something else. */
function errorOutcome(error: TaskError | undefined, status: number): FollowOutcome {
  if (error?.code === TASK_NOT_FOUND_CODE && /expired/i.test(error.message)) return { kind: 'expired' };
  if (error?.code === TASK_NOT_FOUND_CODE) return { kind: 'unknown', reason: 'task_not_found', error };
  return { kind: 'unknown', reason: `refused_${status}`, ...(error ? { error } : {}) };
}

function isTaskError(e: unknown): e is TaskError {
  return isObject(e) && typeof e.code === 'number' && typeof e.message === 'string';
}

/**
 * The JSON-RPC response the application's `tools/call` gets for a followed task's end (under its own id):
 * the task's result, its error, OUTCOME_UNKNOWN (-32050, as every call of `continuityFetch`) or the
 * continuity extension's CANCELLED, with the task id,
 * so a task is never reported failed when only the network did.
 */
export function followAnswer(
  id: string | number,
  taskId: string,
  outcome: FollowOutcome,
): Record<string, unknown> {
  const error = (code: number, message: string, data: Record<string, unknown>) => ({
    jsonrpc: '2.0',
    id,
    error: { code, message, data: { taskId, ...data } },
  });
  switch (outcome.kind) {
    case 'completed':
      // A task's stored result carries no `resultType` (its handle had it): the call's answer is complete.
      return {
        jsonrpc: '2.0',
        id,
        result: isObject(outcome.result) ? { resultType: 'complete', ...outcome.result } : outcome.result,
      };
    case 'failed':
      return { jsonrpc: '2.0', id, error: outcome.error };
    case 'cancelled':
      return error(ContinuityErrorCode.CANCELLED, 'Task cancelled', { reason: 'cancelled' });
    case 'expired':
      return error(TASK_NOT_FOUND_CODE, 'Task has expired', { reason: 'expired' });
    case 'input-unanswerable':
      return error(JsonRpcCode.OUTCOME_UNKNOWN, 'Task needs input the client cannot give', {
        reason: 'input_required',
        inputRequests: outcome.inputRequests,
      });
    case 'unknown':
      return error(JsonRpcCode.OUTCOME_UNKNOWN, 'Task outcome unknown', {
        reason: outcome.reason,
        ...(outcome.error ? { error: outcome.error } : {}),
      });
  }
}
