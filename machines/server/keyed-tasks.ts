import { DeadlineQueue } from './deadlines.js';
import type { KeyedCommand, KeyedStoreCall } from './keyed-core-io.js';

/**
 * The keyed core's cooperative tasks: each procedure (a call, an attached response, a body's end, the
 * lease tick...) is a generator that yields store calls (answered later, by whichever host) and sleeps
 * (until a bell rings or a time passes). Nothing here waits or touches a clock: a store call becomes a
 * `store` command with an op number, and the host's answer for that op resumes the task. Pure.
 */

/** Sleep until `bell` rings or `until` (ms, the host's clock) passes, whichever is first. */
export interface Sleep {
  readonly kind: 'sleep';
  readonly bell: string;
  readonly until: number | undefined;
}

export type TaskYield = KeyedStoreCall | Sleep;
export type Task<R = void> = Generator<TaskYield, R, unknown>;

/** A task the runner holds; `cancel` ends it where it waits. */
export interface TaskHandle {
  readonly id: number;
}

interface Running extends TaskHandle {
  readonly gen: Task<unknown>;
  readonly done: (value: unknown) => void;
  readonly failed: (error: unknown) => void;
  sleep?: Sleep;
  cancelled: boolean;
}

/** Whether `task` still sleeps the sleep `sleep` (not woken by its bell, not cancelled, not asleep again). */
const current = (task: Running, sleep: Sleep): boolean => !task.cancelled && task.sleep === sleep;

type Resume = { readonly task: Running; readonly value?: unknown; readonly error?: { readonly e: unknown } };

export class TaskRunner {
  private nextOp = 1;
  private nextTask = 1;
  private readonly waiting = new Map<number, Running>();
  private readonly sleepers = new Map<string, Set<Running>>();
  /**
   * The timed sleeps, earliest first: a fact costs O(log n) here, not a scan of every sleeper (at 50
   * concurrent calls each fact scanned them twice). A sleep woken by its bell stays until it comes due or
   * reaches the front, then is dropped (`current`).
   */
  private readonly timed = new DeadlineQueue<{ readonly task: Running; readonly sleep: Sleep }>();
  private readonly ready: Resume[] = [];
  /** Bells noted since `mark`: whether each rang. */
  private readonly marks = new Map<string, boolean>();

  constructor(private readonly emit: (command: KeyedCommand) => void) {}

  /** Starts `gen` at the next `run()`; `done` gets its value, `failed` what it threw. */
  spawn<R>(
    gen: Task<R>,
    done: (value: R) => void = () => {},
    failed: (error: unknown) => void = () => {},
  ): TaskHandle {
    const task: Running = {
      id: this.nextTask++,
      gen: gen as Task<unknown>,
      done: done as (v: unknown) => void,
      failed,
      cancelled: false,
    };
    this.ready.push({ task });
    return task;
  }

  /** The host's answer to store op `op` (unknown ops: a cancelled task's, dropped). */
  answer(op: number, value: unknown): void {
    const task = this.waiting.get(op);
    if (!task) return;
    this.waiting.delete(op);
    this.ready.push({ task, value });
  }

  fail(op: number, error: unknown): void {
    const task = this.waiting.get(op);
    if (!task) return;
    this.waiting.delete(op);
    this.ready.push({ task, error: { e: error } });
  }

  /** Wakes every task sleeping on `bell`. */
  ring(bell: string): void {
    if (this.marks.has(bell)) this.marks.set(bell, true);
    const set = this.sleepers.get(bell);
    if (!set) return;
    this.sleepers.delete(bell);
    for (const task of set) this.wake(task);
  }

  /** Wakes the tasks whose sleep ran out by `now`. */
  wakeDue(now: number): void {
    if ((this.timed.next() ?? Number.POSITIVE_INFINITY) > now) return;
    for (const { task, sleep } of this.timed.due(now)) {
      if (!current(task, sleep)) continue;
      const set = this.sleepers.get(sleep.bell);
      set?.delete(task);
      if (set?.size === 0) this.sleepers.delete(sleep.bell);
      this.wake(task);
    }
  }

  /** The earliest time a sleeping task wants to wake, if any. */
  nextWake(): number | undefined {
    for (let top = this.timed.peek(); top && !current(top.task, top.sleep); top = this.timed.peek())
      this.timed.shift();
    return this.timed.next();
  }

  /** Starts noting whether `bell` rings (until `rangSinceMark`). */
  mark(bell: string): void {
    this.marks.set(bell, false);
  }

  /** Whether `bell` rang since its `mark` (true when it was not marked: nothing is known); stops noting it. */
  rangSinceMark(bell: string): boolean {
    const rang = this.marks.get(bell);
    this.marks.delete(bell);
    return rang !== false;
  }

  /** Whether some task sleeps on `bell` now. */
  sleeping(bell: string): boolean {
    return this.sleepers.has(bell);
  }

  /** Bells with sleepers whose name starts with `prefix` (stats: nothing is left behind). */
  bells(prefix: string): number {
    let n = 0;
    for (const b of this.sleepers.keys()) if (b.startsWith(prefix)) n++;
    return n;
  }

  /** Ends `handle` where it waits: its pending answer is dropped, its generator returned. */
  cancel(handle: TaskHandle): void {
    const task = handle as Running;
    if (task.cancelled) return;
    task.cancelled = true;
    if (task.sleep) this.sleepers.get(task.sleep.bell)?.delete(task);
    if (task.sleep && this.sleepers.get(task.sleep.bell)?.size === 0) this.sleepers.delete(task.sleep.bell);
    for (const [op, t] of this.waiting) if (t === task) this.waiting.delete(op);
    try {
      task.gen.return(undefined);
    } catch {
      // A task's cleanup that throws has nobody to tell; it is over either way.
    }
  }

  /** Steps every ready task until each waits on a store, sleeps, or ends. */
  run(): void {
    for (let r = this.ready.shift(); r; r = this.ready.shift()) this.step(r);
  }

  private wake(task: Running): void {
    task.sleep = undefined;
    this.ready.push({ task });
  }

  private step({ task, value, error }: Resume): void {
    if (task.cancelled) return;
    let r: IteratorResult<TaskYield, unknown>;
    try {
      r = error ? task.gen.throw(error.e) : task.gen.next(value);
    } catch (e) {
      task.cancelled = true;
      task.failed(e);
      return;
    }
    if (r.done) {
      task.cancelled = true;
      task.done(r.value);
      return;
    }
    const y = r.value;
    if (y.kind === 'sleep') {
      task.sleep = y;
      const set = this.sleepers.get(y.bell) ?? new Set();
      set.add(task);
      this.sleepers.set(y.bell, set);
      if (y.until !== undefined) this.timed.add(y.until, { task, sleep: y });
      return;
    }
    const op = this.nextOp++;
    this.waiting.set(op, task);
    this.emit({ kind: 'store', op, call: y });
  }
}
