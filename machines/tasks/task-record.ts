import type { TaskStatus } from './task.machine.js';

/**
 * The tasks extension's wire names and one task as a store keeps it (../shared/reference/
 * mcp-tasks-extension-draft.md). Times are epoch milliseconds here and ISO 8601 on the wire.
 */

/** The extension identifier, in `capabilities.extensions` and in a request's client capabilities. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** The methods the extension adds; each names its task in `params.taskId`. */
export const TASK_METHODS: ReadonlySet<string> = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

/** The JSON-RPC error the draft names for an unknown, foreign or expired task id (Invalid params). */
export const TASK_NOT_FOUND_CODE = -32602;

/** The draft's Missing Required Client Capability: `tasks/*` from a client that did not declare the extension. */
export const MISSING_CLIENT_CAPABILITY_CODE = -32021;

/** A JSON-RPC error as a task records it (`failed`) or a reply carries it. */
export interface TaskError {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

/** The `tools/call` a task runs: re-run with the answers of each input round (MRTR on the server's side). */
export interface TaskRequest {
  readonly name: string;
  readonly arguments?: unknown;
  /** The creating call's `_meta` (protocol version, client capabilities): each re-run carries it again. */
  readonly meta?: unknown;
}

/** One task as stored. Every change is a new record with `version + 1` (the store compares versions). */
export interface TaskRecord {
  /** Server-chosen, unguessable (the draft: it may be a bearer token). */
  readonly taskId: string;
  /** Who created it: only this principal may read, update or cancel it (the draft's auth binding). */
  readonly principal: string;
  /**
   * `memoKey(principal, idempotencyKey)` when the creating call carried the continuity extension's key: the
   * store binds it to this task once, so a re-issue of the key gets this task, not a second one.
   */
  readonly keyRef?: string;
  /** `requestFingerprint` of the creating call: a re-issue of the key with other arguments is refused. */
  readonly fingerprint: string;
  readonly request: TaskRequest;
  readonly status: TaskStatus;
  readonly statusMessage?: string;
  readonly createdAt: number;
  readonly lastUpdatedAt: number;
  /** From creation; `null` for unlimited. Past it, the task is answered as expired. */
  readonly ttlMs: number | null;
  readonly pollIntervalMs: number;
  /** When the store deletes the record: some time after expiry (answered "expired" until then); `null`: never. */
  readonly purgeAt: number | null;
  /** Input round, from 0: the prefix of this round's `inputRequests` keys, so no key is used twice. */
  readonly round: number;
  /** Outstanding requests of this round, under task-unique keys (`inputKey(round, key)`). */
  readonly inputRequests?: Readonly<Record<string, unknown>>;
  /** Answers received for this round so far, under the same keys. */
  readonly inputResponses?: Readonly<Record<string, unknown>>;
  /** The run's `requestState` for its next round (opaque). */
  readonly requestState?: string;
  readonly result?: unknown;
  readonly error?: TaskError;
  /**
   * While a run of the task goes on: until when its instance's lease holds (renewed by that instance);
   * a working task read past it failed with its outcome unknown (machines/tasks/task-lease.ts).
   */
  readonly leaseUntil?: number;
  readonly version: number;
}

/** The Task fields of the wire (`Task` in the draft). */
export interface TaskWire {
  readonly taskId: string;
  readonly status: TaskStatus;
  readonly statusMessage?: string;
  readonly createdAt: string;
  readonly lastUpdatedAt: string;
  readonly ttlMs: number | null;
  readonly pollIntervalMs: number;
}

/** A task-unique input key: the round's prefix and the run's own key (runs reuse keys across rounds). */
export function inputKey(round: number, key: string): string {
  return `r${round}.${key}`;
}

/** The run's own key of a task-unique input key of `round`, or undefined when it is not of that round. */
export function runKeyOf(round: number, wireKey: string): string | undefined {
  const prefix = `r${round}.`;
  return wireKey.startsWith(prefix) ? wireKey.slice(prefix.length) : undefined;
}

/** True when the task is past its TTL at `now`: it is answered as expired, never run on, never re-created. */
export function taskExpired(record: Pick<TaskRecord, 'createdAt' | 'ttlMs'>, now: number): boolean {
  return record.ttlMs !== null && now >= record.createdAt + record.ttlMs;
}

/** When a record created at `createdAt` with `ttlMs` is deleted: `keepExpiredMs` after its TTL ends. */
export function purgeAtOf(createdAt: number, ttlMs: number | null, keepExpiredMs: number): number | null {
  return ttlMs === null ? null : createdAt + ttlMs + keepExpiredMs;
}

/** The record's Task fields, as the wire carries them. */
export function taskWire(record: TaskRecord): TaskWire {
  return {
    taskId: record.taskId,
    status: record.status,
    ...(record.statusMessage !== undefined ? { statusMessage: record.statusMessage } : {}),
    createdAt: new Date(record.createdAt).toISOString(),
    lastUpdatedAt: new Date(record.lastUpdatedAt).toISOString(),
    ttlMs: record.ttlMs,
    pollIntervalMs: record.pollIntervalMs,
  };
}

/** The `CreateTaskResult` of a `tools/call` answered with a task handle (`resultType: "task"`). */
export function createTaskResult(record: TaskRecord): Record<string, unknown> {
  return { resultType: 'task', ...taskWire(record) };
}

/**
 * The `tasks/get` result: the task with what its status inlines (the draft's `DetailedTask`): the
 * outstanding `inputRequests` not yet answered, the `result`, or the `error`. `resultType` is `complete`.
 */
export function detailedTask(record: TaskRecord): Record<string, unknown> {
  const base = { resultType: 'complete', ...taskWire(record) };
  switch (record.status) {
    case 'input_required':
      return { ...base, inputRequests: outstanding(record) };
    case 'completed':
      // 2026-07-28: every result carries `resultType`, the inlined `CallToolResult` too (ext-tasks 0.2.2
      // rejects one without it and reports the completed task failed). The record keeps it bare.
      return { ...base, result: { resultType: 'complete', ...asObject(record.result) } };
    case 'failed':
      return { ...base, error: record.error ?? { code: -32603, message: 'Internal error' } };
    default:
      return base;
  }
}

/** This round's requests that have no answer yet. */
export function outstanding(record: TaskRecord): Record<string, unknown> {
  const answered = record.inputResponses ?? {};
  return Object.fromEntries(Object.entries(record.inputRequests ?? {}).filter(([k]) => !(k in answered)));
}

/** A stored result as an object to inline (a run's answer is one; anything else inlines as an empty result). */
function asObject(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}
