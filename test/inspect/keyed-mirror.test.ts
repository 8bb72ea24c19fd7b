import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import { KeyedInspection } from '../../src/inspect/keyed-mirror.js';

/**
 * The server's keyed requests are stepped from stored entries, not run as actors: `KeyedInspection`
 * keeps a mirror `keyedRequestMachine` per key, created with XState's `inspect` option. These check that
 * the mirror lands where the memo does, including for work it never saw start.
 */
function entry(state: MemoEntry['state'], over: Partial<MemoEntry> = {}): MemoEntry {
  return {
    memoKey: '0:|k1',
    principal: '',
    fingerprint: 'f',
    state,
    owner: 'here',
    logId: 'keyed-1',
    epoch: 'e',
    createdAt: 0,
    ...over,
  };
}

function watcher() {
  const events: InspectionEvent[] = [];
  const values = () =>
    events.flatMap((e) =>
      e.type === '@xstate.snapshot'
        ? [JSON.stringify((e.snapshot as unknown as { value: unknown }).value)]
        : [],
    );
  const emitted = () =>
    events.flatMap((e) =>
      e.type === '@xstate.action' && e.action.type === 'xstate.emit'
        ? [(e.action.params as { event: { type: string; answer?: { kind: string } } }).event]
        : [],
    );
  return { events, values, emitted, inspect: (e: InspectionEvent) => events.push(e) };
}

const outcome = { kind: 'result', result: { content: [] } } as const;

describe('KeyedInspection', () => {
  it('a body that finished unwatched is committed; watched, answered; the re-issue attached in between', () => {
    for (const [watched, finished] of [
      [false, '{"finished":"committed"}'],
      [true, '{"finished":"answered"}'],
    ] as const) {
      const w = watcher();
      const mirrors = new KeyedInspection(w.inspect);
      mirrors.started(entry('running'), 1);
      mirrors.attached(entry('running'), 'n1~reissue-1', 0);
      const after = entry(watched ? 'answered' : 'committed', { outcome });
      mirrors.recorded(entry('running'), { type: 'tool.finished', outcome }, watched, after);
      expect(w.values().at(-1)).toBe(finished);
      expect(w.emitted().map((e) => e.type)).toContain('keyed.start');
      expect(w.emitted().find((e) => e.type === 'keyed.answer')?.answer?.kind).toBe('attach');
      // One mirror for the key throughout: registered once.
      expect(w.events.filter((e) => e.type === '@xstate.actor')).toHaveLength(1);
    }
  });

  it('work it never saw start is restored from the stored entry, and answers from there', () => {
    const w = watcher();
    const mirrors = new KeyedInspection(w.inspect);
    mirrors.attached(entry('answered', { outcome }), 'n1~reissue-2', 3);
    expect(w.values()[0]).toBe('{"finished":"answered"}');
    // Restored, not started: no body, and the re-issue gets the recorded outcome.
    expect(w.emitted().map((e) => e.type)).toEqual(['keyed.answer']);
    expect(w.emitted()[0]?.answer?.kind).toBe('recorded');
  });

  it('a mirror out of step with the memo (moved on elsewhere) is restored; a capped number are kept', () => {
    const w = watcher();
    const mirrors = new KeyedInspection(w.inspect, 2);
    mirrors.started(entry('running'), 1);
    // Another instance recorded the outcome: this mirror still runs, so the attach restores it first.
    mirrors.attached(entry('committed', { outcome }), 'n1~reissue-1', 0);
    expect(w.events.filter((e) => e.type === '@xstate.actor')).toHaveLength(2);
    // Restored as committed, then the re-issue took the recorded outcome: answered, as the machine says.
    expect(w.values()).toContain('{"finished":"committed"}');
    expect(w.values().at(-1)).toBe('{"finished":"answered"}');
    for (const key of ['k2', 'k3']) mirrors.started(entry('running', { memoKey: `0:|${key}` }), key);
    const stopped = w.events.filter(
      (e) => e.type === '@xstate.snapshot' && (e.snapshot as { status: string }).status === 'stopped',
    );
    // The out-of-step mirror, then the oldest beyond the cap of two.
    expect(stopped).toHaveLength(2);
  });
});
