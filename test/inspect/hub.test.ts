import { describe, expect, it } from 'vitest';
import { modernCallMachine } from '../../machines/client/modern-call.machine.js';
import { streamMachine } from '../../machines/client/stream.machine.js';
import { compact, DEFINITION_LIMITS } from '../../src/inspect/compact.js';
import { InspectionHub } from '../../src/inspect/hub.js';
import type { PageMessage } from '../../src/inspect/wire.js';

/** The inspector server's memory: what it fans out for each feed message, and what a late page is told. */
const streamDefinition = JSON.stringify(compact(streamMachine.config, DEFINITION_LIMITS));
const clientDefinition = JSON.stringify({
  id: 'client',
  initial: 'active',
  states: { active: {}, closed: {} },
});

const actor = (
  sessionId: string,
  definition = streamDefinition,
  context: object = { stream: { key: 'standalone' } },
) => ({
  type: '@xstate.actor',
  sessionId,
  rootId: 'x:0',
  parentId: sessionId === 'x:0' ? undefined : 'x:0',
  definition,
  snapshot: { value: { connecting: 'awaitingResponse' }, status: 'active', context },
});
const snapshot = (
  sessionId: string,
  value: unknown,
  context: object = { stream: { key: 'standalone' } },
) => ({
  type: '@xstate.snapshot',
  sessionId,
  snapshot: { value, status: 'active', context },
});
const kinds = (ms: PageMessage[]) => ms.map((m) => m.kind);

describe('InspectionHub', () => {
  it('namespaces actor ids by feed: two processes both have an x:1', () => {
    const hub = new InspectionHub();
    const a = hub.openFeed('a').feed;
    const b = hub.openFeed('b').feed;
    hub.ingest(a, actor('x:1'));
    hub.ingest(b, actor('x:1'));
    const ids = hub.replay().flatMap((m) => (m.kind === 'actor' ? [m.id] : []));
    expect(ids).toEqual([`${a}/x:1`, `${b}/x:1`]);
    const first = hub.replay().find((m) => m.kind === 'actor');
    expect(first).toMatchObject({ parentId: `${a}/x:0`, rootId: `${a}/x:0`, machine: 'stream' });
  });

  it('a state change becomes a transition in the timeline; the snapshot goes out as it is', () => {
    const hub = new InspectionHub();
    const { feed } = hub.openFeed('f');
    hub.ingest(feed, actor('x:1'));
    hub.ingest(feed, snapshot('x:1', { connecting: 'streaming' }));
    const out = hub.ingest(feed, snapshot('x:1', 'backoff'));
    expect(kinds(out)).toEqual(['snapshot', 'timeline']);
    expect(out[1]).toMatchObject({
      entry: { kind: 'transition', text: 'connecting.streaming → backoff', label: 'stream standalone' },
    });
    // The same state again: no timeline line.
    expect(kinds(hub.ingest(feed, snapshot('x:1', 'backoff')))).toEqual(['snapshot']);
  });

  it('our feed: gap and outcome-unknown markers from the actions, once each', () => {
    const hub = new InspectionHub();
    const { feed } = hub.openFeed('f');
    hub.ingest(feed, { type: 'mcpc.hello', name: 'demo' });
    hub.ingest(feed, actor('x:0', clientDefinition, {}));
    const gap = {
      reason: 'resume_window_exceeded',
      lostCount: 198,
      requestedId: 'e-3-3',
      oldestId: 'e-3-202',
    };
    // The event that carries the gap comes first; with actions on the feed, it does not make the marker.
    expect(
      kinds(
        hub.ingest(feed, {
          type: '@xstate.event',
          sessionId: 'x:0',
          event: { type: 'stream.gap', key: 'n:2', gap },
        }),
      ),
    ).toEqual(['timeline']);
    const action = {
      type: '@xstate.action',
      sessionId: 'x:0',
      action: { type: 'notifyGap', params: { ...gap, streamKey: 'n:2' } },
    };
    const marked = hub.ingest(feed, action);
    expect(marked[0]).toMatchObject({
      kind: 'marker',
      marker: { kind: 'gap', key: 'n:2', lostCount: 198, actorId: `${feed}/x:0` },
      text: 'gap on n:2: 198 events lost (resume_window_exceeded), after e-3-3, before e-3-202',
    });
    expect(hub.ingest(feed, action)).toEqual([]);
    const unknown = hub.ingest(feed, {
      type: '@xstate.action',
      sessionId: 'x:0',
      action: {
        type: 'deliver',
        params: {
          message: {
            jsonrpc: '2.0',
            id: 7,
            error: { code: -32050, message: '', data: { reason: 'session_lost' } },
          },
        },
      },
    });
    expect(unknown[0]).toMatchObject({
      marker: { kind: 'outcome-unknown', key: 'n:7', reason: 'session_lost' },
    });
    expect(unknown[0]).not.toHaveProperty('marker.inferred');
  });

  it('a feed without actions (@statelyai/inspect): markers from events, outcome unknown flagged inferred', () => {
    const hub = new InspectionHub();
    const { feed } = hub.openFeed('stately');
    hub.ingest(feed, actor('x:0', clientDefinition, {}));
    const gap = hub.ingest(feed, {
      type: '@xstate.event',
      sessionId: 'x:0',
      event: { type: 'stream.gap', key: 'standalone', gap: { reason: 'epoch_changed', lostCount: null } },
    });
    expect(gap.find((m) => m.kind === 'marker')).toMatchObject({ marker: { kind: 'gap', lostCount: null } });
    const ended = hub.ingest(feed, {
      type: '@xstate.event',
      sessionId: 'x:0',
      event: { type: 'stream.ended', key: 'n:3', outcome: { kind: 'given-up', reason: 'reset' } },
    });
    expect(ended.find((m) => m.kind === 'marker')).toMatchObject({
      marker: { kind: 'outcome-unknown', key: 'n:3', inferred: true },
    });
    // A stream that ended normally, or a standalone one, is no unknown call.
    const done = hub.ingest(feed, {
      type: '@xstate.event',
      sessionId: 'x:0',
      event: { type: 'stream.ended', key: 'standalone', outcome: { kind: 'given-up' } },
    });
    expect(kinds(done)).toEqual(['timeline']);
  });

  it('the window a resume saw is kept per server stream', () => {
    const hub = new InspectionHub();
    const { feed } = hub.openFeed('f');
    hub.ingest(
      feed,
      actor('x:5', JSON.stringify({ id: 'serverSession', initial: 'live', states: { live: {} } }), {}),
    );
    const out = hub.ingest(feed, {
      type: '@xstate.event',
      sessionId: 'x:5',
      event: {
        type: 'resume.requested',
        lastEventId: 'abc-3-3',
        window: { oldest: 202, head: 301, appendedAt: [], finished: true },
      },
    });
    const window = { stream: 3, oldest: 202, head: 301, finished: true, requestedSeq: 3 };
    expect(out.find((m) => m.kind === 'window')).toMatchObject({ id: `${feed}/x:5`, window });
    expect(hub.replay().find((m) => m.kind === 'window')).toMatchObject({ window });
  });

  it('a late page gets everything it needs, snapshots at their latest', () => {
    const hub = new InspectionHub();
    const { feed } = hub.openFeed('f');
    hub.ingest(feed, actor('x:1'));
    hub.ingest(feed, snapshot('x:1', 'backoff'));
    hub.ingest(feed, { type: 'mcpc.figures', figures: { 'mcp_continuity.client.gaps': 1, bad: 'x' } });
    const replay = hub.replay();
    expect(kinds(replay)).toEqual(['reset', 'feed', 'actor', 'timeline', 'figures']);
    expect(replay[2]).toMatchObject({ snapshot: { value: 'backoff' } });
    expect(replay[4]).toMatchObject({ figures: { 'mcp_continuity.client.gaps': 1 } });
    expect(replay[4]).not.toHaveProperty('figures.bad');
  });

  it('ignores what it cannot read, and throws on none of it', () => {
    const hub = new InspectionHub();
    const { feed } = hub.openFeed('f');
    const garbage: unknown[] = [
      null,
      42,
      'text',
      [],
      { type: 5 },
      { type: '@xstate.actor', sessionId: 'x:1', definition: 'not json' },
      { type: '@xstate.actor', sessionId: { no: 1 }, definition: streamDefinition },
      { type: '@xstate.actor', sessionId: 'x'.repeat(500), definition: streamDefinition },
      { type: '@xstate.actor', sessionId: 'x:2', definition: JSON.stringify({ id: 'exchange' }) },
      { type: '@xstate.snapshot', sessionId: 'x:99', snapshot: {} },
      { type: '@xstate.event', sessionId: 'x:99', event: { type: 'a' } },
      { type: '@xstate.action', sessionId: 'x:99', action: null },
      { type: 'mcpc.hello', name: 7 },
      { type: 'mcpc.figures', figures: null },
      { type: 'something.else' },
    ];
    for (const g of garbage) expect(() => hub.ingest(feed, g)).not.toThrow();
    expect(hub.replay().filter((m) => m.kind === 'actor')).toEqual([]);
    expect(hub.ingest('f404', actor('x:1'))).toEqual([]);
  });

  it('stays bounded: finished actors go first, the timeline keeps its newest lines', () => {
    const hub = new InspectionHub({ actors: 3, timeline: 5 });
    const { feed } = hub.openFeed('f');
    hub.ingest(feed, actor('x:1'));
    hub.ingest(feed, {
      ...snapshot('x:1', 'done'),
      snapshot: { value: 'done', status: 'done', context: {} },
    });
    for (const id of ['x:2', 'x:3', 'x:4']) hub.ingest(feed, actor(id));
    const ids = hub.replay().flatMap((m) => (m.kind === 'actor' ? [m.id.split('/')[1]] : []));
    expect(ids).toEqual(['x:2', 'x:3', 'x:4']);
    for (let i = 0; i < 20; i++) hub.ingest(feed, snapshot('x:2', i % 2 ? 'backoff' : 'done'));
    expect(hub.replay().filter((m) => m.kind === 'timeline')).toHaveLength(5);
  });
});

describe('InspectionHub, 2026-07-28 views', () => {
  const callDefinition = JSON.stringify(compact(modernCallMachine.config, DEFINITION_LIMITS));
  const request = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'charge' } };
  const context = (attempts: number, extra: object = {}) => ({
    request,
    attempts,
    current: { ...request, id: attempts === 0 ? 7 : `n7~reissue-${attempts}` },
    ...extra,
  });
  const snap = (value: unknown, ctx: object, status = 'active') => ({
    type: '@xstate.snapshot',
    sessionId: 'x:0',
    snapshot: { value, status, context: ctx },
  });
  const latest = (out: PageMessage[][]) =>
    out
      .flat()
      .flatMap((m) => (m.kind === 'modern' ? [m.view] : []))
      .at(-1);

  it('a call: attempts with their status, bytes (measured here without a feed count), end and decision', () => {
    const hub = new InspectionHub();
    const { feed } = hub.openFeed('stately'); // no hello: a feed without our extras
    const out: PageMessage[][] = [];
    const ingest = (m: unknown) => out.push(hub.ingest(feed, m));
    ingest({ type: '@xstate.actor', sessionId: 'x:0', rootId: 'x:0', definition: callDefinition });
    ingest(snap({ attempting: 'live' }, context(0)));
    const progress = { jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } };
    ingest({ type: '@xstate.event', sessionId: 'x:0', event: { type: 'attempt.activity', at: 1 } });
    ingest({
      type: '@xstate.event',
      sessionId: 'x:0',
      event: { type: 'attempt.message', at: 2, message: progress },
    });
    const end = { kind: 'http-status', status: 503 };
    const decision = { action: 'backoff-reissue', reason: 'unavailable', delayMs: 100 };
    ingest(snap('waiting', context(0, { end, decision })));
    ingest(snap({ attempting: 'live' }, context(1)));
    ingest(
      snap(
        'failed',
        context(1, { end: { kind: 'refused' }, decision: { action: 'fail', reason: 'unreachable' } }),
        'done',
      ),
    );
    expect(latest(out)).toEqual({
      kind: 'call',
      requestId: '7',
      tool: 'charge',
      attempts: [
        {
          n: 0,
          id: '7',
          status: 503,
          messages: 1,
          bytes: JSON.stringify(progress).length,
          end: 'HTTP 503',
          decision: 'backoff-reissue',
          reason: 'unavailable',
          delayMs: 100,
        },
        // Refused before any byte: no status.
        {
          n: 1,
          id: 'n7~reissue-1',
          messages: 0,
          bytes: 0,
          end: 'refused',
          decision: 'fail',
          reason: 'unreachable',
        },
      ],
      outcome: 'failed',
      reason: 'unreachable',
    });
    // The attempt's byte-level chatter stays out of the default timeline.
    const lines = out.flat().flatMap((m) => (m.kind === 'timeline' ? [m.entry] : []));
    expect(lines.find((e) => e.text.startsWith('attempt.message'))?.chatter).toBe(true);
  });

  it('an extension 410 reported by the call is a gap marker; the same view twice is sent once', () => {
    const hub = new InspectionHub();
    const { feed } = hub.openFeed('f');
    hub.ingest(feed, { type: 'mcpc.hello', name: 'ours' });
    hub.ingest(feed, { type: '@xstate.actor', sessionId: 'x:0', rootId: 'x:0', definition: callDefinition });
    expect(hub.ingest(feed, snap({ attempting: 'live' }, context(0))).map((m) => m.kind)).toEqual([
      'snapshot',
      'modern',
      'timeline',
    ]);
    expect(hub.ingest(feed, snap({ attempting: 'live' }, context(0))).map((m) => m.kind)).toEqual([
      'snapshot',
    ]);
    const gap = { reason: 'resume_window_exceeded', lostCount: 4, requestedId: 'e-1-2' };
    const marked = hub.ingest(feed, {
      type: '@xstate.action',
      sessionId: 'x:0',
      action: { type: 'reportGap', params: { gap } },
    });
    expect(marked[0]).toMatchObject({ kind: 'marker', marker: { kind: 'gap', key: 'call', lostCount: 4 } });
  });
});
