import { JsonRpcCode } from '../codes.js';
import {
  type FollowAction,
  type FollowFact,
  type FollowPolicy,
  type FollowState,
  followStep,
  startFollow,
} from './task-follow.js';

/**
 * One `tasks/get`, `tasks/update` or `tasks/cancel` sent for someone else's polling loop (the official
 * `@modelcontextprotocol/ext-tasks` client's, through our raw dispatcher): sent again after a fault or a
 * "not served" status, exactly as `task-follow.ts` retries its own requests, until it is answered or the
 * server has been unreachable for `giveUpAfterMs`. What the answer means is the caller's to read: this
 * only decides whether there is one yet. It reuses `followStep`'s retry rule, so the two cannot drift.
 */

/** The request being retried, with its failures so far. */
export interface RequestRetryState {
  readonly follow: FollowState;
}

export type RequestRetryStep =
  /** Send the request (again) after `afterMs`. */
  | { readonly kind: 'send'; readonly afterMs: number; readonly state: RequestRetryState }
  /** The server answered (whatever it said, it was not a fault): hand the answer back. */
  | { readonly kind: 'answered' }
  /** Faults in a row for `giveUpAfterMs`: the task may still be running; its outcome is unknown. */
  | { readonly kind: 'unreachable' };

/** A JSON-RPC error as the request's caller gets it. */
export interface RequestError {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

/** The request's answer for its caller: the server's result or error, or outcome unknown with the task id. */
export type RequestAnswer =
  | { readonly kind: 'result'; readonly result: unknown }
  | { readonly kind: 'error'; readonly error: RequestError };

/** A request of the `tasks/*` family to retry; `update` carries the answers it re-sends. */
export type TaskRequest = Extract<FollowAction, { kind: 'get' | 'update' | 'cancel' }>;

/** The first send: now. */
export function startRequest(taskId: string, request: TaskRequest, policy: FollowPolicy): RequestRetryStep {
  const { state } = startFollow(taskId, false, undefined, policy);
  const pending: TaskRequest = { ...request, afterMs: 0 };
  return { kind: 'send', afterMs: 0, state: { follow: { ...state, pending } } };
}

/** What one send got, as the shell read it (an `answer` with its HTTP status, or a `fault`), decides the next step. */
export function requestStep(
  state: RequestRetryState,
  fact: FollowFact,
  policy: FollowPolicy,
): RequestRetryStep {
  const step = followStep(state.follow, fact, policy);
  // followStep counts a failure only for a fault or a retryable status: anything else is an answer.
  if (step.state.failures === 0) return { kind: 'answered' };
  if (step.action.kind === 'end') return { kind: 'unreachable' };
  // A retry keeps the pending request, which is never an `ask` here.
  return { kind: 'send', afterMs: (step.action as TaskRequest).afterMs, state: { follow: step.state } };
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A JSON-RPC request body that is a `tasks/get`, `tasks/update` or `tasks/cancel` naming its task: the
 * request to retry, its task id and its `_meta` (sent again as it was). Anything else: undefined.
 */
export function taskRequestOf(
  body: unknown,
):
  | { readonly taskId: string; readonly request: TaskRequest; readonly meta: Record<string, unknown> }
  | undefined {
  if (!isObject(body) || !isObject(body.params)) return undefined;
  const params = body.params;
  if (typeof params.taskId !== 'string') return undefined;
  const meta = isObject(params._meta) ? params._meta : {};
  switch (body.method) {
    case 'tasks/get':
      return { taskId: params.taskId, meta, request: { kind: 'get', afterMs: 0 } };
    case 'tasks/cancel':
      return { taskId: params.taskId, meta, request: { kind: 'cancel', afterMs: 0 } };
    case 'tasks/update':
      return {
        taskId: params.taskId,
        meta,
        request: {
          kind: 'update',
          inputResponses: isObject(params.inputResponses) ? params.inputResponses : {},
          afterMs: 0,
        },
      };
    default:
      return undefined;
  }
}

/**
 * What the caller gets once the retries are over (`step` is `answered` or `unreachable`, `last` the last
 * send's fact): the server's result or JSON-RPC error as it came; unreachable, or a status that carried
 * neither, is OUTCOME_UNKNOWN with the task id (the task may be running: never a failed task).
 */
export function requestAnswer(
  step: Exclude<RequestRetryStep, { kind: 'send' }>,
  last: FollowFact,
  taskId: string,
): RequestAnswer {
  const unknown = (reason: string, message: string): RequestAnswer => ({
    kind: 'error',
    error: { code: JsonRpcCode.OUTCOME_UNKNOWN, message, data: { reason, taskId } },
  });
  if (step.kind === 'unreachable' || last.kind !== 'answer')
    return unknown('task_unreachable', 'Task unreachable: it may still be running');
  if (last.error) return { kind: 'error', error: last.error };
  if (last.result !== undefined) return { kind: 'result', result: withCompleteResult(last.result) };
  return unknown(`refused_${last.status}`, `Task request refused (HTTP ${last.status})`);
}

/**
 * A completed task's inlined result marked `resultType: "complete"` when it carries none. The draft's
 * example inlines the bare `CallToolResult` (our server stores it so), while ext-tasks 0.2.2 parses it as
 * a 2026-07-28 `CallToolResult` and rejects one without the discriminator: it would report the completed
 * task failed ("Protocol value failed schema validation"). Anything else is returned as it came.
 */
export function withCompleteResult(result: unknown): unknown {
  if (!isObject(result) || result.status !== 'completed' || !isObject(result.result)) return result;
  if (result.result.resultType !== undefined) return result;
  return { ...result, result: { resultType: 'complete', ...result.result } };
}
