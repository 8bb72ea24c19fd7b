import { CLIENT_CAPABILITIES_META_KEY, ContinuityErrorCode } from '../continuity-extension.js';
import { stepTaskStatus, TERMINAL_STATUSES } from './task.machine.js';
import {
  createTaskResult,
  detailedTask,
  inputKey,
  outstanding,
  purgeAtOf,
  runKeyOf,
  TASK_NOT_FOUND_CODE,
  TASKS_EXTENSION,
  type TaskError,
  type TaskRecord,
  type TaskRequest,
  taskExpired,
} from './task-record.js';

/**
 * Every decision of the tasks extension on the server, pure: whether a call becomes a task, what a
 * re-issue of a keyed creation gets (the same task), what `tasks/get`, `tasks/update` and `tasks/cancel`
 * answer and change, and what a run's answer makes of its task. The runtime (src/server/tasks/) reads
 * and writes the store and runs tools; it decides nothing.
 */

function field(o: unknown, k: string): unknown {
  return typeof o === 'object' && o !== null && !Array.isArray(o)
    ? (o as Record<string, unknown>)[k]
    : undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The request's `_meta` client capabilities declare the tasks extension (the draft: per request). */
export function declaresTasks(params: unknown): boolean {
  const caps = field(field(params, '_meta'), CLIENT_CAPABILITIES_META_KEY);
  return isObject(field(field(caps, 'extensions'), TASKS_EXTENSION));
}

/**
 * Whether a `tools/call` is answered with a task: the client declared the extension on this request (a
 * server MUST NOT answer a task otherwise) and the application marked the tool as task-capable. Returns
 * the request the task runs, or undefined (the call is served as before).
 */
export function taskCallOf(message: unknown, isTaskTool: (name: string) => boolean): TaskRequest | undefined {
  if (field(message, 'method') !== 'tools/call') return undefined;
  const id = field(message, 'id');
  if (typeof id !== 'string' && typeof id !== 'number') return undefined;
  const params = field(message, 'params');
  const name = field(params, 'name');
  if (typeof name !== 'string' || !declaresTasks(params) || !isTaskTool(name)) return undefined;
  const args = field(params, 'arguments');
  return { name, ...(args !== undefined ? { arguments: args } : {}), meta: field(params, '_meta') };
}

/** What the runtime needs to create a task record (ids and times are the runtime's, given here). */
export interface NewTask {
  readonly taskId: string;
  readonly principal: string;
  readonly keyRef?: string;
  readonly fingerprint: string;
  readonly request: TaskRequest;
  readonly now: number;
  readonly ttlMs: number | null;
  readonly pollIntervalMs: number;
  /** How long an expired task is still answered "expired" (and its key still bound) before it is deleted. */
  readonly keepExpiredMs: number;
  /** The run's lease (machines/tasks/task-lease.ts); undefined: no lease (the task never lapses). */
  readonly leaseMs?: number;
}

/** The record of a new task: working, round 0, version 1. */
export function newTaskRecord(t: NewTask): TaskRecord {
  return {
    taskId: t.taskId,
    principal: t.principal,
    ...(t.keyRef !== undefined ? { keyRef: t.keyRef } : {}),
    fingerprint: t.fingerprint,
    request: t.request,
    status: 'working',
    createdAt: t.now,
    lastUpdatedAt: t.now,
    ttlMs: t.ttlMs,
    pollIntervalMs: t.pollIntervalMs,
    purgeAt: purgeAtOf(t.now, t.ttlMs, t.keepExpiredMs),
    round: 0,
    ...(t.leaseMs !== undefined ? { leaseUntil: t.now + t.leaseMs } : {}),
    version: 1,
  };
}

/** A reply the runtime sends as it is: a JSON-RPC result or error, with the HTTP status to send it with. */
export type TaskReply =
  | { readonly kind: 'result'; readonly result: Record<string, unknown> }
  | { readonly kind: 'error'; readonly error: TaskError; readonly status: number };

const notFound = (what: string): TaskReply => ({
  kind: 'error',
  error: { code: TASK_NOT_FOUND_CODE, message: `${what}: Task not found` },
  status: 200,
});
const expired = (what: string): TaskReply => ({
  kind: 'error',
  error: { code: TASK_NOT_FOUND_CODE, message: `${what}: Task has expired` },
  status: 200,
});

/**
 * A keyed creation whose key is already bound (the store's set-if-absent said "exists"): the same task
 * handle, whatever its status now (a re-issue after a cut gets what the lost answer carried, updated), as
 * long as the task lives; the same key with another request is refused (the continuity extension's
 * KEY_REUSED, HTTP 409); an expired task is answered expired, never created again while its key is held.
 */
export function answerReissue(existing: TaskRecord, fingerprint: string, now: number): TaskReply {
  if (existing.fingerprint !== fingerprint)
    return {
      kind: 'error',
      error: {
        code: ContinuityErrorCode.KEY_REUSED,
        message: 'Idempotency key reused with a different request',
      },
      status: 409,
    };
  if (taskExpired(existing, now)) return expired('Failed to create task');
  return { kind: 'result', result: createTaskResult(existing) };
}

/** Reads `params.taskId` of a `tasks/*` request: a non-empty string, or undefined (Invalid params). */
export function taskIdOf(params: unknown): string | undefined {
  const id = field(params, 'taskId');
  return typeof id === 'string' && id.length > 0 ? id : undefined;
}

/**
 * The task a `tasks/*` request may act on: present, the caller's own (another principal's task is
 * answered exactly as an unknown one, so task ids leak nothing), and not expired.
 */
export function taskFor(
  record: TaskRecord | undefined,
  principal: string,
  now: number,
  what: string,
):
  | { readonly kind: 'task'; readonly record: TaskRecord }
  | { readonly kind: 'reply'; readonly reply: TaskReply } {
  if (!record || record.principal !== principal) return { kind: 'reply', reply: notFound(what) };
  if (taskExpired(record, now)) return { kind: 'reply', reply: expired(what) };
  return { kind: 'task', record };
}

/** `tasks/get`: the detailed task (a pure read; never changes the record). */
export function answerGet(record: TaskRecord): TaskReply {
  return { kind: 'result', result: detailedTask(record) };
}

/** The empty acknowledgement of `tasks/update` and `tasks/cancel`. */
export const ACK: TaskReply = { kind: 'result', result: { resultType: 'complete' } };

/** What the runtime does after a `tasks/update` or `tasks/cancel`: the record to write, and what to start or stop. */
export interface TaskChange {
  /** The record to compare-and-set (its `version` is the stored one + 1); undefined: nothing changes. */
  readonly next?: TaskRecord;
  /** Run the tool again with these params (`inputResponses`, `requestState`): the round was answered. */
  readonly rerun?: Record<string, unknown>;
  /** Stop the local run, if any (the task was cancelled). */
  readonly abort?: boolean;
}

/**
 * `tasks/update`: keeps the answers to this round's outstanding requests that had none (an answer to an
 * unknown, older or already answered key is ignored, as the draft says, so a retried update answers each
 * key once). When every request of the round is answered, the task is working again and the tool re-runs
 * with the answers under its own keys; otherwise it stays `input_required` with fewer outstanding.
 */
export function decideUpdate(
  record: TaskRecord,
  inputResponses: unknown,
  now: number,
  leaseMs?: number,
): TaskChange {
  if (record.status !== 'input_required' || !isObject(inputResponses)) return {};
  const open = outstanding(record);
  const fresh = Object.entries(inputResponses).filter(([k]) => k in open);
  if (fresh.length === 0) return {};
  const answers = { ...(record.inputResponses ?? {}), ...Object.fromEntries(fresh) };
  const complete = Object.keys(record.inputRequests ?? {}).every((k) => k in answers);
  if (!complete)
    return { next: { ...record, inputResponses: answers, lastUpdatedAt: now, version: record.version + 1 } };
  const step = stepTaskStatus(record.status, { type: 'input.complete' });
  const runAnswers: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(answers)) {
    const own = runKeyOf(record.round, k);
    if (own !== undefined) runAnswers[own] = v;
  }
  const {
    inputRequests: _r,
    inputResponses: _a,
    requestState,
    statusMessage: _m,
    leaseUntil: _l,
    ...rest
  } = record;
  return {
    next: {
      ...rest,
      status: step.status,
      round: record.round + 1,
      lastUpdatedAt: now,
      // The re-run is this instance's: its lease starts now (an old round's lease would read lapsed).
      ...(leaseMs !== undefined ? { leaseUntil: now + leaseMs } : {}),
      version: record.version + 1,
    },
    rerun: {
      ...toolParams(record.request),
      inputResponses: runAnswers,
      ...(requestState !== undefined ? { requestState } : {}),
    },
  };
}

/**
 * `tasks/cancel`: a task not yet terminal becomes `cancelled` at once and its run is stopped; a terminal
 * one is left as it is (the ack is all the draft promises: cancellation is cooperative).
 */
export function decideCancel(record: TaskRecord, now: number): TaskChange {
  const step = stepTaskStatus(record.status, { type: 'cancel' });
  if (!step.changed) return {};
  const { inputRequests: _r, inputResponses: _a, requestState: _s, ...rest } = record;
  return {
    next: {
      ...rest,
      status: step.status,
      statusMessage: 'Cancelled by the client',
      lastUpdatedAt: now,
      version: record.version + 1,
    },
    abort: true,
  };
}

/** How one run of the task's tool ended, as the runtime read it off the SDK's answer. */
export type RunAnswer =
  | { readonly kind: 'result'; readonly result: unknown }
  | { readonly kind: 'error'; readonly error: TaskError }
  /** The run ended without a final answer (the SDK's stream broke, the runtime failed). */
  | { readonly kind: 'lost'; readonly why: string };

/**
 * What a run's answer makes of its task: `resultType: "input_required"` opens the next input round (its
 * requests under task-unique keys); any other result completes it (a tool result with `isError: true`
 * too: the draft keeps `failed` for JSON-RPC errors); an error or a lost run fails it. A task already
 * terminal (cancelled meanwhile) is unchanged: undefined.
 */
export function decideRunEnd(record: TaskRecord, answer: RunAnswer, now: number): TaskRecord | undefined {
  const result = answer.kind === 'result' && isObject(answer.result) ? answer.result : undefined;
  const wantsInput =
    result !== undefined && result.resultType === 'input_required' && isObject(result.inputRequests);
  const event =
    answer.kind === 'result'
      ? wantsInput
        ? ({ type: 'run.inputRequired' } as const)
        : ({ type: 'run.completed' } as const)
      : ({ type: 'run.failed' } as const);
  const step = stepTaskStatus(record.status, event);
  if (!step.changed) return undefined;
  const base = { ...record, status: step.status, lastUpdatedAt: now, version: record.version + 1 };
  if (wantsInput && result) {
    const requests = Object.fromEntries(
      Object.entries(result.inputRequests as Record<string, unknown>).map(([k, v]) => [
        inputKey(record.round, k),
        v,
      ]),
    );
    const { requestState: _old, inputResponses: _a, ...rest } = base;
    return {
      ...rest,
      inputRequests: requests,
      ...(typeof result.requestState === 'string' ? { requestState: result.requestState } : {}),
    };
  }
  if (answer.kind === 'result') {
    const { resultType: _t, ...plain } = (result ?? {}) as Record<string, unknown>;
    return { ...base, result: result ? plain : answer.result };
  }
  const error: TaskError =
    answer.kind === 'error' ? answer.error : { code: -32603, message: `Task run lost: ${answer.why}` };
  return { ...base, error, statusMessage: error.message };
}

/** True when nothing will change the task again. */
export function taskFinished(record: Pick<TaskRecord, 'status'>): boolean {
  return TERMINAL_STATUSES.has(record.status);
}

/** The `tools/call` params of the task's request (a re-run adds the round's answers). */
export function toolParams(request: TaskRequest): Record<string, unknown> {
  return {
    name: request.name,
    ...(request.arguments !== undefined ? { arguments: request.arguments } : {}),
    ...(request.meta !== undefined ? { _meta: request.meta } : {}),
  };
}
