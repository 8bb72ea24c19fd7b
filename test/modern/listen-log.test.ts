import { describe, expect, it } from 'vitest';
import {
  CLIENT_CAPABILITIES_META_KEY,
  CONTINUITY_EXTENSION,
  ListenMeta,
  readListenMissed,
} from '../../machines/continuity-extension.js';
import type { JsonRpcMessage, JsonRpcNotification } from '../../machines/jsonrpc.js';
import { ACKNOWLEDGED_METHOD, SUBSCRIPTION_ID_META_KEY } from '../../machines/listen-wire.js';
import {
  changeAccepted,
  createListenLog,
  DEFAULT_LISTEN_LOG_LIMITS,
  expireChanges,
  type ListenLogLimits,
  listenAttemptOf,
  listenLogLimits,
  missedSince,
  positionedAck,
  positionedParams,
  positionOf,
  publishChange,
  recordChange,
  relistItemOf,
  seqOf,
  streamSubscribed,
} from '../../machines/server/listen-log.js';

/** The listen log's decisions (machines/server/listen-log.ts), row by row. */

const BIG: ListenLogLimits = { retentionMs: 60_000, maxChanges: 100 };
const TOOLS_AND_A = { toolsListChanged: true, resourceSubscriptions: ['file:///a'] };

function logWith(changes: Parameters<typeof recordChange>[1][], limits = BIG, at = 0) {
  const log = createListenLog('E');
  for (const c of changes) recordChange(log, c, at, limits);
  return log;
}

describe('the listen log', () => {
  it('numbers changes from 1; positions name the epoch and the number', () => {
    const log = logWith([{ kind: 'tools_list_changed' }, { kind: 'resource_updated', uri: 'file:///a' }]);
    expect(log.head).toBe(2);
    expect(log.changes.map((c) => c.seq)).toEqual([1, 2]);
    expect(positionOf(log, 2)).toBe('E.2');
    expect(seqOf(log, 'E.2')).toBe(2);
    expect(seqOf(log, 'E.0')).toBe(0);
  });

  it.each([
    ['another epoch', 'F.1'],
    ['ahead of the head', 'E.3'],
    ['not a number', 'E.x'],
    ['a leading zero', 'E.01'],
    ['no dot', 'E1'],
    ['not a string', 1],
    ['too long', `E.${'1'.repeat(70)}`],
  ])('a position from %s is not this log’s', (_, position) => {
    expect(seqOf(logWith([{ kind: 'tools_list_changed' }, { kind: 'tools_list_changed' }]), position)).toBe(
      undefined,
    );
  });

  it('an application’s limits: whole numbers ≥ 0, anything else the default', () => {
    expect(listenLogLimits(undefined)).toEqual(DEFAULT_LISTEN_LOG_LIMITS);
    expect(listenLogLimits({ maxChanges: 5 })).toEqual({ ...DEFAULT_LISTEN_LOG_LIMITS, maxChanges: 5 });
    expect(listenLogLimits({ maxChanges: undefined, retentionMs: Number.NaN })).toEqual(
      DEFAULT_LISTEN_LOG_LIMITS,
    );
    expect(listenLogLimits({ maxChanges: -1, retentionMs: 2.7 })).toEqual({
      maxChanges: DEFAULT_LISTEN_LOG_LIMITS.maxChanges,
      retentionMs: 2,
    });
  });

  it('keeps at most maxChanges, and each change retentionMs after it was published', () => {
    const limits = { retentionMs: 1_000, maxChanges: 3 };
    const log = createListenLog('E');
    for (let i = 0; i < 5; i++) recordChange(log, { kind: 'tools_list_changed' }, i * 100, limits);
    expect(log.changes.map((c) => c.seq)).toEqual([3, 4, 5]);
    expireChanges(log, 1_300, limits); // seq 3 was published at 200: 1,100 ms ago
    expect(log.changes.map((c) => c.seq)).toEqual([4, 5]);
    expireChanges(log, 10_000, limits);
    expect(log.changes).toEqual([]);
    expect(log.head).toBe(5);
  });

  it('accepts what the SDK’s listen router would deliver (listenFilterAccepts)', () => {
    expect(changeAccepted(TOOLS_AND_A, { kind: 'tools_list_changed' })).toBe(true);
    expect(changeAccepted(TOOLS_AND_A, { kind: 'prompts_list_changed' })).toBe(false);
    expect(changeAccepted(TOOLS_AND_A, { kind: 'resources_list_changed' })).toBe(false);
    expect(changeAccepted(TOOLS_AND_A, { kind: 'resource_updated', uri: 'file:///a' })).toBe(true);
    expect(changeAccepted(TOOLS_AND_A, { kind: 'resource_updated', uri: 'file:///b' })).toBe(false);
    expect(changeAccepted({}, { kind: 'resource_updated', uri: 'file:///a' })).toBe(false);
    expect(relistItemOf({ kind: 'resource_updated', uri: 'file:///a' })).toBe('resource:file:///a');
    expect(relistItemOf({ kind: 'prompts_list_changed' })).toBe('prompts');
  });
});

describe('missedSince: what a re-open missed', () => {
  const log = logWith([
    { kind: 'tools_list_changed' }, // 1
    { kind: 'prompts_list_changed' }, // 2 (not accepted)
    { kind: 'resource_updated', uri: 'file:///a' }, // 3
    { kind: 'tools_list_changed' }, // 4
    { kind: 'resource_updated', uri: 'file:///b' }, // 5 (not accepted)
    { kind: 'tools_list_changed' }, // 6
  ]);

  it('counts the accepted changes after the last position, up to the head when the stream subscribed', () => {
    expect(missedSince(log, 'E.0', 6, TOOLS_AND_A, 0, BIG)).toEqual({
      count: 4,
      relist: ['tools', 'resource:file:///a'],
    });
    // The last position itself was received; 6 came after the subscription (it is on the new stream).
    expect(missedSince(log, 'E.1', 5, TOOLS_AND_A, 0, BIG)).toEqual({
      count: 2,
      relist: ['resource:file:///a', 'tools'],
    });
    expect(missedSince(log, 'E.4', 5, TOOLS_AND_A, 0, BIG)).toEqual({ count: 0, relist: [] });
    expect(missedSince(log, 'E.6', 6, TOOLS_AND_A, 0, BIG)).toEqual({ count: 0, relist: [] });
  });

  it('cannot vouch: another epoch, a position ahead of the subscription, an evicted change after it', () => {
    expect(missedSince(log, 'F.1', 6, TOOLS_AND_A, 0, BIG)).toBeUndefined();
    expect(missedSince(log, 'E.6', 5, TOOLS_AND_A, 0, BIG)).toBeUndefined();
    const small = { retentionMs: 60_000, maxChanges: 3 };
    const evicted = logWith(
      [
        { kind: 'tools_list_changed' },
        { kind: 'tools_list_changed' },
        { kind: 'tools_list_changed' },
        { kind: 'tools_list_changed' },
      ],
      small,
    ); // holds 2, 3, 4
    expect(missedSince(evicted, 'E.0', 4, TOOLS_AND_A, 0, small)).toBeUndefined();
    // From 1: change 2 onward is held, so the count is exact.
    expect(missedSince(evicted, 'E.1', 4, TOOLS_AND_A, 0, small)).toEqual({ count: 3, relist: ['tools'] });
    // Time: at 70 s everything published at 0 is gone; from 4 (the head) nothing was missed: exact 0.
    expect(missedSince(evicted, 'E.3', 4, TOOLS_AND_A, 70_000, small)).toBeUndefined();
    expect(missedSince(evicted, 'E.4', 4, TOOLS_AND_A, 70_000, small)).toEqual({ count: 0, relist: [] });
  });
});

const metaOf = (message: JsonRpcMessage): Record<string, unknown> =>
  ((message as JsonRpcNotification).params?._meta ?? {}) as Record<string, unknown>;

describe('the acknowledgement and the requests', () => {
  const ack: JsonRpcNotification = {
    jsonrpc: '2.0',
    method: ACKNOWLEDGED_METHOD,
    params: { notifications: TOOLS_AND_A, _meta: { [SUBSCRIPTION_ID_META_KEY]: 7 } },
  };
  const declared = { [CLIENT_CAPABILITIES_META_KEY]: { extensions: { [CONTINUITY_EXTENSION]: {} } } };
  const listen = (meta: object) => ({
    jsonrpc: '2.0',
    id: 7,
    method: 'subscriptions/listen',
    params: { notifications: TOOLS_AND_A, _meta: meta },
  });

  it('reads what a listen request says; any other message is not one', () => {
    expect(listenAttemptOf(listen(declared))).toEqual({ positions: true });
    expect(listenAttemptOf(listen({ ...declared, [ListenMeta.lastPosition]: 'E.1' }))).toEqual({
      positions: true,
      lastPosition: 'E.1',
    });
    expect(listenAttemptOf(listen({}))).toEqual({ positions: false });
    expect(listenAttemptOf({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).toBeUndefined();
    expect(listenAttemptOf({ jsonrpc: '2.0', method: 'subscriptions/listen' })).toBeUndefined();
    expect(listenAttemptOf([listen(declared)])).toBeUndefined();
    expect(listenAttemptOf(null)).toBeUndefined();
  });

  it('puts the subscription’s position on the ack, and on a re-open the missed count', () => {
    const log = logWith([
      { kind: 'tools_list_changed' },
      { kind: 'tools_list_changed' },
      { kind: 'tools_list_changed' },
    ]);
    const first = positionedAck(ack, { positions: true, subscribedAt: 2 }, log, 0, BIG);
    expect((first as JsonRpcNotification).params?._meta).toEqual({
      [SUBSCRIPTION_ID_META_KEY]: 7,
      [ListenMeta.position]: 'E.2',
    });
    const reopen = positionedAck(ack, { positions: true, lastPosition: 'E.0', subscribedAt: 2 }, log, 0, BIG);
    const meta = metaOf(reopen);
    expect(meta[ListenMeta.position]).toBe('E.2');
    expect(readListenMissed(meta)).toEqual({ count: 2, relist: ['tools'] });
    // The client's position cannot be vouched for: no `missed` (the client reports an unknown gap).
    const foreign = positionedAck(
      ack,
      { positions: true, lastPosition: 'F.0', subscribedAt: 2 },
      log,
      0,
      BIG,
    );
    expect((foreign as JsonRpcNotification).params?._meta).not.toHaveProperty(ListenMeta.missed);
    // Never subscribed (an empty filter): the head now.
    expect(metaOf(positionedAck(ack, { positions: true }, log, 0, BIG))[ListenMeta.position]).toBe('E.3');
  });

  it('leaves everything else as it is', () => {
    const log = logWith([]);
    expect(positionedAck(ack, { positions: false, subscribedAt: 0 }, log, 0, BIG)).toBe(ack);
    const note: JsonRpcNotification = { jsonrpc: '2.0', method: 'notifications/tools/list_changed' };
    expect(positionedAck(note, { positions: true, subscribedAt: 0 }, log, 0, BIG)).toBe(note);
    const answer = { jsonrpc: '2.0' as const, id: 7, result: {} };
    expect(positionedAck(answer, { positions: true, subscribedAt: 0 }, log, 0, BIG)).toBe(answer);
  });

  it('adds a position to an event’s params, keeping its own _meta', () => {
    expect(positionedParams(undefined, 'E.1')).toEqual({ _meta: { [ListenMeta.position]: 'E.1' } });
    expect(positionedParams({ uri: 'u', _meta: { a: 1 } }, 'E.2')).toEqual({
      uri: 'u',
      _meta: { a: 1, [ListenMeta.position]: 'E.2' },
    });
  });

  it('readListenMissed accepts only a consistent report', () => {
    const read = (missed: unknown) => readListenMissed({ [ListenMeta.missed]: missed });
    expect(read({ count: 2, relist: ['tools'] })).toEqual({ count: 2, relist: ['tools'] });
    expect(read({ count: 0, relist: [] })).toEqual({ count: 0, relist: [] });
    for (const bad of [
      { count: 0, relist: ['tools'] },
      { count: 1, relist: [] },
      { count: 1.5, relist: ['tools'] },
      { count: 2, relist: ['tools', 'tools'] },
      { count: 1, relist: [3] },
      { count: '1', relist: ['tools'] },
      null,
      'x',
    ])
      expect(read(bad)).toBeUndefined();
  });
});

describe('the bus’s two rules (positioned-bus.ts and the simulated world call these)', () => {
  it('publishing records the change and gives the params with its position (the event’s own params kept)', () => {
    const log = createListenLog('E');
    const first = publishChange(log, { kind: 'tools_list_changed' }, 0, BIG);
    expect(first).toEqual({ seq: 1, positionedParams: { _meta: { [ListenMeta.position]: 'E.1' } } });
    const second = publishChange(
      log,
      { kind: 'resource_updated', uri: 'file:///a', params: { x: 1 } },
      0,
      BIG,
    );
    expect(second.positionedParams).toEqual({ x: 1, _meta: { [ListenMeta.position]: 'E.2' } });
    expect(log.changes.map((c) => [c.kind, c.uri])).toEqual([
      ['tools_list_changed', undefined],
      ['resource_updated', 'file:///a'],
    ]);
  });

  it('a stream subscribed starts at the head now; positions only when its request declared the extension', () => {
    const log = logWith([{ kind: 'tools_list_changed' }, { kind: 'tools_list_changed' }]);
    expect(streamSubscribed(log, { positions: true })).toEqual({ subscribedAt: 2, positions: true });
    expect(streamSubscribed(log, { positions: false })).toEqual({ subscribedAt: 2, positions: false });
    expect(streamSubscribed(log, undefined)).toEqual({ subscribedAt: 2, positions: false });
  });
});
