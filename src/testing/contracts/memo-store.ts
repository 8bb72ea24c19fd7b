import { deepStrictEqual as equal, ok, strictEqual as same } from 'node:assert/strict';
import type { KeyedWorkState, MemoEntry, MemoExpected } from '../../../machines/server/keyed-memo.js';
import type { MemoStore } from '../../server/memo-store.js';
import { type ContractCase, ContractClock, withStores } from './harness.js';

/** What the suite gives the factory: the window to use, and the only clock the store may read. */
export interface MemoStoreContractOptions {
  readonly memoWindowMs: number;
  readonly now: () => number;
}

/**
 * How the suite gets stores. Every store it makes must read time only from `options.now`.
 * `peer` and `reopen` are optional: the cases that need them are left out without them.
 */
export interface MemoStoreFactory<S extends MemoStore = MemoStore> {
  /** A store over fresh, empty data (its own file, key prefix, schema or table). */
  create(options: MemoStoreContractOptions): Promise<S> | S;
  /**
   * A second store over the same data as `store`, open at the same time, as another instance would hold it
   * (stores shared by several instances: Redis, Postgres).
   */
  peer?(store: S, options: MemoStoreContractOptions): Promise<S> | S;
  /** A new store over the data `store` left once the suite closed it: a process restart (durable stores). */
  reopen?(store: S, options: MemoStoreContractOptions): Promise<S> | S;
}

const WINDOW_MS = 60_000;
const FINISHED: readonly KeyedWorkState[] = [
  'committed',
  'answered',
  'cancelled',
  'outcomeUnknown',
  'refused',
];

/**
 * The contract of a {@link MemoStore} (the continuity extension's memo): set-if-absent within the
 * per-principal bound, compare-and-set on the entry's state and run (`MemoExpected`: a writer that read
 * one run never overwrites another run of the key in the same state), the memo window, races between two writers, the sweep, leases and restarts.
 * Memory, SQLite, Redis and the simulated store of the property worlds all pass it.
 *
 * @example With your test framework's `describe` and `it` (vitest, jest, mocha):
 * ```ts
 * import { memoStoreContract, registerContract } from 'mcp-continuity/testing';
 * registerContract({ describe, it }, 'PostgresMemoStore', memoStoreContract({
 *   create: ({ memoWindowMs, now }) => new PostgresMemoStore({ pool, schema: freshSchema(), memoWindowMs, now }),
 * }));
 * ```
 */
export function memoStoreContract<S extends MemoStore>(factory: MemoStoreFactory<S>): ContractCase[] {
  const setup = () => {
    const clock = new ContractClock();
    const options: MemoStoreContractOptions = { memoWindowMs: WINDOW_MS, now: clock.now };
    return { clock, options };
  };
  const entryOf =
    (clock: ContractClock) =>
    (key: string, over: Partial<MemoEntry> = {}): MemoEntry => ({
      memoKey: key,
      principal: 'p',
      fingerprint: `fp-${key}`,
      state: 'running',
      owner: 'owner-1',
      logId: `keyed-${key.length}-${[...key].map((c) => c.codePointAt(0)?.toString(16)).join('')}`,
      epoch: 'e1',
      createdAt: clock.now(),
      ...over,
    });
  /** What a compare-and-set from `entry` expects: its state (or `state`) and its run. */
  const from = (entry: MemoEntry, state: KeyedWorkState = entry.state): MemoExpected => ({
    state,
    logId: entry.logId,
  });
  const finished = (
    clock: ContractClock,
    entry: MemoEntry,
    state: KeyedWorkState = 'committed',
    over: Partial<MemoEntry> = {},
  ): MemoEntry => ({
    ...entry,
    state,
    outcome: { kind: 'result', result: { content: [{ type: 'text', text: `done ${entry.memoKey}` }] } },
    finalSeq: 3,
    finishedAt: clock.now(),
    ...over,
  });

  /** One case with a fresh store (and its clock); the store is closed afterwards. */
  const one = (name: string, body: (s: S, t: ReturnType<typeof setup>) => Promise<void>): ContractCase => ({
    name,
    run: () =>
      withStores<S>(async ({ open }) => {
        const t = setup();
        await body(await open(factory.create(t.options)), t);
      }),
  });

  /** The second writer of a race: another instance when the store is shared, else the same store. */
  const secondWriter = async (
    s: S,
    options: MemoStoreContractOptions,
    open: (x: Promise<S> | S) => Promise<S>,
  ) => (factory.peer ? open(factory.peer(s, options)) : s);

  const cases: ContractCase[] = [
    one('reports its window and whether it is durable; knows no key it was never given', async (s) => {
      same(s.memoWindowMs, WINDOW_MS);
      same(typeof s.durable, 'boolean');
      same(typeof s.instanceId, 'string');
      ok(s.instanceId.length > 0, 'an instance id');
      same(await s.get('nobody'), undefined);
      equal(await s.running(), []);
      equal(await s.sweep(), []);
    }),

    one(
      'create is set-if-absent: the first entry stays, a second create answers it as exists',
      async (s, { clock }) => {
        const entry = entryOf(clock);
        const first = entry('k');
        equal(await s.create(first, 10), { kind: 'created' });
        equal(await s.get('k'), first);
        equal(await s.create(entry('k', { fingerprint: 'other', owner: 'owner-2' }), 10), {
          kind: 'exists',
          entry: first,
        });
        equal(await s.get('k'), first);
      },
    ),

    one(
      'keeps every field of an entry exactly, whatever the characters of key and principal',
      async (s, { clock }) => {
        const entry = entryOf(clock);
        const keys = ['a|b:c{d}*?', 'ключ ✓ 🔑', 'x'.repeat(300), 'a', 'A'];
        for (const [i, key] of keys.entries()) {
          const e = entry(key, { principal: i % 2 ? 'p|:{}' : 'принцип', epoch: `e${i}` });
          equal(await s.create(e, 10), { kind: 'created' });
        }
        for (const [i, key] of keys.entries()) {
          const stored = await s.get(key);
          same(stored?.memoKey, key, 'keys never collide');
          same(stored?.epoch, `e${i}`);
        }
        const rich = finished(clock, entry('a'), 'committed', {
          principal: 'принцип',
          epoch: 'e3',
          outcome: {
            kind: 'error',
            error: { code: -32000, message: 'nope ✓', data: { why: [1, null, 'x'] } },
          },
          finalSeq: 17,
        });
        equal(await s.replace(rich, from(rich, 'running')), rich);
        equal(await s.get('a'), rich);
      },
    ),

    one(
      'replace is compare-and-set on the state: it writes only from the expected state',
      async (s, { clock }) => {
        const e = entryOf(clock)('k');
        await s.create(e, 10);
        const done = finished(clock, e, 'committed');
        equal(await s.replace(done, from(e)), done, 'the winner gets its own entry back');
        equal(await s.get('k'), done);
        // A late writer expecting `running` (a cancel, a declared death) never overwrites the outcome.
        const late = finished(clock, e, 'outcomeUnknown');
        equal(await s.replace(late, from(e)), done, 'a loser gets what is stored');
        equal(await s.get('k'), done);
        // From the stored state it may move on (committed → answered).
        const answered = { ...done, state: 'answered' as const };
        equal(await s.replace(answered, from(done)), answered);
        equal(await s.get('k'), answered);
      },
    ),

    one('replace of a key that is not stored answers undefined and creates nothing', async (s, { clock }) => {
      const e = entryOf(clock)('ghost');
      same(await s.replace(finished(clock, e), from(e)), undefined);
      same(await s.replace(e, from(e)), undefined);
      same(await s.get('ghost'), undefined);
      equal(await s.running(), []);
    }),

    one(
      'compares the state and the run: a writer that read one run never overwrites another run in that state',
      async (s, { clock }) => {
        const entry = entryOf(clock);
        const first = entry('k', { logId: 'keyed-run1', epoch: 'r1' });
        await s.create(first, 10);
        // Writer A read `first` (running) and is slow. Meanwhile the SDK refused the body...
        const refused = finished(clock, first, 'refused', {
          outcome: { kind: 'error', error: { code: -32020, message: 'header' } },
        });
        equal(await s.replace(refused, from(first)), refused);
        // ...and a re-issue restarted the key: running again, another run (log, epoch, owner).
        const second = entry('k', { logId: 'keyed-run2', epoch: 'r2', owner: 'owner-2' });
        equal(await s.replace(second, from(refused)), second);
        // A's compare-and-set expects `running` of the first run: the second run is running, and stays.
        const stale = finished(clock, first, 'outcomeUnknown');
        equal(await s.replace(stale, from(first)), second, 'the loser gets the second run');
        equal(await s.get('k'), second);
        // The second run's own writer still wins.
        const done = finished(clock, second);
        equal(await s.replace(done, from(second)), done);
      },
    ),

    {
      name: 'two writers racing to create one key: exactly one creates it, every other is told of that entry',
      run: () =>
        withStores<S>(async ({ open }) => {
          const { clock, options } = setup();
          const a = await open(factory.create(options));
          const b = await secondWriter(a, options, open);
          const entry = entryOf(clock);
          const racers = Array.from({ length: 6 }, (_, i) =>
            entry('k', { fingerprint: `fp${i}`, owner: `o${i}` }),
          );
          const answers = await Promise.all(racers.map((e, i) => (i % 2 ? b : a).create(e, 10)));
          const won = answers.flatMap((r, i) => (r.kind === 'created' ? [racers[i] as MemoEntry] : []));
          same(won.length, 1, `one creator, got ${answers.map((r) => r.kind).join(',')}`);
          for (const r of answers) if (r.kind !== 'created') equal(r, { kind: 'exists', entry: won[0] });
          equal(await a.get('k'), won[0]);
          equal(await b.get('k'), won[0]);
        }),
    },

    {
      name: 'two writers racing to record an outcome: exactly one compare-and-set wins, all see its entry',
      run: () =>
        withStores<S>(async ({ open }) => {
          const { clock, options } = setup();
          const a = await open(factory.create(options));
          const b = await secondWriter(a, options, open);
          const e = entryOf(clock)('k');
          await a.create(e, 10);
          const nexts = FINISHED.map((state) => finished(clock, e, state));
          const results = await Promise.all(nexts.map((n, i) => (i % 2 ? b : a).replace(n, from(e))));
          const stored = await a.get('k');
          ok(stored, 'the entry is there');
          same(
            results.filter((r, i) => r !== undefined && r.state === nexts[i]?.state).length,
            1,
            'one winner',
          );
          for (const r of results) equal(r, stored, 'every writer is answered with the stored entry');
          equal(await b.get('k'), stored);
        }),
    },

    {
      name: 'two writers racing past the per-principal bound: exactly the bound is admitted',
      run: () =>
        withStores<S>(async ({ open }) => {
          const { clock, options } = setup();
          const a = await open(factory.create(options));
          const b = await secondWriter(a, options, open);
          const entry = entryOf(clock);
          const answers = await Promise.all(
            Array.from({ length: 8 }, (_, i) => (i % 2 ? b : a).create(entry(`k${i}`), 3)),
          );
          same(answers.filter((r) => r.kind === 'created').length, 3);
          same(answers.filter((r) => r.kind === 'full').length, 5);
        }),
    },

    one(
      'the per-principal bound: full with a Retry-After until an entry leaves its window',
      async (s, { clock }) => {
        const entry = entryOf(clock);
        const a = entry('a');
        await s.create(a, 2);
        await s.create(entry('b'), 2);
        // Both running: nothing frees before one finishes and its window passes.
        equal(await s.create(entry('c'), 2), { kind: 'full', retryAfterSeconds: WINDOW_MS / 1000 });
        // Another principal has its own bound; a known key is answered as known, not as full.
        equal(await s.create(entry('q1', { principal: 'q' }), 2), { kind: 'created' });
        equal(await s.create(entry('a', { fingerprint: 'x' }), 2), { kind: 'exists', entry: a });
        await s.replace(finished(clock, a), from(a));
        clock.advance(20_000);
        // `a` leaves its window 40 s from now; that is the wait.
        equal(await s.create(entry('c'), 2), { kind: 'full', retryAfterSeconds: 40 });
        clock.advance(39_001);
        equal(await s.create(entry('c'), 2), { kind: 'full', retryAfterSeconds: 1 });
        clock.advance(999);
        equal(await s.create(entry('c'), 2), { kind: 'created' });
      },
    ),

    one(
      'a finished entry is kept exactly memoWindowMs after it finished, then gone everywhere',
      async (s, { clock }) => {
        const entry = entryOf(clock);
        const e = entry('k');
        await s.create(e, 10);
        clock.advance(5_000);
        const done = finished(clock, e, 'answered');
        await s.replace(done, from(e));
        clock.advance(WINDOW_MS - 1);
        equal(await s.get('k'), done);
        clock.advance(1);
        same(await s.get('k'), undefined);
        same(await s.replace({ ...done, state: 'committed' }, from(done)), undefined);
        // The key is new again: a create makes a fresh entry.
        const again = entry('k', { logId: 'keyed-again', epoch: 'e2' });
        equal(await s.create(again, 10), { kind: 'created' });
        equal(await s.get('k'), again);
      },
    ),

    one('a running entry never expires', async (s, { clock }) => {
      const e = entryOf(clock)('k');
      await s.create(e, 10);
      clock.advance(WINDOW_MS * 10);
      equal(await s.get('k'), e);
      equal(await s.running(), [e]);
      equal(await s.sweep(), []);
    }),

    one(
      'reports each expired entry once, by sweep or by onForget, and nothing still kept',
      async (s, { clock }) => {
        const reported: string[] = [];
        s.onForget?.((logId) => reported.push(logId));
        const entry = entryOf(clock);
        const a = entry('a', { logId: 'keyed-a' });
        const b = entry('b', { logId: 'keyed-b' });
        const c = entry('c', { logId: 'keyed-c' });
        for (const e of [a, b, c]) await s.create(e, 10);
        await s.replace(finished(clock, a), from(a));
        clock.advance(10_000);
        await s.replace(finished(clock, b, 'cancelled'), from(b));
        clock.advance(WINDOW_MS - 5_000); // a is past its window, b is not, c runs
        same(await s.get('a'), undefined);
        reported.push(...(await s.sweep()));
        reported.push(...(await s.sweep()));
        equal(reported, ['keyed-a']);
        clock.advance(5_000);
        reported.push(...(await s.sweep()));
        equal(reported.sort(), ['keyed-a', 'keyed-b']);
        equal(await s.running(), [c]);
      },
    ),

    one('running() lists exactly the running entries, a restarted one included', async (s, { clock }) => {
      const entry = entryOf(clock);
      const [a, b] = [entry('a'), entry('b', { principal: 'q' })];
      await s.create(a, 10);
      await s.create(b, 10);
      const byKey = (list: MemoEntry[]) => [...list].sort((x, y) => x.memoKey.localeCompare(y.memoKey));
      equal(byKey(await s.running()), [a, b]);
      await s.replace(finished(clock, a, 'refused'), from(a));
      equal(await s.running(), [b]);
      const restarted = entry('a', { logId: 'keyed-a2', epoch: 'e2' });
      await s.replace(restarted, from(a, 'refused'));
      equal(byKey(await s.running()), [restarted, b]);
    }),

    one('completeForMs counts from when the store (its data) was first opened', async (s, { clock }) => {
      same(await s.completeForMs(), 0);
      clock.advance(12_345);
      same(await s.completeForMs(), 12_345);
    }),

    one('this instance is always alive to itself; an id nobody leased is not', async (s) => {
      await s.renewLease(60_000);
      equal(await s.alive([s.instanceId, 'nobody']), new Set([s.instanceId]));
      await s.dropLease();
      ok((await s.alive([s.instanceId])).has(s.instanceId));
    }),
  ];

  const { peer, reopen } = factory;
  if (peer) {
    cases.push({
      name: 'another instance sees entries and leases: alive while leased, gone once the lease is dropped',
      run: () =>
        withStores<S>(async ({ open }) => {
          const { clock, options } = setup();
          const a = await open(factory.create(options));
          const b = await open(peer(a, options));
          ok(a.instanceId !== b.instanceId, 'each instance has its own id');
          const e = entryOf(clock)('k', { owner: a.instanceId });
          await a.create(e, 10);
          equal(await b.get('k'), e);
          await a.renewLease(60_000);
          equal(await b.alive([a.instanceId]), new Set([a.instanceId]));
          await a.dropLease();
          equal(await b.alive([a.instanceId]), new Set());
        }),
    });
  }
  if (reopen) {
    cases.push({
      name: 'survives a restart: entries, running work and the complete-for clock; the new process has a new id',
      run: () =>
        withStores<S>(async ({ open, close }) => {
          const { clock, options } = setup();
          const first = await open(factory.create(options));
          same(first.durable, true, 'a store that can be reopened says it is durable');
          const entry = entryOf(clock);
          const running = entry('r', { owner: first.instanceId });
          const done = entry('d');
          await first.create(running, 10);
          await first.create(done, 10);
          const finishedDone = finished(clock, done);
          await first.replace(finishedDone, from(done));
          clock.advance(7_000);
          await close(first);
          const second = await open(reopen(first, options));
          ok(second.instanceId !== first.instanceId, 'a restarted process is another owner');
          equal(await second.get('r'), running);
          equal(await second.get('d'), finishedDone);
          equal(await second.running(), [running]);
          equal(await second.alive([first.instanceId]), new Set(), 'the old process holds no lease');
          same(await second.completeForMs(), 7_000);
          // Still set-if-absent, compare-and-set and expiring after the restart.
          equal(await second.create(entry('r'), 10), { kind: 'exists', entry: running });
          const declared = finished(clock, running, 'outcomeUnknown');
          equal(await second.replace(declared, from(running)), declared);
          clock.advance(WINDOW_MS);
          same(await second.get('d'), undefined);
        }),
    });
  }
  return cases;
}
