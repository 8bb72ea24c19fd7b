import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { formatEventId, parseEventId } from '../machines/event-id.js';
import {
  answerCursor,
  appendToWindow,
  type CursorContext,
  EMPTY_WINDOW,
  evictWindow,
  finishWindow,
  RESUME_STATUS,
  type RetentionPolicy,
  retainedCount,
  type StreamWindow,
} from '../machines/server/retention.js';

const policy: RetentionPolicy = { maxEventsPerStream: 5, retentionMs: 1_000 };

function windowWith(n: number, p = policy, startAt = 0): StreamWindow {
  let w = EMPTY_WINDOW;
  for (let i = 0; i < n; i++) w = appendToWindow(w, startAt + i, p).window;
  return w;
}

const ctx = (window: StreamWindow | undefined, extra: Partial<CursorContext> = {}): CursorContext => ({
  epoch: 'abc',
  previousEpochs: ['old'],
  knownStreams: new Set([0, 1, 2]),
  window,
  ...extra,
});

describe('event ids', () => {
  test.prop([fc.stringMatching(/^[a-z0-9]{1,32}$/), fc.nat(1e6), fc.nat(Number.MAX_SAFE_INTEGER)])(
    'format and parse are inverse',
    (epoch, stream, seq) => {
      expect(parseEventId(formatEventId({ epoch, stream, seq }))).toEqual({ epoch, stream, seq });
    },
  );
  it.each(['', 'abc', 'abc-1', 'ABC-1-2', 'abc-1-2-3', 'abc--1-2', 'abc-1-99999999999999999', ' abc-1-2'])(
    'rejects %j',
    (id) => expect(parseEventId(id)).toBeUndefined(),
  );
});

describe('retained window', () => {
  it('appends with dense sequence numbers from 1', () => {
    const w = windowWith(3);
    expect([w.oldest, w.head, retainedCount(w)]).toEqual([1, 3, 3]);
  });

  it('evicts by count, oldest first', () => {
    const w = windowWith(8);
    expect([w.oldest, w.head, retainedCount(w), w.appendedAt]).toEqual([4, 8, 5, [3, 4, 5, 6, 7]]);
  });

  it('evicts by age', () => {
    const w = evictWindow(windowWith(3, policy, 0), 1_001.5, policy);
    expect([w.oldest, w.head]).toEqual([3, 3]);
    expect(evictWindow(windowWith(3), 5_000, policy)).toMatchObject({ oldest: 4, head: 3, appendedAt: [] });
  });

  test.prop([fc.array(fc.nat(500), { maxLength: 60 }), fc.integer({ min: 1, max: 10 })])(
    'never holds more than the bound, and never forgets its head',
    (gaps, max) => {
      const p = { maxEventsPerStream: max, retentionMs: 1_000 };
      let w = EMPTY_WINDOW;
      let t = 0;
      for (const g of gaps) {
        t += g;
        w = appendToWindow(w, t, p).window;
        expect(retainedCount(w)).toBeLessThanOrEqual(max);
        expect(retainedCount(w)).toBe(w.appendedAt.length);
      }
      expect(w.head).toBe(gaps.length);
    },
  );
});

describe('answerCursor', () => {
  const w = windowWith(8); // retains 4..8

  it('replays after a retained cursor', () => {
    expect(answerCursor('abc-1-6', ctx(w))).toEqual({ kind: 'replay', stream: 1, afterSeq: 6 });
    expect(answerCursor('abc-1-8', ctx(w))).toEqual({ kind: 'replay', stream: 1, afterSeq: 8 });
  });

  it('replays when the cursor is just before the oldest retained event (nothing lost)', () => {
    expect(answerCursor('abc-1-3', ctx(w))).toEqual({ kind: 'replay', stream: 1, afterSeq: 3 });
  });

  /** @spec design-note condition 3: never a silent resume at head */
  it('410 with the exact lost count when the cursor was evicted', () => {
    const a = answerCursor('abc-1-1', ctx(w));
    expect(a).toEqual({
      kind: 'gone',
      reason: 'resume_window_exceeded',
      stream: 1,
      requestedId: 'abc-1-1',
      oldestId: 'abc-1-4',
      headId: 'abc-1-8',
      lostCount: 2,
      resumeAfter: 'abc-1-3',
      streamComplete: false,
    });
    expect(RESUME_STATUS[a.kind]).toBe(410);
  });

  it('the priming cursor (seq 0) of a stream that lost its first events is a gap too', () => {
    expect(answerCursor('abc-1-0', ctx(finishWindow(w)))).toMatchObject({
      kind: 'gone',
      lostCount: 3,
      streamComplete: true,
    });
  });

  it('410 epoch_changed for a cursor into a log that was reset', () => {
    expect(answerCursor('old-1-5', ctx(w))).toMatchObject({
      kind: 'gone',
      reason: 'epoch_changed',
      lostCount: null,
    });
  });

  it('410 of unknown size for a known stream the log no longer holds (swept after ageing out)', () => {
    expect(answerCursor('abc-2-5', ctx(undefined))).toMatchObject({
      kind: 'gone',
      reason: 'resume_window_exceeded',
      lostCount: null,
      streamComplete: true,
    });
  });

  it('400 for a malformed cursor', () => {
    expect(answerCursor('garbage', ctx(w))).toEqual({
      kind: 'invalid',
      reason: 'malformed_cursor',
      requestedId: 'garbage',
    });
  });

  it('400 for a cursor from another session (unknown epoch) or stream, or past the head', () => {
    expect(answerCursor('zzz-1-5', ctx(w))).toMatchObject({ kind: 'invalid', reason: 'foreign_cursor' });
    expect(answerCursor('abc-7-5', ctx(w))).toMatchObject({ kind: 'invalid', reason: 'foreign_cursor' });
    expect(answerCursor('abc-1-9', ctx(w))).toMatchObject({ kind: 'invalid', reason: 'foreign_cursor' });
    expect(RESUME_STATUS.invalid).toBe(400);
  });

  test.prop([fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 10 }), fc.nat(40)])(
    'replay or an exact gap: replayed + lost = every event after the cursor',
    (appended, max, cursorSeq) => {
      const p = { maxEventsPerStream: max, retentionMs: 1e9 };
      const win = windowWith(appended, p);
      const seq = Math.min(cursorSeq, appended);
      const a = answerCursor(formatEventId({ epoch: 'abc', stream: 1, seq }), ctx(win));
      const after = appended - seq;
      if (a.kind === 'replay') expect(win.head - Math.max(a.afterSeq, win.oldest - 1)).toBe(after);
      else if (a.kind === 'gone') expect((a.lostCount ?? 0) + retainedCount(win)).toBe(after);
      else throw new Error(`unexpected ${a.kind}`);
    },
  );
});

describe('interruptedRequests', () => {
  it('names the request streams whose answer was never written, nothing else', async () => {
    const { interruptedRequests } = await import('../machines/server/retention.js');
    const streams = {
      0: { kind: 'standalone' },
      1: { kind: 'request', requestKey: 'n:1' },
      2: { kind: 'request', requestKey: 's:x' },
      3: { kind: 'request', requestKey: 'n:3' },
    };
    const windows: Record<number, StreamWindow | undefined> = {
      0: windowWith(2),
      1: finishWindow(windowWith(1)),
      2: windowWith(1),
      3: undefined,
    };
    expect(interruptedRequests(streams, (n) => windows[n])).toEqual([{ stream: 2, requestKey: 's:x' }]);
  });

  it('with several instances, spares the calls whose instance is alive', async () => {
    const { interruptedRequests } = await import('../machines/server/retention.js');
    const streams = {
      1: { kind: 'request', requestKey: 'n:1', owner: 'alive' },
      2: { kind: 'request', requestKey: 'n:2', owner: 'dead' },
      3: { kind: 'request', requestKey: 'n:3' },
      4: { kind: 'request', requestKey: 'n:4', owner: 'dead' },
    };
    const windows: Record<number, StreamWindow | undefined> = {
      1: windowWith(1),
      2: windowWith(1),
      3: windowWith(1),
      4: finishWindow(windowWith(2)),
    };
    // An unowned call (stored before instances were named) counts as abandoned, as after a restart.
    expect(
      interruptedRequests(
        streams,
        (n) => windows[n],
        (owner) => owner === 'alive',
      ),
    ).toEqual([
      { stream: 2, requestKey: 'n:2' },
      { stream: 3, requestKey: 'n:3' },
    ]);
  });
});

describe('lostWhileAttached', () => {
  it('is true only when events the response has not written were evicted', async () => {
    const { lostWhileAttached } = await import('../machines/server/retention.js');
    const w = (oldest: number, head: number) => ({ oldest, head, appendedAt: [], finished: false });
    expect(lostWhileAttached(w(1, 10), 4)).toBe(false); // everything after 4 is there
    expect(lostWhileAttached(w(5, 10), 4)).toBe(false); // 5 is the next to write, and it is there
    expect(lostWhileAttached(w(6, 10), 4)).toBe(true); // 5 was evicted
    expect(lostWhileAttached(w(11, 10), 10)).toBe(false); // all written, then all aged out: nothing lost
    expect(lostWhileAttached(w(12, 11), 10)).toBe(true); // 11 appended and aged out unwritten
  });
});
