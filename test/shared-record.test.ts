import { describe, expect, it } from 'vitest';
import {
  coreOf,
  entriesToRead,
  joinSnapshot,
  mergeSnapshot,
  newEntries,
  numberedCore,
  REBASE_SPAN,
  type RebaseAsk,
  type RebaseStored,
  rebaseAdmissions,
  type StreamEntry,
  settledFacts,
  unrunRebased,
  watermarkOf,
} from '../machines/server/shared-record.js';

/** A snapshot shaped as the session machine persists it, with `n` request streams numbered from 1. */
function snapshot(n: number, options: { standalone?: boolean; owner?: string; from?: number } = {}) {
  const streams: Record<number, StreamEntry> = {};
  const requests: Record<string, number> = {};
  if (options.standalone) streams[0] = { kind: 'standalone' };
  const from = options.from ?? 1;
  for (let s = 1; s < from + n; s++) {
    const requestKey = `n:${s}`;
    streams[s] = { kind: 'request', requestKey, owner: options.owner ?? 'a' };
    requests[requestKey] = s;
  }
  return {
    status: 'active',
    value: { live: 'idle' },
    context: { nextStream: from + n, streams, requests, epoch: 'e', running: {} },
  };
}

const req = (s: number, owner = 'a'): [number, StreamEntry] => [
  s,
  { kind: 'request', requestKey: `n:${s}`, owner },
];

describe('the shared record layout (machines/server/shared-record.ts)', () => {
  it('the core holds no per-stream memory: its size does not grow with the session', () => {
    const small = JSON.stringify(coreOf(snapshot(3))).length;
    const large = JSON.stringify(coreOf(snapshot(10_000))).length;
    // Only the digits of nextStream differ.
    expect(large - small).toBeLessThanOrEqual(4);
    expect(coreOf(snapshot(3))).toMatchObject({ context: { streams: {}, requests: {}, nextStream: 4 } });
  });

  it('a decision writes only the streams it numbered, and the standalone stream when it is new', () => {
    const base = watermarkOf(snapshot(5));
    expect(base).toEqual({ nextStream: 6, standalone: false, forgottenBelow: 1 });
    expect(newEntries(base, snapshot(5))).toEqual([]);
    expect(newEntries(base, snapshot(7))).toEqual([req(6), req(7)]);
    expect(newEntries(base, snapshot(6, { standalone: true }))).toEqual([
      [0, { kind: 'standalone' }],
      req(6),
    ]);
    expect(newEntries({ nextStream: 7, standalone: true }, snapshot(6, { standalone: true }))).toEqual([]);
  });

  it('a snapshot that is not the base plus new streams is rewritten whole', () => {
    // Numbering went back (a log reset), or the standalone stream went away.
    expect(newEntries({ nextStream: 9, standalone: false }, snapshot(3))).toBeUndefined();
    expect(newEntries({ nextStream: 4, standalone: true }, snapshot(3))).toBeUndefined();
  });

  it('a copy catching up reads only what was numbered since its base', () => {
    expect(entriesToRead({ nextStream: 4, standalone: false }, { nextStream: 7, standalone: false })).toEqual(
      [4, 5, 6],
    );
    expect(entriesToRead({ nextStream: 4, standalone: false }, { nextStream: 4, standalone: true })).toEqual([
      0,
    ]);
    expect(entriesToRead({ nextStream: 7, standalone: true }, { nextStream: 7, standalone: true })).toEqual(
      [],
    );
    // A fresh copy (numbering at 0): every stream.
    expect(entriesToRead({ nextStream: 0, standalone: false }, { nextStream: 3, standalone: false })).toEqual(
      [1, 2],
    );
  });

  it('join rebuilds the request-id memory from the stream entries', () => {
    const whole = snapshot(4, { standalone: true });
    const entries = Object.entries(whole.context.streams).map(([n, e]) => [Number(n), e] as const);
    expect(joinSnapshot(coreOf(whole), entries)).toEqual(whole);
  });

  it('a loser drops what it numbered in the discarded decision, and takes the winner’s streams', () => {
    // Both copies were at 3 streams. The winner (b) numbered 4 and 5 and opened the standalone stream;
    // the loser (a) numbered 4 for another request, which it must forget: 4 is b's.
    const base = watermarkOf(snapshot(3));
    const loser = snapshot(3);
    loser.context.streams[4] = { kind: 'request', requestKey: 'n:lost', owner: 'a' };
    loser.context.requests['n:lost'] = 4;
    loser.context.nextStream = 5;
    const winner = snapshot(2, { from: 4, owner: 'b', standalone: true });
    const stored = watermarkOf(winner);
    const read = entriesToRead(base, stored).map(
      (n) => [n, winner.context.streams[n] as StreamEntry] as const,
    );
    const merged = mergeSnapshot(loser, base, coreOf(winner), read) as ReturnType<typeof snapshot>;
    expect(merged.context.nextStream).toBe(6);
    expect(merged.context.requests['n:lost']).toBeUndefined();
    expect(merged.context.streams[4]).toEqual({ kind: 'request', requestKey: 'n:4', owner: 'b' });
    expect(merged.context.streams[0]).toEqual({ kind: 'standalone' });
    expect(Object.keys(merged.context.requests).sort()).toEqual(['n:1', 'n:2', 'n:3', 'n:4', 'n:5']);
    // What the loser held is not touched: the merge builds new maps.
    expect(loser.context.requests['n:lost']).toBe(4);
  });

  it('streams behind the stored forget point are dropped on a join and on a catch-up', () => {
    const whole = snapshot(5, { standalone: true });
    const entries = Object.entries(whole.context.streams).map(([n, e]) => [Number(n), e] as const);
    const core = coreOf({ ...whole, context: { ...whole.context, forgottenBelow: 4 } });
    const joined = joinSnapshot(core, entries) as ReturnType<typeof snapshot>;
    expect(Object.keys(joined.context.streams).map(Number)).toEqual([0, 4, 5]);
    expect(Object.keys(joined.context.requests).sort()).toEqual(['n:4', 'n:5']);
    // A copy at 3 streams catches up with a winner whose point passed 1..3: they go from the copy too.
    const merged = mergeSnapshot(snapshot(3), watermarkOf(snapshot(3)), core, [req(4), req(5)]) as ReturnType<
      typeof snapshot
    >;
    expect(Object.keys(merged.context.requests).sort()).toEqual(['n:4', 'n:5']);
  });

  describe('admissions commute: a decision that only admitted requests is rebased, not refused', () => {
    // Both instances were at 3 streams. b admitted n:4 and n:5 (stored as 4, 5); a admitted x (its 4).
    const base = watermarkOf(snapshot(3));
    const mine: [number, StreamEntry] = [4, { kind: 'request', requestKey: 'x', owner: 'a' }];
    const ask: RebaseAsk = {
      base,
      entries: [mine],
      watermark: { nextStream: 5, standalone: false, forgottenBelow: 1 },
      facts: settledFacts(snapshot(3)),
      capacity: 10,
    };
    const stored: RebaseStored = {
      numbering: { nextStream: 6, forgottenBelow: 1 },
      standalone: false,
      facts: settledFacts(snapshot(5)),
      since: [req(4, 'b'), req(5, 'b')],
    };

    it('numbers its streams after the stored ones and moves the forget point with them', () => {
      expect(rebaseAdmissions(ask, stored)).toEqual({
        entries: [[6, mine[1]]],
        numbering: { nextStream: 7, forgottenBelow: 1 },
      });
      // With room for 4 streams the point follows the new numbering, never the decider's old one.
      expect(rebaseAdmissions({ ...ask, capacity: 4 }, stored)?.numbering).toEqual({
        nextStream: 7,
        forgottenBelow: 3,
      });
    });

    it('refuses (a plain conflict) when the same request was admitted meanwhile: decided again, a duplicate', () => {
      const same: [number, StreamEntry] = [4, { kind: 'request', requestKey: 'n:5', owner: 'a' }];
      expect(rebaseAdmissions({ ...ask, entries: [same] }, stored)).toBeUndefined();
    });

    it('refuses when anything but admissions changed on either side, or too much was numbered since', () => {
      const ended = settledFacts({ ...snapshot(5), value: { ended: 'terminated' } });
      expect(ended).not.toBe(ask.facts);
      expect(rebaseAdmissions(ask, { ...stored, facts: ended })).toBeUndefined();
      expect(rebaseAdmissions({ ...ask, facts: ended }, stored)).toBeUndefined();
      // A record stored whole (no settled facts beside it).
      expect(rebaseAdmissions(ask, { ...stored, facts: undefined })).toBeUndefined();
      // The standalone stream registered on either side.
      expect(rebaseAdmissions(ask, { ...stored, standalone: true })).toBeUndefined();
      expect(
        rebaseAdmissions(
          {
            ...ask,
            entries: [[0, { kind: 'standalone' }], mine],
            watermark: { ...ask.watermark, standalone: true },
          },
          stored,
        ),
      ).toBeUndefined();
      // Numbering went back (a reset), or ran far ahead.
      expect(
        rebaseAdmissions(ask, { ...stored, numbering: { nextStream: 2, forgottenBelow: 1 } }),
      ).toBeUndefined();
      const far = { nextStream: 4 + REBASE_SPAN + 1, forgottenBelow: 1 };
      expect(rebaseAdmissions(ask, { ...stored, numbering: far })).toBeUndefined();
    });

    it('a rebased core gets the store’s numbering back on load; a current one is returned as it is', () => {
      const core = coreOf(snapshot(3));
      expect(numberedCore(core, { nextStream: 4, forgottenBelow: 1 })).toBe(core);
      expect(numberedCore(core, { nextStream: 7, forgottenBelow: 2 })).toMatchObject({
        context: { nextStream: 7, forgottenBelow: 2, streams: {}, requests: {} },
      });
    });
  });

  it('a rebase not made again as written: every request the store admitted gets a definite "not run" answer', () => {
    // The store wrote the decision's two requests at 7 and 8; nothing runs them (the decision is
    // discarded), so deciding again would attach their clients to streams nobody answers.
    const written: Array<[number, StreamEntry]> = [
      [7, { kind: 'request', requestKey: 'n:41', owner: 'a' }],
      [8, { kind: 'request', requestKey: 's:x', owner: 'a' }],
    ];
    const answers = unrunRebased(written);
    expect(answers.map((a) => a.stream)).toEqual([7, 8]);
    expect(answers.map((a) => (a.answer as { id: unknown }).id)).toEqual([41, 'x']);
    for (const { answer } of answers) {
      // A definite error (it did not run), not outcome unknown: the client may send it again.
      expect(answer).toMatchObject({ jsonrpc: '2.0', error: { code: -32603, data: { reason: 'not_run' } } });
    }
    expect(unrunRebased([[0, { kind: 'standalone' }]])).toEqual([]);
  });
});
