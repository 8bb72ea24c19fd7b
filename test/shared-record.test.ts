import { describe, expect, it } from 'vitest';
import {
  coreOf,
  entriesToRead,
  joinSnapshot,
  mergeSnapshot,
  newEntries,
  type StreamEntry,
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
});
