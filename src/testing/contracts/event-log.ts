import { deepStrictEqual as equal, ok, strictEqual as same } from 'node:assert/strict';
import type { JsonRpcMessage } from '../../../machines/jsonrpc.js';
import { seededRandom } from '../../../machines/seeded-random.js';
import {
  appendToWindow,
  EMPTY_WINDOW,
  evictWindow,
  finishWindow,
  type RetentionPolicy,
  type StreamWindow,
} from '../../../machines/server/retention.js';
import type { EventLog, StoredEvent } from '../../server/event-log.js';
import { type ContractCase, ContractClock, withStores } from './harness.js';
import { requestMemoryCase } from './request-memory.js';

/** What the suite gives the factory: the retention policy, and the only clock the log may read. */
export interface EventLogContractOptions extends RetentionPolicy {
  readonly now: () => number;
}

/**
 * How the suite gets logs. Every log it makes must use the given policy and read time only from `now`.
 * `peer` and `reopen` are optional: the cases that need them are left out without them.
 */
export interface EventLogFactory<L extends EventLog = EventLog> {
  /** An empty log over fresh data (its own file, key prefix or schema). */
  create(options: EventLogContractOptions): Promise<L> | L;
  /** A second log over the same data as `log`, open at the same time (another instance: Redis, Postgres). */
  peer?(log: L, options: EventLogContractOptions): Promise<L> | L;
  /** A new log over the data `log` left once the suite closed it: a process restart (durable logs). */
  reopen?(log: L, options: EventLogContractOptions): Promise<L> | L;
}

const note = (i: number, tag = ''): JsonRpcMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/message',
  params: { i, tag },
});

/**
 * A read as the cases compare it. A backend may keep each message's JSON text (`StoredEvent.data`, which
 * a replay writes as it is): where it does, it must be exactly the message's, and it is then left out.
 */
async function plain<R extends { events: StoredEvent[] }>(
  read: Promise<R | undefined>,
): Promise<R | undefined> {
  const r = await read;
  if (!r) return r;
  for (const e of r.events)
    if (e.data !== undefined)
      same(e.data, JSON.stringify(e.message), `event ${e.seq}: data is its message's JSON`);
  return { ...r, events: r.events.map((e) => ({ seq: e.seq, message: e.message })) };
}

const seqs = (events: readonly StoredEvent[] | undefined): number[] => (events ?? []).map((e) => e.seq);

/** `window` has these fields (the others are not compared). */
function windowHas(window: StreamWindow | undefined, want: Partial<StreamWindow>, what = 'window'): void {
  ok(window, `${what}: a window`);
  for (const [k, v] of Object.entries(want)) equal(window[k as keyof StreamWindow], v, `${what}.${k}`);
}

/** A deterministic whole number in [0, n), so a failing sequence is named by its seed. */
function random(seed: number): (n: number) => number {
  const unit = seededRandom(seed);
  return (n) => Math.floor(unit() * n);
}

/**
 * The contract of an {@link EventLog}: dense sequence numbers per stream, reads after a cursor, eviction
 * by count and age exactly as `machines/server/retention.ts` decides it (checked against the pure functions
 * over seeded random sequences), `appendFinal` written once however many race for it, isolation of
 * streams and sessions, two writers, and restart for durable logs. Memory, SQLite and Redis pass it.
 *
 * @example With your test framework's `describe` and `it` (vitest, jest, mocha):
 * ```ts
 * import { eventLogContract, registerContract } from 'mcp-continuity/testing';
 * registerContract({ describe, it }, 'PostgresEventLog', eventLogContract({
 *   create: (options) => new PostgresEventLog({ pool, schema: freshSchema(), ...options }),
 * }));
 * ```
 */
export function eventLogContract<L extends EventLog>(
  factory: EventLogFactory<L>,
  sequences = 100,
): ContractCase[] {
  const one = (
    name: string,
    body: (log: (policy?: Partial<RetentionPolicy>) => Promise<L>, clock: ContractClock) => Promise<void>,
  ): ContractCase => ({
    name,
    run: () =>
      withStores<L>(async ({ open }) => {
        const clock = new ContractClock();
        await body(
          (policy = {}) =>
            open(factory.create({ maxEventsPerStream: 100, retentionMs: 60_000, ...policy, now: clock.now })),
          clock,
        );
      }),
  });

  const cases: ContractCase[] = [
    one('reports the policy it was made with and whether it is durable', async (log) => {
      const l = await log({ maxEventsPerStream: 7, retentionMs: 1234 });
      equal({ ...l.policy }, { maxEventsPerStream: 7, retentionMs: 1234 });
      same(typeof l.durable, 'boolean');
    }),

    one('numbers events densely from 1, per stream and per session', async (log) => {
      const l = await log();
      same(await l.append('a', 0, note(1)), 1);
      same(await l.append('a', 0, note(2)), 2);
      same(await l.append('a', 1, note(3)), 1);
      same(await l.append('b', 0, note(4)), 1);
      same(await l.append('a', 0, note(5)), 3);
      same(await l.append('a', 1, note(6)), 2);
      windowHas(await l.window('a', 0), { oldest: 1, head: 3 });
      windowHas(await l.window('a', 1), { oldest: 1, head: 2 });
      windowHas(await l.window('b', 0), { oldest: 1, head: 1 });
    }),

    one('registers streams idempotently; an opened stream is known and empty', async (log) => {
      const l = await log();
      await l.openStream('a', 3);
      equal(await l.window('a', 3), EMPTY_WINDOW);
      equal(await plain(l.read('a', 3, 0)), { events: [], window: EMPTY_WINDOW });
      await l.append('a', 3, note(1));
      await l.openStream('a', 3);
      windowHas(await l.window('a', 3), { oldest: 1, head: 1 });
      same(await l.append('a', 3, note(2)), 2);
    }),

    one('reads exactly the events after the cursor, in order, with their messages', async (log) => {
      const l = await log();
      const messages: JsonRpcMessage[] = [
        note(1),
        { jsonrpc: '2.0', id: 'r1', method: 'sampling/createMessage', params: { x: [1, { y: null }] } },
        note(3),
        { jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'ok ✓' }] } },
        { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'bad', data: { why: 'because' } } },
      ];
      for (const m of messages) await l.append('s', 1, m);
      const all = await plain(l.read('s', 1, 0));
      equal(
        all?.events,
        messages.map((message, i) => ({ seq: i + 1, message })),
      );
      windowHas(all?.window, { oldest: 1, head: 5, finished: false });
      equal(seqs((await plain(l.read('s', 1, 2)))?.events), [3, 4, 5]);
      equal((await plain(l.read('s', 1, 3)))?.events, [
        { seq: 4, message: messages[3] },
        { seq: 5, message: messages[4] },
      ]);
      const atHead = await plain(l.read('s', 1, 5));
      equal(atHead?.events, []);
      same(atHead?.window.head, 5);
    }),

    one(
      'evicts by count: the window moves exactly and evicted events are never returned',
      async (log, clock) => {
        const l = await log({ maxEventsPerStream: 3 });
        for (let i = 1; i <= 5; i++) await l.append('s', 0, note(i));
        const T0 = clock.T0;
        equal(await l.window('s', 0), { oldest: 3, head: 5, appendedAt: [T0, T0, T0], finished: false });
        equal(
          (await plain(l.read('s', 0, 0)))?.events,
          [3, 4, 5].map((i) => ({ seq: i, message: note(i) })),
        );
        equal(seqs((await plain(l.read('s', 0, 1)))?.events), [3, 4, 5]);
        equal(seqs((await plain(l.read('s', 0, 3)))?.events), [4, 5]);
        // Another stream's count is its own.
        await l.append('s', 1, note(9));
        windowHas(await l.window('s', 1), { oldest: 1, head: 1 });
      },
    ),

    one(
      'evicts by age as the clock advances, also without appends, on window and on read',
      async (log, clock) => {
        const l = await log({ retentionMs: 1_000 });
        const T0 = clock.T0;
        await l.append('s', 0, note(1)); // at T0
        clock.advance(500);
        await l.append('s', 0, note(2)); // at T0 + 500
        clock.set(T0 + 1_000); // exactly retentionMs old: kept
        windowHas(await l.window('s', 0), { oldest: 1, head: 2 });
        clock.set(T0 + 1_001);
        equal(await l.window('s', 0), { oldest: 2, head: 2, appendedAt: [T0 + 500], finished: false });
        equal((await plain(l.read('s', 0, 0)))?.events, [{ seq: 2, message: note(2) }]);
        clock.set(T0 + 1_501);
        equal(await plain(l.read('s', 0, 0)), {
          events: [],
          window: { oldest: 3, head: 2, appendedAt: [], finished: false },
        });
        // The stream is still known and numbering continues after the head.
        same(await l.append('s', 0, note(3)), 3);
        equal(seqs((await plain(l.read('s', 0, 0)))?.events), [3]);
      },
    ),

    one('a finished window keeps what is retained', async (log) => {
      const l = await log();
      await l.append('s', 2, note(1));
      same((await l.window('s', 2))?.finished, false);
      await l.appendFinal('s', 2, note(2));
      windowHas(await l.window('s', 2), { oldest: 1, head: 2, finished: true });
      const r = await plain(l.read('s', 2, 0));
      equal(seqs(r?.events), [1, 2]);
      same(r?.window.finished, true);
      same(await l.window('s', 0), undefined);
    }),

    one(
      'appendFinal writes the last message of a stream exactly once, however many race for it',
      async (log) => {
        const l = await log();
        await l.append('s', 3, note(1));
        const racers = await Promise.all([1, 2, 3, 4].map((n) => l.appendFinal('s', 3, note(100 + n))));
        equal(
          racers.filter((seq) => seq !== undefined),
          [2],
        );
        const r = await plain(l.read('s', 3, 0));
        equal(seqs(r?.events), [1, 2]);
        same(r?.window.finished, true);
        // An unknown stream is registered, as appending would.
        same(await l.appendFinal('s', 6, note(7)), 1);
      },
    ),

    one('knows nothing of streams and sessions it was never told about', async (log) => {
      const l = await log();
      same(await l.window('nobody', 0), undefined);
      same(await plain(l.read('nobody', 0, 0)), undefined);
      await l.append('a', 0, note(1));
      same(await l.window('a', 1), undefined);
      same(await plain(l.read('a', 1, 0)), undefined);
      same(await l.window('b', 0), undefined);
      same(await plain(l.read('b', 0, 0)), undefined);
    }),

    one('dropSession forgets the session and nothing else', async (log) => {
      const l = await log();
      await l.append('a', 0, note(1));
      await l.appendFinal('a', 1, note(2));
      await l.append('b', 0, note(3));
      await l.dropSession('a');
      same(await l.window('a', 0), undefined);
      same(await plain(l.read('a', 0, 0)), undefined);
      same(await l.window('a', 1), undefined);
      equal((await plain(l.read('b', 0, 0)))?.events, [{ seq: 1, message: note(3) }]);
      await l.dropSession('a');
      await l.dropSession('never');
      // A session id seen again starts from nothing.
      same(await l.append('a', 0, note(4)), 1);
    }),

    one("never returns another session's events", async (log) => {
      const l = await log();
      for (let i = 1; i <= 3; i++) {
        await l.append('a', 0, note(i, 'a'));
        await l.append('b', 0, note(i, 'b'));
      }
      equal(
        (await plain(l.read('a', 0, 0)))?.events.map((e) => e.message),
        [1, 2, 3].map((i) => note(i, 'a')),
      );
      equal(
        (await plain(l.read('b', 0, 0)))?.events.map((e) => e.message),
        [1, 2, 3].map((i) => note(i, 'b')),
      );
      await l.appendFinal('a', 0, note(4, 'a'));
      same((await l.window('b', 0))?.finished, false);
    }),

    {
      name: `agrees with the retention functions on every read (${sequences} seeded random sequences)`,
      run: async () => {
        for (let seed = 1; seed <= sequences; seed++) await agreesWithRetention(factory, seed);
      },
    },

    {
      name: 'two writers appending at once: sequence numbers dense and distinct, each with its message',
      run: () =>
        withStores<L>(async ({ open }) => {
          const clock = new ContractClock();
          const options = { maxEventsPerStream: 100, retentionMs: 60_000, now: clock.now };
          const a = await open(factory.create(options));
          const b = factory.peer ? await open(factory.peer(a, options)) : a;
          const given = await Promise.all(
            Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).append('s', 0, note(i))),
          );
          const all = Array.from({ length: 40 }, (_, i) => i + 1);
          equal(
            [...given].sort((x, y) => x - y),
            all,
          );
          const read = await plain(a.read('s', 0, 0));
          equal(seqs(read?.events), all);
          for (const [i, seq] of given.entries()) equal(read?.events[seq - 1]?.message, note(i));
          // The final message too is written once, whichever writer races for it.
          const finals = await Promise.all([a, b, a, b].map((l, i) => l.appendFinal('s', 0, note(100 + i))));
          equal(
            finals.filter((x) => x !== undefined),
            [41],
          );
        }),
    },
  ];

  cases.push(
    requestMemoryCase((now) => factory.create({ maxEventsPerStream: 100, retentionMs: 60_000, now })),
  );
  const { reopen } = factory;
  if (reopen) {
    cases.push({
      name: 'survives a restart: events, windows (finished too) and numbering; dropped sessions stay dropped',
      run: () =>
        withStores<L>(async ({ open, close }) => {
          const clock = new ContractClock();
          const options = { maxEventsPerStream: 3, retentionMs: 60_000, now: clock.now };
          const first = await open(factory.create(options));
          same(first.durable, true, 'a log that can be reopened says it is durable');
          for (let i = 1; i < 5; i++) await first.append('s', 1, note(i));
          await first.appendFinal('s', 1, note(5));
          await first.append('s', 0, note(100));
          await first.append('gone', 0, note(200));
          await first.dropSession('gone');
          await close(first);
          const second = await open(reopen(first, options));
          windowHas(await second.window('s', 1), { oldest: 3, head: 5, finished: true });
          equal(
            (await plain(second.read('s', 1, 0)))?.events,
            [3, 4, 5].map((i) => ({ seq: i, message: note(i) })),
          );
          equal((await plain(second.read('s', 0, 0)))?.events, [{ seq: 1, message: note(100) }]);
          same(await second.window('gone', 0), undefined);
          same(await second.appendFinal('s', 1, note(6)), undefined, 'still finished');
          same(await second.append('s', 0, note(101)), 2);
        }),
    });
  }
  return cases;
}

type Op =
  | { kind: 'append'; session: number; stream: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'read'; session: number; stream: number; afterSeq: number }
  | { kind: 'appendFinal'; session: number; stream: number }
  | { kind: 'drop'; session: number };

function opsOf(seed: number): { policy: RetentionPolicy; ops: Op[] } {
  const r = random(seed);
  const policy = { maxEventsPerStream: 1 + r(6), retentionMs: r(61) };
  const ops: Op[] = [];
  for (let n = r(61); n > 0; n--) {
    const w = r(15);
    const session = r(2);
    const stream = r(3);
    if (w < 6) ops.push({ kind: 'append', session, stream });
    else if (w < 9) ops.push({ kind: 'advance', ms: r(41) });
    else if (w < 13) ops.push({ kind: 'read', session, stream, afterSeq: r(26) });
    else if (w < 14) ops.push({ kind: 'appendFinal', session, stream });
    else ops.push({ kind: 'drop', session });
  }
  return { policy, ops };
}

/** One seeded sequence of operations: every answer equals what the retention functions say. */
async function agreesWithRetention(factory: EventLogFactory, seed: number): Promise<void> {
  const { policy, ops } = opsOf(seed);
  const clock = new ContractClock();
  const l = await factory.create({ ...policy, now: clock.now });
  try {
    // The model: every message ever appended per stream, and its window from the pure functions.
    const model = new Map<string, { window: StreamWindow; messages: JsonRpcMessage[] }>();
    const key = (session: number, stream: number): string => `${session}/${stream}`;
    const sessionId = (session: number): string => `session-${session}`;
    const expected = (session: number, stream: number, afterSeq: number) => {
      const m = model.get(key(session, stream));
      if (!m) return undefined;
      m.window = evictWindow(m.window, clock.now(), policy);
      const events: StoredEvent[] = [];
      for (let seq = Math.max(m.window.oldest, afterSeq + 1); seq <= m.window.head; seq++)
        events.push({ seq, message: m.messages[seq - 1] as JsonRpcMessage });
      return { events, window: m.window };
    };
    const streamOf = (session: number, stream: number) => {
      const m = model.get(key(session, stream)) ?? { window: EMPTY_WINDOW, messages: [] };
      model.set(key(session, stream), m);
      return m;
    };
    let n = 0;
    for (const [i, op] of ops.entries()) {
      const at = `seed ${seed}, op ${i} ${JSON.stringify(op)} (policy ${JSON.stringify(policy)})`;
      switch (op.kind) {
        case 'append': {
          const m = streamOf(op.session, op.stream);
          const message = note(n++, key(op.session, op.stream));
          const next = appendToWindow(m.window, clock.now(), policy);
          m.window = next.window;
          m.messages.push(message);
          same(await l.append(sessionId(op.session), op.stream, message), next.seq, at);
          break;
        }
        case 'advance':
          clock.advance(op.ms);
          break;
        case 'read':
          equal(
            await plain(l.read(sessionId(op.session), op.stream, op.afterSeq)),
            expected(op.session, op.stream, op.afterSeq),
            at,
          );
          break;
        case 'appendFinal': {
          const m = streamOf(op.session, op.stream);
          const message = note(n++, key(op.session, op.stream));
          if (m.window.finished) {
            same(await l.appendFinal(sessionId(op.session), op.stream, message), undefined, at);
            break;
          }
          const next = appendToWindow(m.window, clock.now(), policy);
          m.window = finishWindow(next.window);
          m.messages.push(message);
          same(await l.appendFinal(sessionId(op.session), op.stream, message), next.seq, at);
          break;
        }
        case 'drop':
          for (const k of [...model.keys()]) if (k.startsWith(`${op.session}/`)) model.delete(k);
          await l.dropSession(sessionId(op.session));
          break;
      }
    }
    for (let session = 0; session <= 1; session++)
      for (let stream = 0; stream <= 2; stream++) {
        const want = expected(session, stream, 0);
        const at = `seed ${seed}, at the end, session ${session} stream ${stream}`;
        equal(await l.window(sessionId(session), stream), want?.window, at);
        equal(await plain(l.read(sessionId(session), stream, 0)), want, at);
      }
  } finally {
    await l.close();
  }
}
