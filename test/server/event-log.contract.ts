import { fc, test } from '@fast-check/vitest';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import {
  appendToWindow,
  EMPTY_WINDOW,
  evictWindow,
  finishWindow,
  type RetentionPolicy,
  type StreamWindow,
} from '../../machines/server/retention.js';
import type { EventLog, StoredEvent } from '../../src/server/event-log.js';

export interface EventLogContractOptions extends RetentionPolicy {
  /** The clock the log must stamp and age events with; the suite moves it. */
  readonly now: () => number;
}

export type MakeEventLog = (opts: EventLogContractOptions) => Promise<EventLog> | EventLog;

const note = (i: number, tag = ''): JsonRpcMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/message',
  params: { i, tag },
});

const seqs = (events: readonly StoredEvent[] | undefined): number[] => (events ?? []).map((e) => e.seq);

/**
 * The behaviour every {@link EventLog} backend shares (memory, SQLite, Redis): sequence numbering,
 * cursors, eviction exactly as `machines/server/retention.ts` decides it, isolation of streams and
 * sessions. `make` must build an empty log that uses the given policy and reads time only from `now`.
 */
export function eventLogContract(name: string, make: MakeEventLog): void {
  describe(`EventLog contract: ${name}`, () => {
    const T0 = 1_700_000_000_000;
    let clock = T0;
    const now = (): number => clock;
    const open: EventLog[] = [];

    async function log(policy: Partial<RetentionPolicy> = {}): Promise<EventLog> {
      const l = await make({ maxEventsPerStream: 100, retentionMs: 60_000, ...policy, now });
      open.push(l);
      return l;
    }

    beforeEach(() => {
      clock = T0;
    });
    afterEach(async () => {
      await Promise.all(open.splice(0).map((l) => l.close()));
    });

    it('reports the policy it was made with and whether it is durable', async () => {
      const l = await log({ maxEventsPerStream: 7, retentionMs: 1234 });
      expect(l.policy).toEqual({ maxEventsPerStream: 7, retentionMs: 1234 });
      expect(typeof l.durable).toBe('boolean');
    });

    it('numbers events densely from 1, per stream and per session', async () => {
      const l = await log();
      expect(await l.append('a', 0, note(1))).toBe(1);
      expect(await l.append('a', 0, note(2))).toBe(2);
      expect(await l.append('a', 1, note(3))).toBe(1);
      expect(await l.append('b', 0, note(4))).toBe(1);
      expect(await l.append('a', 0, note(5))).toBe(3);
      expect(await l.append('a', 1, note(6))).toBe(2);
      expect(await l.window('a', 0)).toMatchObject({ oldest: 1, head: 3 });
      expect(await l.window('a', 1)).toMatchObject({ oldest: 1, head: 2 });
      expect(await l.window('b', 0)).toMatchObject({ oldest: 1, head: 1 });
    });

    it('registers streams idempotently; an opened stream is known and empty', async () => {
      const l = await log();
      await l.openStream('a', 3);
      expect(await l.window('a', 3)).toEqual(EMPTY_WINDOW);
      expect(await l.read('a', 3, 0)).toEqual({ events: [], window: EMPTY_WINDOW });
      await l.append('a', 3, note(1));
      await l.openStream('a', 3);
      expect(await l.window('a', 3)).toMatchObject({ oldest: 1, head: 1 });
      expect(await l.append('a', 3, note(2))).toBe(2);
    });

    it('reads exactly the events after the cursor, in order, with their messages', async () => {
      const l = await log();
      const messages: JsonRpcMessage[] = [
        note(1),
        { jsonrpc: '2.0', id: 'r1', method: 'sampling/createMessage', params: { x: [1, { y: null }] } },
        note(3),
        { jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'ok ✓' }] } },
        { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'bad', data: { why: 'because' } } },
      ];
      for (const m of messages) await l.append('s', 1, m);
      const all = await l.read('s', 1, 0);
      expect(all?.events).toEqual(messages.map((message, i) => ({ seq: i + 1, message })));
      expect(all?.window).toMatchObject({ oldest: 1, head: 5, finished: false });
      expect(seqs((await l.read('s', 1, 2))?.events)).toEqual([3, 4, 5]);
      expect((await l.read('s', 1, 3))?.events).toEqual([
        { seq: 4, message: messages[3] },
        { seq: 5, message: messages[4] },
      ]);
      const atHead = await l.read('s', 1, 5);
      expect(atHead?.events).toEqual([]);
      expect(atHead?.window.head).toBe(5);
    });

    it('evicts by count: the window moves exactly and evicted events are never returned', async () => {
      const l = await log({ maxEventsPerStream: 3 });
      for (let i = 1; i <= 5; i++) await l.append('s', 0, note(i));
      const w = await l.window('s', 0);
      expect(w).toEqual({ oldest: 3, head: 5, appendedAt: [T0, T0, T0], finished: false });
      const r = await l.read('s', 0, 0);
      expect(r?.events).toEqual([3, 4, 5].map((i) => ({ seq: i, message: note(i) })));
      expect(seqs((await l.read('s', 0, 1))?.events)).toEqual([3, 4, 5]);
      expect(seqs((await l.read('s', 0, 3))?.events)).toEqual([4, 5]);
      // Another stream's count is its own.
      await l.append('s', 1, note(9));
      expect(await l.window('s', 1)).toMatchObject({ oldest: 1, head: 1 });
    });

    it('evicts by age as the clock advances, also without appends', async () => {
      const l = await log({ retentionMs: 1_000 });
      await l.append('s', 0, note(1)); // at T0
      clock += 500;
      await l.append('s', 0, note(2)); // at T0 + 500
      clock = T0 + 1_000; // exactly retentionMs old: kept
      expect(await l.window('s', 0)).toMatchObject({ oldest: 1, head: 2 });
      clock = T0 + 1_001;
      expect(await l.window('s', 0)).toEqual({ oldest: 2, head: 2, appendedAt: [T0 + 500], finished: false });
      expect((await l.read('s', 0, 0))?.events).toEqual([{ seq: 2, message: note(2) }]);
      clock = T0 + 1_501;
      const empty = await l.read('s', 0, 0);
      expect(empty).toEqual({ events: [], window: { oldest: 3, head: 2, appendedAt: [], finished: false } });
      // The stream is still known and numbering continues after the head.
      expect(await l.append('s', 0, note(3))).toBe(3);
      expect(seqs((await l.read('s', 0, 0))?.events)).toEqual([3]);
    });

    it('evicts by age on read as well as on window', async () => {
      const l = await log({ retentionMs: 10 });
      await l.append('s', 0, note(1));
      clock += 11;
      const r = await l.read('s', 0, 0);
      expect(r?.events).toEqual([]);
      expect(r?.window).toMatchObject({ oldest: 2, head: 1 });
    });

    it('a finished window keeps what is retained', async () => {
      const l = await log();
      await l.append('s', 2, note(1));
      expect((await l.window('s', 2))?.finished).toBe(false);
      await l.appendFinal('s', 2, note(2));
      expect(await l.window('s', 2)).toMatchObject({ oldest: 1, head: 2, finished: true });
      const r = await l.read('s', 2, 0);
      expect(seqs(r?.events)).toEqual([1, 2]);
      expect(r?.window.finished).toBe(true);
      expect(await l.window('s', 0)).toBeUndefined();
    });

    it('appendFinal writes the last message of a stream exactly once, however many race for it', async () => {
      const l = await log();
      await l.append('s', 3, note(1));
      const racers = await Promise.all([1, 2, 3, 4].map((n) => l.appendFinal('s', 3, note(100 + n))));
      expect(racers.filter((seq) => seq !== undefined)).toEqual([2]);
      const r = await l.read('s', 3, 0);
      expect(seqs(r?.events)).toEqual([1, 2]);
      expect(r?.window.finished).toBe(true);
      // An unknown stream is registered, as appending would.
      expect(await l.appendFinal('s', 6, note(7))).toBe(1);
    });

    it('knows nothing of streams and sessions it was never told about', async () => {
      const l = await log();
      expect(await l.window('nobody', 0)).toBeUndefined();
      expect(await l.read('nobody', 0, 0)).toBeUndefined();
      await l.append('a', 0, note(1));
      expect(await l.window('a', 1)).toBeUndefined();
      expect(await l.read('a', 1, 0)).toBeUndefined();
      expect(await l.window('b', 0)).toBeUndefined();
      expect(await l.read('b', 0, 0)).toBeUndefined();
    });

    it('dropSession forgets the session and nothing else', async () => {
      const l = await log();
      await l.append('a', 0, note(1));
      await l.appendFinal('a', 1, note(2));
      await l.append('b', 0, note(3));
      await l.dropSession('a');
      expect(await l.window('a', 0)).toBeUndefined();
      expect(await l.read('a', 0, 0)).toBeUndefined();
      expect(await l.window('a', 1)).toBeUndefined();
      expect((await l.read('b', 0, 0))?.events).toEqual([{ seq: 1, message: note(3) }]);
      await l.dropSession('a');
      await l.dropSession('never');
      // A session id seen again starts from nothing.
      expect(await l.append('a', 0, note(4))).toBe(1);
    });

    it("never returns another session's events", async () => {
      const l = await log();
      for (let i = 1; i <= 3; i++) {
        await l.append('a', 0, note(i, 'a'));
        await l.append('b', 0, note(i, 'b'));
      }
      const a = await l.read('a', 0, 0);
      const b = await l.read('b', 0, 0);
      expect(a?.events.map((e) => e.message)).toEqual([1, 2, 3].map((i) => note(i, 'a')));
      expect(b?.events.map((e) => e.message)).toEqual([1, 2, 3].map((i) => note(i, 'b')));
      await l.appendFinal('a', 0, note(4, 'a'));
      expect((await l.window('b', 0))?.finished).toBe(false);
    });

    type Op =
      | { kind: 'append'; session: number; stream: number }
      | { kind: 'advance'; ms: number }
      | { kind: 'read'; session: number; stream: number; afterSeq: number }
      | { kind: 'appendFinal'; session: number; stream: number }
      | { kind: 'drop'; session: number };

    const sessionArb = fc.integer({ min: 0, max: 1 });
    const streamArb = fc.integer({ min: 0, max: 2 });
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({ kind: fc.constant('append'), session: sessionArb, stream: streamArb }),
      },
      {
        weight: 3,
        arbitrary: fc.record({ kind: fc.constant('advance'), ms: fc.integer({ min: 0, max: 40 }) }),
      },
      {
        weight: 4,
        arbitrary: fc.record({
          kind: fc.constant('read'),
          session: sessionArb,
          stream: streamArb,
          afterSeq: fc.integer({ min: 0, max: 25 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({ kind: fc.constant('appendFinal'), session: sessionArb, stream: streamArb }),
      },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('drop'), session: sessionArb }) },
    );

    test.prop(
      [
        fc.record({
          maxEventsPerStream: fc.integer({ min: 1, max: 6 }),
          retentionMs: fc.integer({ min: 0, max: 60 }),
        }),
        fc.array(opArb, { maxLength: 60 }),
      ],
      { numRuns: 200 },
    )('agrees with the retention functions on every read', async (policy, ops) => {
      clock = T0;
      const l = await make({ ...policy, now });
      try {
        // The model: every message ever appended per stream, and its window from the pure functions.
        const model = new Map<string, { window: StreamWindow; messages: JsonRpcMessage[] }>();
        const key = (session: number, stream: number): string => `${session}/${stream}`;
        const sessionId = (session: number): string => `session-${session}`;
        const expected = (session: number, stream: number, afterSeq: number) => {
          const m = model.get(key(session, stream));
          if (!m) return undefined;
          m.window = evictWindow(m.window, clock, policy);
          const events: StoredEvent[] = [];
          for (let seq = Math.max(m.window.oldest, afterSeq + 1); seq <= m.window.head; seq++) {
            events.push({ seq, message: m.messages[seq - 1] as JsonRpcMessage });
          }
          return { events, window: m.window };
        };
        let n = 0;
        for (const op of ops) {
          switch (op.kind) {
            case 'append': {
              const m = model.get(key(op.session, op.stream)) ?? { window: EMPTY_WINDOW, messages: [] };
              model.set(key(op.session, op.stream), m);
              const message = note(n++, key(op.session, op.stream));
              const next = appendToWindow(m.window, clock, policy);
              m.window = next.window;
              m.messages.push(message);
              expect(await l.append(sessionId(op.session), op.stream, message)).toBe(next.seq);
              break;
            }
            case 'advance':
              clock += op.ms;
              break;
            case 'read':
              expect(await l.read(sessionId(op.session), op.stream, op.afterSeq)).toEqual(
                expected(op.session, op.stream, op.afterSeq),
              );
              break;
            case 'appendFinal': {
              const m = model.get(key(op.session, op.stream)) ?? { window: EMPTY_WINDOW, messages: [] };
              model.set(key(op.session, op.stream), m);
              const message = note(n++, key(op.session, op.stream));
              if (m.window.finished) {
                expect(await l.appendFinal(sessionId(op.session), op.stream, message)).toBeUndefined();
                break;
              }
              const next = appendToWindow(m.window, clock, policy);
              m.window = finishWindow(next.window);
              m.messages.push(message);
              expect(await l.appendFinal(sessionId(op.session), op.stream, message)).toBe(next.seq);
              break;
            }
            case 'drop':
              for (const k of [...model.keys()]) if (k.startsWith(`${op.session}/`)) model.delete(k);
              await l.dropSession(sessionId(op.session));
              break;
          }
        }
        for (let session = 0; session <= 1; session++) {
          for (let stream = 0; stream <= 2; stream++) {
            const want = expected(session, stream, 0);
            expect(await l.window(sessionId(session), stream)).toEqual(want?.window);
            expect(await l.read(sessionId(session), stream, 0)).toEqual(want);
          }
        }
      } finally {
        await l.close();
      }
    });
  });
}
