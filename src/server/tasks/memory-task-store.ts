import type { TaskRecord } from '../../../machines/tasks/task-record.js';
import { purged, type TaskCreate, type TaskStore } from './task-store.js';

/**
 * Tasks in process memory: one process, nothing survives a restart. Reads and writes are synchronous
 * inside each method, so set-if-absent and compare-and-set cannot interleave.
 */
export class MemoryTaskStore implements TaskStore {
  readonly durable = false;
  private readonly tasks = new Map<string, TaskRecord>();
  private readonly keys = new Map<string, string>();
  private readonly now: () => number;

  constructor(options: { readonly now?: () => number } = {}) {
    this.now = options.now ?? Date.now;
  }

  private current(taskId: string): TaskRecord | undefined {
    const r = this.tasks.get(taskId);
    if (r && purged(r, this.now())) {
      this.drop(r);
      return undefined;
    }
    return r;
  }

  async create(record: TaskRecord): Promise<TaskCreate> {
    const bound = record.keyRef === undefined ? undefined : this.keys.get(record.keyRef);
    const existing = bound === undefined ? undefined : this.current(bound);
    if (existing) return { kind: 'exists', record: existing };
    if (this.current(record.taskId)) throw new Error(`task id ${record.taskId} already used`);
    this.tasks.set(record.taskId, record);
    if (record.keyRef !== undefined) this.keys.set(record.keyRef, record.taskId);
    return { kind: 'created' };
  }

  async get(taskId: string): Promise<TaskRecord | undefined> {
    return this.current(taskId);
  }

  async replace(next: TaskRecord, expectedVersion: number): Promise<TaskRecord | undefined> {
    const stored = this.current(next.taskId);
    if (!stored) return undefined;
    if (stored.version !== expectedVersion) return stored;
    this.tasks.set(next.taskId, next);
    return next;
  }

  async sweep(): Promise<string[]> {
    const gone = [...this.tasks.values()].filter((r) => purged(r, this.now()));
    for (const r of gone) this.drop(r);
    return gone.map((r) => r.taskId);
  }

  async close(): Promise<void> {
    this.tasks.clear();
    this.keys.clear();
  }

  private drop(r: TaskRecord): void {
    this.tasks.delete(r.taskId);
    if (r.keyRef !== undefined && this.keys.get(r.keyRef) === r.taskId) this.keys.delete(r.keyRef);
  }
}
