import { describe, expect, it } from 'vitest';
import type { AnyStateMachine, AnyStateNode } from 'xstate';
import { machineCatalog } from '../../machines/catalog.js';
import { streamMachine } from '../../machines/client/stream.machine.js';
import { serverSessionMachine } from '../../machines/server/session.machine.js';
import { activePaths, chartOf, stateText } from '../../src/inspect/chart.js';
import { compact, DEFINITION_LIMITS } from '../../src/inspect/compact.js';
import type { ChartNode } from '../../src/inspect/wire.js';

/** The inspector draws each machine from its definition: every state of it, nothing made up. */
const statePaths = (node: AnyStateNode): string[] =>
  Object.values(node.states).flatMap((child) => [child.path.join('.'), ...statePaths(child)]);
const chartPaths = (node: ChartNode): string[] => node.states.flatMap((c) => [c.path, ...chartPaths(c)]);
const find = (node: ChartNode, path: string): ChartNode | undefined =>
  node.path === path ? node : node.states.map((c) => find(c, path)).find(Boolean);
/** What the feed sends: the config, compacted and through JSON. */
const overTheWire = (m: AnyStateMachine) => JSON.parse(JSON.stringify(compact(m.config, DEFINITION_LIMITS)));

describe('statecharts from machine definitions', () => {
  it.each(Object.entries(machineCatalog))(
    '%s: every state node, in definition order, after the wire',
    (_, m) => {
      const chart = chartOf(overTheWire(m));
      expect(chartPaths(chart)).toEqual(statePaths(m.root));
      expect(chart.key).toBe(m.id);
    },
  );

  it('the client stream: compound connecting with its initial child, backoff timed, end states reusable', () => {
    const chart = chartOf(overTheWire(streamMachine));
    const connecting = find(chart, 'connecting');
    expect(connecting).toMatchObject({
      type: 'compound',
      initial: 'awaitingResponse',
      invokes: ['exchange'],
    });
    expect(find(chart, 'backoff')?.transitions).toEqual([
      { event: 'after(reconnectDelay)', target: 'connecting' },
    ]);
    // End states are not final: the session starts an ended stream's actor again for a later stream.
    expect(find(chart, 'done')?.type).toBe('atomic');
    expect(find(chart, 'done')?.transitions).toEqual([
      { event: 'stream.reuse', target: '#stream.connecting' },
    ]);
    expect(find(chart, 'deciding')?.transitions).toContainEqual({
      event: 'always',
      target: 'backoff',
      guard: 'mayReconnect',
    });
    // Bytes that are not an event still restart the stall timer: a drawn self-transition.
    expect(find(chart, 'connecting.streaming')?.transitions).toContainEqual(
      expect.objectContaining({ event: 'sse.retry', target: expect.stringContaining('streaming') }),
    );
  });

  it('the server session: guarded and timed transitions keep their names', () => {
    const chart = chartOf(overTheWire(serverSessionMachine));
    expect(find(chart, 'live.idle')?.transitions).toContainEqual(
      expect.objectContaining({ event: 'after(idleTtl)' }),
    );
    expect(chart.states.map((s) => s.key)).toEqual(['live', 'ended']);
    // Targetless transitions only run actions: not drawn.
    expect(find(chart, 'live')?.transitions.some((t) => t.event === 'standalone.used')).toBe(false);
  });

  it('active paths and the state shown for a snapshot value', () => {
    expect(activePaths({ connecting: 'streaming' })).toEqual(['connecting', 'connecting.streaming']);
    expect(stateText({ connecting: 'streaming' })).toBe('connecting.streaming');
    expect(stateText('backoff')).toBe('backoff');
    expect(stateText({ a: { b: 'c' }, d: 'e' })).toBe('a.b.c,d.e');
    expect(stateText(undefined)).toBe('');
  });

  it('a malformed definition gives an empty chart, not an exception', () => {
    expect(chartOf(null).states).toEqual([]);
    expect(
      chartOf({ states: { a: 5, b: { on: { go: [{ target: 7 }, 'a'] } } } }).states[1]?.transitions,
    ).toEqual([{ event: 'go', target: 'a' }]);
  });
});
