import type { TaskRecord } from '../../../machines/tasks/task-record.js';

/**
 * Where tasks of the tasks extension are kept: one record per task id, and at most one task per key
 * (`TaskRecord.keyRef`, the continuity extension's (principal, idempotency key)). The store makes each
 * change atomic; what a record becomes is decided in `machines/tasks/task-decide.ts`. Implementations:
 * memory (one process), SQLite (survives a restart), Redis (shared by instances, survives restarts).
 * `taskStoreContract` (`mcp-continuity/testing`) is the suite every store passes.
 */
export type TaskCreate =
  | { readonly kind: 'created' }
  | { readonly kind: 'exists'; readonly record: TaskRecord };

export interface TaskStore {
  /** True when tasks survive a restart of the process. */
  readonly durable: boolean;
  /**
   * Atomic set-if-absent: when `record.keyRef` is bound to a task not yet purged, nothing is written and
   * that task is returned (two creations of one key racing, on one instance or two, make one task).
   */
  create(record: TaskRecord): Promise<TaskCreate>;
  /** The task, or undefined when there is none or it is past its `purgeAt` (an expired task is still read). */
  get(taskId: string): Promise<TaskRecord | undefined>;
  /**
   * Compare-and-set on the version: writes `next` only while the stored record has `expectedVersion`.
   * Returns the stored record afterwards (`next` when it won), or undefined when it is gone.
   */
  replace(next: TaskRecord, expectedVersion: number): Promise<TaskRecord | undefined>;
  /** Deletes records past their `purgeAt` (and their key bindings); returns their task ids. */
  sweep(): Promise<string[]>;
  close(): Promise<void>;
}

/** True when the record is gone for every reader at `now`. */
export function purged(record: Pick<TaskRecord, 'purgeAt'>, now: number): boolean {
  return record.purgeAt !== null && now >= record.purgeAt;
}
