import { ACKNOWLEDGED_METHOD, LISTEN_METHOD } from '../listen-wire.js';
import { declaresTasks } from './task-decide.js';
import {
  detailedTask,
  MISSING_CLIENT_CAPABILITY_CODE,
  TASKS_EXTENSION,
  type TaskRecord,
  taskExpired,
} from './task-record.js';

/**
 * `notifications/tasks` over `subscriptions/listen` (the draft, "Task Status Notifications"), pure: which
 * listen requests the tasks runtime serves (those asking for task ids alone: a listen that also asks for
 * list changes stays the SDK's, whose acknowledgement then names no task ids, which is the draft's way of
 * declining), what it acknowledges (the caller's own tasks only: another principal's id is left out, as
 * unknown as in `tasks/get`), and which notifications a read of the store makes (one per new version of a
 * task, each the full DetailedTask `tasks/get` would give). The store is read, not a local event bus: a
 * change made by any instance reaches a stream open on any other.
 */

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** What the tasks runtime does with a `subscriptions/listen`. */
export type TaskListenPlan =
  /** Not a task listen (or it asks for more than tasks): the endpoint serves it as before. */
  | { readonly kind: 'pass' }
  /** The draft's -32021: task notifications asked by a client that did not declare the extension. */
  | { readonly kind: 'refuse'; readonly error: Record<string, unknown> }
  | { readonly kind: 'serve'; readonly taskIds: readonly string[] };

export function planTaskListen(body: unknown): TaskListenPlan {
  if (!isObject(body) || body.method !== LISTEN_METHOD || body.id === undefined) return { kind: 'pass' };
  const params = isObject(body.params) ? body.params : {};
  const notifications = isObject(params.notifications) ? params.notifications : {};
  const ids = notifications.taskIds;
  if (!Array.isArray(ids) || Object.keys(notifications).some((k) => k !== 'taskIds')) return { kind: 'pass' };
  if (!declaresTasks(params))
    return {
      kind: 'refuse',
      error: {
        code: MISSING_CLIENT_CAPABILITY_CODE,
        message: 'Missing required client capability',
        data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
      },
    };
  const taskIds = [...new Set(ids.filter((i): i is string => typeof i === 'string' && i.length > 0))];
  return { kind: 'serve', taskIds };
}

/** The acknowledgement: the task ids (of those asked) that are the caller's and not expired. */
export function taskListenAck(
  asked: readonly string[],
  records: ReadonlyMap<string, TaskRecord | undefined>,
  principal: string,
  now: number,
): { readonly taskIds: readonly string[]; readonly message: Record<string, unknown> } {
  const taskIds = asked.filter((id) => {
    const r = records.get(id);
    return r !== undefined && r.principal === principal && !taskExpired(r, now);
  });
  return {
    taskIds,
    message: { jsonrpc: '2.0', method: ACKNOWLEDGED_METHOD, params: { notifications: { taskIds } } },
  };
}

/**
 * One read of the acknowledged tasks: a `notifications/tasks` for each task whose version is new since
 * the last one sent (the first read sends each task's current state), and the versions now sent.
 */
export function taskNotices(
  sent: ReadonlyMap<string, number>,
  records: ReadonlyMap<string, TaskRecord | undefined>,
): { readonly notices: readonly Record<string, unknown>[]; readonly sent: ReadonlyMap<string, number> } {
  const next = new Map(sent);
  const notices: Record<string, unknown>[] = [];
  for (const [id, r] of records) {
    if (r === undefined || next.get(id) === r.version) continue;
    next.set(id, r.version);
    const { resultType: _t, ...task } = detailedTask(r);
    notices.push({ jsonrpc: '2.0', method: 'notifications/tasks', params: task });
  }
  return { notices, sent: next };
}
