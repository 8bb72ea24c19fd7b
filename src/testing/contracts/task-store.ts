import { deepStrictEqual as equal, ok, strictEqual as same } from 'node:assert/strict';
import { newTaskRecord } from '../../../machines/tasks/task-decide.js';
import type { TaskRecord } from '../../../machines/tasks/task-record.js';
import type { TaskStore } from '../../server/tasks/task-store.js';
import { type ContractCase, ContractClock, withStores } from './harness.js';

/**
 * How the suite gets task stores; each must read time only from `now`. `peer` (a second instance over the
 * same data) and `reopen` (a restart over the data left) are optional: their cases are left out without.
 */
export interface TaskStoreFactory<S extends TaskStore = TaskStore> {
  create(options: { readonly now: () => number }): Promise<S> | S;
  peer?(store: S, options: { readonly now: () => number }): Promise<S> | S;
  reopen?(store: S, options: { readonly now: () => number }): Promise<S> | S;
}

const TTL_MS = 60_000;
const KEEP_MS = 30_000;

/**
 * The contract of a {@link TaskStore}: at most one task per key (also when two instances race), records
 * read back as written, compare-and-set on the version, expired tasks kept until their purge time and
 * gone (with their key) after it, and (durable stores) tasks that survive a restart. Memory, SQLite and
 * Redis pass it.
 */
export function taskStoreContract<S extends TaskStore>(factory: TaskStoreFactory<S>): ContractCase[] {
  let ids = 0;
  const task = (clock: ContractClock, over: Partial<TaskRecord> & { keyRef?: string } = {}): TaskRecord => ({
    ...newTaskRecord({
      taskId: `task-${process.pid}-${++ids}-${Math.random().toString(36).slice(2)}`,
      principal: 'p',
      ...(over.keyRef !== undefined ? { keyRef: over.keyRef } : {}),
      fingerprint: 'fp',
      request: { name: 'charge', arguments: { n: 1 } },
      now: clock.now(),
      ttlMs: TTL_MS,
      pollIntervalMs: 100,
      keepExpiredMs: KEEP_MS,
    }),
    ...over,
  });
  const one = (
    name: string,
    body: (s: S, clock: ContractClock, open: (x: Promise<S> | S) => Promise<S>) => Promise<void>,
  ): ContractCase => ({
    name,
    run: () =>
      withStores<S>(async ({ open }) => {
        const clock = new ContractClock();
        await body(await open(factory.create({ now: clock.now })), clock, open);
      }),
  });

  const cases: ContractCase[] = [
    one('a created task reads back as written; an unknown id reads as nothing', async (s, clock) => {
      const t = task(clock, { keyRef: 'k1' });
      equal(await s.create(t), { kind: 'created' });
      equal(await s.get(t.taskId), t);
      same(await s.get('nobody'), undefined);
      same(typeof s.durable, 'boolean');
    }),
    one(
      'a key makes one task: a second creation of it gets the first task and writes nothing',
      async (s, clock) => {
        const first = task(clock, { keyRef: 'k' });
        const second = task(clock, { keyRef: 'k', fingerprint: 'other' });
        equal(await s.create(first), { kind: 'created' });
        equal(await s.create(second), { kind: 'exists', record: first });
        same(await s.get(second.taskId), undefined);
      },
    ),
    one('tasks without a key are each created', async (s, clock) => {
      equal(await s.create(task(clock)), { kind: 'created' });
      equal(await s.create(task(clock)), { kind: 'created' });
    }),
    one('two creations of one key racing make exactly one task', async (s, clock, open) => {
      const other = factory.peer ? await open(factory.peer(s, { now: clock.now })) : s;
      const a = task(clock, { keyRef: 'race' });
      const b = task(clock, { keyRef: 'race' });
      const [ra, rb] = await Promise.all([s.create(a), other.create(b)]);
      const created = [ra, rb].filter((r) => r.kind === 'created').length;
      same(created, 1);
      const winner = ra.kind === 'created' ? a : b;
      const loser = ra.kind === 'created' ? rb : ra;
      equal(loser, { kind: 'exists', record: winner });
    }),
    one(
      'replace is compare-and-set on the version: a stale writer loses and reads the winner',
      async (s, clock) => {
        const t = task(clock);
        await s.create(t);
        const done: TaskRecord = { ...t, status: 'completed', result: { ok: 1 }, version: 2 };
        const cancelled: TaskRecord = { ...t, status: 'cancelled', version: 2 };
        equal(await s.replace(done, 1), done);
        equal(await s.replace(cancelled, 1), done);
        equal(await s.get(t.taskId), done);
        same(await s.replace({ ...t, taskId: 'gone' }, 1), undefined);
      },
    ),
    one('an expired task is kept until its purge time, then it and its key are gone', async (s, clock) => {
      const t = task(clock, { keyRef: 'kx' });
      await s.create(t);
      clock.advance(TTL_MS + KEEP_MS - 1);
      equal(await s.get(t.taskId), t);
      equal(await s.create(task(clock, { keyRef: 'kx' })), { kind: 'exists', record: t });
      clock.advance(1);
      same(await s.get(t.taskId), undefined);
      const later = task(clock, { keyRef: 'kx' });
      equal(await s.create(later), { kind: 'created' });
      await s.sweep();
      equal(await s.get(later.taskId), later);
    }),
    one('a task with an unlimited TTL is never purged', async (s, clock) => {
      const t = task(clock, { ttlMs: null, purgeAt: null });
      await s.create(t);
      clock.advance(10 * 365 * 86_400_000);
      await s.sweep();
      equal(await s.get(t.taskId), t);
    }),
  ];
  const { peer, reopen } = factory;
  if (peer)
    cases.push(
      one('another instance over the same data reads and updates the same task', async (s, clock, open) => {
        const other = await open(peer(s, { now: clock.now }));
        const t = task(clock, { keyRef: 'shared' });
        await s.create(t);
        equal(await other.get(t.taskId), t);
        const next: TaskRecord = { ...t, status: 'completed', version: 2 };
        equal(await other.replace(next, 1), next);
        equal(await s.get(t.taskId), next);
      }),
    );
  if (reopen)
    cases.push({
      name: 'a task and its key survive a restart',
      run: () =>
        withStores<S>(async ({ open, close }) => {
          const clock = new ContractClock();
          const s = await open(factory.create({ now: clock.now }));
          const t = task(clock, { keyRef: 'durable' });
          await s.create(t);
          await close(s);
          const again = await open(reopen(s, { now: clock.now }));
          ok(again.durable, 'a reopened store is durable');
          equal(await again.get(t.taskId), t);
          equal(await again.create(task(clock, { keyRef: 'durable' })), { kind: 'exists', record: t });
        }),
    });
  return cases;
}
