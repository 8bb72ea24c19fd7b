import { describe, expect, it } from 'vitest';
import { createActor, createMachine } from 'xstate';
import type { PageMessage } from '../../src/inspect/wire.js';
import { encode } from '../../src/trace/codec.js';
import type { TraceRecord } from '../../src/trace/record.js';
import { pageAsOf, scrubTrace } from '../../src/trace/scrub.js';

/**
 * The scrubber's decision, "the machines as of stop N", on a trace written by hand: a door machine whose
 * `open` event reports a gap (a marker action), with a child `lock` actor. Each row: the stop, the states
 * the page is told, the markers it holds.
 */
const door = createMachine({
  id: 'door',
  initial: 'closed',
  states: {
    closed: {
      on: {
        open: { target: 'opened', actions: { type: 'notifyGap', params: { streamKey: 's1', lostCount: 2 } } },
      },
    },
    opened: { on: { close: 'closed', slam: 'gone' } },
    gone: { type: 'final' },
  },
});
const lock = createMachine({
  id: 'lock',
  initial: 'locked',
  states: { locked: { on: { turn: 'unlocked' } }, unlocked: {} },
});
const machines = new Map([
  ['door', door],
  ['lock', lock],
]);
const startOf = (m: typeof door | typeof lock) => encode(createActor(m).start().getPersistedSnapshot());

const records: TraceRecord[] = [
  { k: 'actor', t: 0, a: 'x:0', machine: 'door', id: 'x:0' },
  { k: 'start', t: 0, a: 'x:0', snapshot: startOf(door) },
  { k: 'state', t: 0, a: 'x:0', value: 'closed', status: 'active', after: 'xstate.init' },
  { k: 'actor', t: 5, a: 'x:1', machine: 'lock', id: 'lock-1', parent: 'x:0' },
  { k: 'start', t: 5, a: 'x:1', snapshot: startOf(lock) },
  { k: 'event', t: 10, a: 'x:0', e: { type: 'open' } },
  { k: 'state', t: 10, a: 'x:0', value: 'opened', status: 'active', after: 'open' },
  { k: 'event', t: 15, a: 'x:0', e: { type: 'sse.activity' } }, // bytes arriving: no stop of its own
  { k: 'event', t: 20, a: 'x:1', from: 'x:0', e: { type: 'turn' } },
  { k: 'state', t: 20, a: 'x:1', value: 'unlocked', status: 'active', after: 'turn' },
  { k: 'event', t: 30, a: 'x:0', e: { type: 'slam' } },
  { k: 'state', t: 30, a: 'x:0', value: 'gone', status: 'done', after: 'slam' },
  // A machine this build does not have: left out of the page, not fatal.
  { k: 'actor', t: 31, a: 'x:9', machine: 'window', id: 'x:9' },
  { k: 'start', t: 31, a: 'x:9', snapshot: {} },
];

/** What the page would show: each actor's machine, state and status, by trace actor id; and the markers. */
function shown(messages: PageMessage[]) {
  const states: Record<string, string> = {};
  const parents: Record<string, string | undefined> = {};
  for (const m of messages)
    if (m.kind === 'actor') {
      const id = m.id.split('/')[1] as string;
      states[id] =
        `${m.machine}:${String(m.snapshot.value)}${m.snapshot.status === 'active' ? '' : ` (${m.snapshot.status})`}`;
      parents[id] = m.parentId?.split('/')[1];
    }
  const markers = messages.filter((m) => m.kind === 'marker').length;
  return { states, parents, markers, reset: messages[0]?.kind === 'reset' };
}

describe('the scrubber: the machines as of a stop, re-driven through the machines given', () => {
  const scrubbed = scrubTrace(records, machines);

  it('stops at each start and each event but bytes arriving, in trace order, labelled', () => {
    expect(scrubbed.stops.map((s) => s.label)).toEqual([
      '0.000 s  x:0  started',
      '0.005 s  lock-1  started',
      '0.010 s  x:0  open',
      '0.020 s  lock-1  turn',
      '0.030 s  x:0  slam',
    ]);
  });

  it.each([
    [0, { 'x:0': 'door:closed' }, 0],
    [1, { 'x:0': 'door:closed', 'x:1': 'lock:locked' }, 0],
    [2, { 'x:0': 'door:opened', 'x:1': 'lock:locked' }, 1],
    [3, { 'x:0': 'door:opened', 'x:1': 'lock:unlocked' }, 1],
    [4, { 'x:0': 'door:gone (done)', 'x:1': 'lock:unlocked' }, 1],
    // Past the end: the last stop. Before the start: the first.
    [99, { 'x:0': 'door:gone (done)', 'x:1': 'lock:unlocked' }, 1],
    [-3, { 'x:0': 'door:closed' }, 0],
  ])('as of stop %i: states %o, %i marker(s)', (stop, states, markers) => {
    const page = shown(pageAsOf(scrubbed, stop));
    expect(page.reset).toBe(true);
    expect(page.states).toEqual(states);
    expect(page.markers).toBe(markers);
  });

  it("keeps a child under its parent, and the page's time is the trace's", () => {
    const messages = pageAsOf(scrubbed, 3);
    expect(shown(messages).parents['x:1']).toBe('x:0');
    const timeline = messages.flatMap((m) => (m.kind === 'timeline' ? [m.entry.at] : []));
    expect(timeline).toContain(10);
    expect(Math.max(...timeline)).toBe(20);
  });

  it("shows today's machine, not the recorded states: a door that no longer opens stays closed", () => {
    const stuck = createMachine({
      id: 'door',
      initial: 'closed',
      states: { closed: {}, opened: {}, gone: {} },
    });
    const today = scrubTrace(records, new Map([...machines, ['door', stuck]]));
    expect(shown(pageAsOf(today, 4)).states['x:0']).toBe('door:closed');
  });

  it('a trace with no machine this build has: no stops, an empty page', () => {
    const none = scrubTrace(records, new Map());
    expect(none.stops).toEqual([]);
    expect(shown(pageAsOf(none, 0)).states).toEqual({});
  });
});
