import fc from 'fast-check';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import type { JsonRpcRequest } from '../../machines/jsonrpc.js';
import { TASKS_EXTENSION } from '../../machines/tasks/task-record.js';
import type { RunOnSdk } from '../../src/server/modern/keyed-hook.js';
import { MemoryTaskStore } from '../../src/server/tasks/memory-task-store.js';
import { createTasks } from '../../src/server/tasks/runtime.js';
import type { TaskCreate, TaskStore } from '../../src/server/tasks/task-store.js';

/**
 * A simulated world for the tasks extension's creation: clients create tasks under continuity keys
 * through a network that cuts. Each attempt is lost before the server (never served), served with its
 * answer lost (the cut the issue is about), or answered; an attempt may race the previous one (sent
 * before the previous answer came back). The client re-issues a key until an answer arrives or its attempts
 * run out. The server is the real runtime (`createTasks`) over the same decisions, with a virtual clock
 * and a tool run that answers at once.
 */

export type Fate = 'lostBefore' | 'lostAfter' | 'answered';

export interface Attempt {
  readonly key: number;
  readonly fate: Fate;
  /** Sent while the previous attempt is still in flight. */
  readonly racing: boolean;
}

export interface TasksWorld {
  readonly attempts: readonly Attempt[];
}

export const tasksWorldArb: fc.Arbitrary<TasksWorld> = fc.record({
  attempts: fc.array(
    fc.record({
      key: fc.integer({ min: 0, max: 2 }),
      fate: fc.constantFrom<Fate>('lostBefore', 'lostAfter', 'answered'),
      racing: fc.boolean(),
    }),
    { minLength: 1, maxLength: 12 },
  ),
});

/** What the world saw: per key, tasks created, runs started, and the task ids the client was handed. */
export interface TasksOutcome {
  readonly created: ReadonlyMap<number, number>;
  readonly runs: ReadonlyMap<number, number>;
  readonly handles: ReadonlyMap<number, ReadonlySet<string>>;
  /** Keys whose first served attempt made a task that is still in the store. */
  readonly stored: ReadonlyMap<number, boolean>;
}

/** A store that counts the tasks it created, per key (the property's ledger). */
class CountingStore implements TaskStore {
  readonly durable = false;
  readonly created = new Map<string, number>();
  constructor(private readonly inner: TaskStore) {}
  async create(record: Parameters<TaskStore['create']>[0]): Promise<TaskCreate> {
    const r = await this.inner.create(record);
    if (r.kind === 'created')
      this.created.set(record.fingerprint, (this.created.get(record.fingerprint) ?? 0) + 1);
    return r;
  }
  get = (id: string) => this.inner.get(id);
  replace: TaskStore['replace'] = (n, v) => this.inner.replace(n, v);
  sweep = () => this.inner.sweep();
  close = () => this.inner.close();
}

/** Wraps the real store; a mutant may replace it (`mutate`). */
export async function runTasksWorld(
  world: TasksWorld,
  mutate: (store: TaskStore) => TaskStore = (s) => s,
): Promise<TasksOutcome> {
  let t = Date.UTC(2026, 6, 28);
  const now = () => t;
  const counting = new CountingStore(mutate(new MemoryTaskStore({ now })));
  const tasks = createTasks({ store: counting, taskTools: ['charge'], now, ttlMs: 60_000 });
  const runs = new Map<number, number>();
  const run: RunOnSdk = async (message) => {
    const key = Number((message.params?.arguments as { key?: number } | undefined)?.key);
    runs.set(key, (runs.get(key) ?? 0) + 1);
    return Response.json({
      jsonrpc: '2.0',
      id: message.id,
      result: { content: [{ type: 'text', text: `done ${key}` }] },
    });
  };
  const handles = new Map<number, Set<string>>();
  const answered = new Set<number>();
  const served = new Map<number, string>();
  let id = 0;
  const send = async (a: Attempt) => {
    t += 10;
    if (a.fate === 'lostBefore') return;
    const message = {
      jsonrpc: '2.0',
      id: ++id,
      method: 'tools/call',
      params: {
        name: 'charge',
        arguments: { key: a.key },
        _meta: {
          'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS_EXTENSION]: {} } },
          [ContinuityMeta.idempotencyKey]: `key-${a.key}`,
        },
      },
    } as JsonRpcRequest;
    const response = await tasks.serve(message, 'alice', run);
    const body = (await response?.json()) as { result?: { taskId?: string } } | undefined;
    const taskId = body?.result?.taskId;
    if (taskId !== undefined && !served.has(a.key)) served.set(a.key, taskId);
    if (a.fate === 'answered' && taskId !== undefined) {
      answered.add(a.key);
      const set = handles.get(a.key) ?? new Set<string>();
      set.add(taskId);
      handles.set(a.key, set);
    }
  };
  let inFlight: Promise<void> = Promise.resolve();
  for (const a of world.attempts) {
    // A key already answered is not re-issued (the client has its handle).
    if (answered.has(a.key)) continue;
    const sending = send(a);
    inFlight = a.racing ? Promise.all([inFlight, sending]).then(() => undefined) : sending;
    if (!a.racing) await inFlight;
  }
  await inFlight;
  await new Promise((r) => setTimeout(r, 0));
  const stored = new Map<number, boolean>();
  for (const [key, taskId] of served) stored.set(key, (await counting.get(taskId)) !== undefined);
  const created = new Map<number, number>();
  for (const [fp, n] of counting.created) created.set(Number(/"key":(\d+)/.exec(fp)?.[1]), n);
  await tasks.close();
  return { created, runs, handles, stored };
}

/** At most one task and one run per key; every handle the client got for a key is that one task, stored. */
export function exactlyOnePerKey(o: TasksOutcome): boolean {
  for (const n of o.created.values()) if (n > 1) return false;
  for (const n of o.runs.values()) if (n > 1) return false;
  for (const set of o.handles.values()) if (set.size > 1) return false;
  for (const kept of o.stored.values()) if (!kept) return false;
  return true;
}

/** The mutant of issue 26: a store that forgets key bindings, so a re-issue after a cut creates a second task. */
export function forgetsKeys(store: TaskStore): TaskStore {
  return {
    durable: store.durable,
    create: (record) => {
      const { keyRef: _k, ...unkeyed } = record;
      return store.create(unkeyed);
    },
    get: (id) => store.get(id),
    replace: (n, v) => store.replace(n, v),
    sweep: () => store.sweep(),
    close: () => store.close(),
  };
}
