import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { createActor, fromCallback, SimulatedClock } from 'xstate';
import { backoffCeiling, type ReconnectPolicy } from '../../machines/backoff.js';
import type { Exchange, IoEvent } from '../../machines/client/io.js';
import { MAX_SERVER_RETRY_MS } from '../../machines/client/limits.js';
import {
  ACKNOWLEDGED_METHOD,
  asListenRequest,
  isListenStream,
  isPermanentRefusal,
  type ListenEmitted,
  listenMachine,
  narrowedFilter,
  RELIST_META_KEY,
  relistNotifications,
  relistOf,
  reopenId,
  SUBSCRIPTION_ID_META_KEY,
  stampedBack,
} from '../../machines/client/listen.machine.js';
import {
  CLIENT_CAPABILITIES_META_KEY,
  CONTINUITY_EXTENSION,
  ListenMeta,
} from '../../machines/continuity-extension.js';
import type {
  JsonRpcMessage,
  JsonRpcNotification,
  JsonRpcRequest,
  RequestId,
} from '../../machines/jsonrpc.js';

const POLICY: ReconnectPolicy = {
  initialDelayMs: 100,
  maxDelayMs: 1_000,
  factor: 2,
  maxRetries: 3,
  jitter: 'full',
};
const FIRST = 'listen:0';
const REQUEST: JsonRpcRequest = {
  jsonrpc: '2.0',
  id: FIRST,
  method: 'subscriptions/listen',
  params: { notifications: { toolsListChanged: true } },
};

function world(
  opts: {
    policy?: ReconnectPolicy;
    seed?: number;
    request?: JsonRpcRequest;
    stallTimeoutMs?: number;
    /** Off unless a test is about the extension: the bodies below are the application's request as sent. */
    useExtension?: boolean;
  } = {},
) {
  const clock = new SimulatedClock();
  const exchanges: Exchange[] = [];
  let live = 0;
  const machine = listenMachine.provide({
    actors: {
      exchange: fromCallback<IoEvent, Exchange>(({ input }) => {
        exchanges.push(input);
        live++;
        return () => {
          live--;
        };
      }),
    },
  });
  const actor = createActor(machine, {
    input: {
      request: opts.request ?? REQUEST,
      policy: opts.policy ?? POLICY,
      jitterSeed: opts.seed ?? 1,
      stallTimeoutMs: opts.stallTimeoutMs,
      useExtension: opts.useExtension ?? false,
    },
    clock,
  });
  const emitted: ListenEmitted[] = [];
  actor.on('*', (e) => emitted.push(e as ListenEmitted));
  actor.start();
  const io = (e: IoEvent) => actor.send(e);
  const messages = (...list: JsonRpcMessage[]) =>
    io({ type: 'sse.events', events: list.map((message) => ({ type: 'sse.event', message })) });
  const ack = (id: RequestId, notifications: object = { toolsListChanged: true }) =>
    ({
      jsonrpc: '2.0',
      method: ACKNOWLEDGED_METHOD,
      params: { notifications, _meta: { [SUBSCRIPTION_ID_META_KEY]: id } },
    }) as JsonRpcMessage;
  const change = (id: RequestId) =>
    ({
      jsonrpc: '2.0',
      method: 'notifications/tools/list_changed',
      params: { _meta: { [SUBSCRIPTION_ID_META_KEY]: id } },
    }) as JsonRpcMessage;
  const snap = () => actor.getSnapshot();
  const state = () => JSON.stringify(snap().value);
  const delivered = () => emitted.flatMap((e) => (e.type === 'listen.deliver' ? e.messages : []));
  const of = <T extends ListenEmitted['type']>(type: T) =>
    emitted.filter((e) => e.type === type) as Extract<ListenEmitted, { type: T }>[];
  /** Wait out the backoff: not a millisecond early, then the re-open starts. */
  const waitBackoff = () => {
    const delay = snap().context.nextDelayMs;
    if (delay > 0) {
      clock.increment(delay - 1);
      expect(state()).toBe('"backoff"');
    }
    clock.increment(1);
    return delay;
  };
  const openAndAck = () => {
    io({ type: 'http.stream' });
    messages(ack(FIRST));
  };
  return {
    actor,
    clock,
    exchanges,
    emitted,
    io,
    messages,
    ack,
    change,
    snap,
    state,
    delivered,
    of,
    waitBackoff,
    openAndAck,
    live: () => live,
  };
}

describe('listenMachine: the first attempt', () => {
  it('POSTs the application request under its own id, hands over on the stream and delivers the ack', () => {
    const w = world();
    expect(w.exchanges).toEqual([{ method: 'POST', body: REQUEST }]);
    expect(w.state()).toBe('{"exchanging":"connecting"}');
    w.io({ type: 'http.stream' });
    expect(w.of('listen.handover')).toHaveLength(1);
    expect(w.state()).toBe('{"exchanging":"streaming"}');
    w.messages(w.ack(FIRST), w.change(FIRST));
    expect(w.delivered()).toEqual([w.ack(FIRST), w.change(FIRST)]);
    expect(w.snap().context.acknowledged).toBe(true);
    expect(w.of('listen.gap')).toHaveLength(0);
  });

  it.each([
    ['a refused connection', { type: 'net.failed', fault: 'refused' } as IoEvent],
    ['a reset before the headers', { type: 'net.failed', fault: 'reset' } as IoEvent],
    ['a 401', { type: 'http.response', status: 401 } as IoEvent],
    ['a 503', { type: 'http.response', status: 503 } as IoEvent],
    [
      'a JSON answer',
      {
        type: 'http.response',
        status: 200,
        body: { jsonrpc: '2.0', id: FIRST, error: { code: -32603, message: 'limit' } },
      } as IoEvent,
    ],
  ])('%s is the server’s answer: passed through (notOpened), nothing handed over or retried', (_, event) => {
    const w = world();
    w.io(event);
    expect(w.state()).toBe('"notOpened"');
    expect(w.snap().status).toBe('done');
    expect(w.of('listen.handover')).toHaveLength(0);
    expect(w.delivered()).toEqual([]);
    expect(w.exchanges).toHaveLength(1);
  });
});

describe('listenMachine: a break and the re-open', () => {
  it('open → broken → backoff → reopening (new id) → open: gap unknown, re-list advised, notifications synthesized, re-ack swallowed', () => {
    const w = world();
    w.openAndAck();
    w.io({ type: 'net.failed', fault: 'reset' });
    expect(w.of('listen.broken')).toHaveLength(1);
    expect(w.state()).toBe('"backoff"');
    expect(w.live()).toBe(0);
    const delay = w.waitBackoff();
    expect(delay).toBeLessThanOrEqual(POLICY.initialDelayMs);
    expect(w.state()).toBe('{"exchanging":"connecting"}');
    const second = reopenId(FIRST, 1);
    expect(w.exchanges[1]).toEqual({ method: 'POST', body: { ...REQUEST, id: second } });
    w.io({ type: 'http.stream' });
    expect(w.of('listen.handover')).toHaveLength(1);
    w.messages(w.ack(second), w.change(second));
    expect(w.of('listen.gap').map((e) => e.gap)).toEqual([
      { missed: { kind: 'unknown' }, attempts: 1, relist: ['tools'], subscriptionId: FIRST },
    ]);
    expect(w.of('listen.relist').map((e) => e.what)).toEqual([['tools']]);
    const after = w.delivered().slice(1);
    expect(after).toEqual([...relistNotifications({ toolsListChanged: true }, FIRST), w.change(FIRST)]);
    expect(w.delivered().filter((m) => 'method' in m && m.method === ACKNOWLEDGED_METHOD)).toHaveLength(1);
    expect(w.snap().context.attempt).toBe(0);
    expect(w.snap().context.gapOpen).toBe(false);
  });

  it('a clean end without a response is a break too; the gap counts every attempt it took', () => {
    const w = world();
    w.openAndAck();
    w.io({ type: 'net.ended' });
    w.waitBackoff();
    w.io({ type: 'net.failed', fault: 'refused' });
    w.waitBackoff();
    w.io({ type: 'http.response', status: 503 });
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.io({ type: 'net.ended' }); // opened, broke before its ack: still a failed attempt
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.messages(w.ack(reopenId(FIRST, 4)));
    expect(w.exchanges.map((e) => e.body && 'id' in e.body && e.body.id)).toEqual([
      FIRST,
      reopenId(FIRST, 1),
      reopenId(FIRST, 2),
      reopenId(FIRST, 3),
      reopenId(FIRST, 4),
    ]);
    expect(w.of('listen.gap').map((e) => e.gap.attempts)).toEqual([4]);
  });

  it('a break before the first ack loses nothing: the re-open’s ack is delivered (under the first id), no gap', () => {
    const w = world();
    w.io({ type: 'http.stream' });
    w.io({ type: 'net.failed', fault: 'reset' });
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.messages(w.ack(reopenId(FIRST, 1)));
    expect(w.delivered()).toEqual([w.ack(FIRST)]);
    expect(w.of('listen.gap')).toHaveLength(0);
    expect(w.of('listen.relist')).toHaveLength(0);
  });

  it('re-lists what the re-open honoured: every list and every subscribed resource', () => {
    const filter = {
      toolsListChanged: true,
      promptsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: ['file:///a', 'file:///b'],
    };
    const w = world({ request: { ...REQUEST, params: { notifications: filter } } });
    w.io({ type: 'http.stream' });
    w.messages(w.ack(FIRST, filter));
    w.io({ type: 'net.ended' });
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.messages(w.ack(reopenId(FIRST, 1), filter));
    expect(w.of('listen.relist')[0]?.what).toEqual([
      'tools',
      'prompts',
      'resources',
      'resource:file:///a',
      'resource:file:///b',
    ]);
    const synthesized = w.delivered().slice(1) as { method: string; params: Record<string, unknown> }[];
    expect(synthesized.map((m) => m.method)).toEqual([
      'notifications/tools/list_changed',
      'notifications/prompts/list_changed',
      'notifications/resources/list_changed',
      'notifications/resources/updated',
      'notifications/resources/updated',
    ]);
    expect(synthesized.slice(3).map((m) => m.params.uri)).toEqual(['file:///a', 'file:///b']);
    for (const m of synthesized)
      expect(m.params._meta).toEqual({ [SUBSCRIPTION_ID_META_KEY]: FIRST, [RELIST_META_KEY]: true });
  });

  it('the server’s retry: is a floor on the next delay (capped)', () => {
    const w = world();
    w.openAndAck();
    w.io({ type: 'sse.retry', ms: 700 });
    w.io({ type: 'net.ended' });
    expect(w.snap().context.nextDelayMs).toBeGreaterThanOrEqual(700);
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.io({ type: 'sse.events', events: [], retryMs: 10 * MAX_SERVER_RETRY_MS });
    w.io({ type: 'net.ended' });
    expect(w.snap().context.nextDelayMs).toBe(MAX_SERVER_RETRY_MS);
  });
});

describe('listenMachine: endings', () => {
  it('the server’s graceful close on the stream is delivered under the first id and ends it', () => {
    const w = world();
    w.openAndAck();
    w.io({ type: 'net.ended' });
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    const second = reopenId(FIRST, 1);
    w.messages(
      w.ack(second),
      { jsonrpc: '2.0', id: second, result: { _meta: { [SUBSCRIPTION_ID_META_KEY]: second } } },
      w.change(second),
    );
    expect(w.state()).toBe('"endedByServer"');
    expect(w.delivered().at(-1)).toEqual({
      jsonrpc: '2.0',
      id: FIRST,
      result: { _meta: { [SUBSCRIPTION_ID_META_KEY]: FIRST } },
    });
    expect(w.live()).toBe(0);
  });

  it('a JSON-RPC error answering a re-open ends it with the server’s reason, under the first id', () => {
    const w = world();
    w.openAndAck();
    w.io({ type: 'net.ended' });
    w.waitBackoff();
    const error = { code: -32603, message: 'Subscription limit reached' };
    w.io({ type: 'http.response', status: 200, body: { jsonrpc: '2.0', id: reopenId(FIRST, 1), error } });
    expect(w.state()).toBe('"endedByServer"');
    expect(w.delivered().at(-1)).toEqual({ jsonrpc: '2.0', id: FIRST, error });
  });

  it.each([400, 401, 403, 404, 405, 415])(
    'give-up rule: a re-open answered %i is refused for good',
    (status) => {
      const w = world();
      w.openAndAck();
      w.io({ type: 'net.failed', fault: 'reset' });
      w.waitBackoff();
      w.io({ type: 'http.response', status });
      expect(w.state()).toBe('"givenUp"');
      expect(w.snap().context.refusal).toBe(status);
    },
  );

  it('give-up rule: transient failures never give up; past maxRetries it keeps polling under the longest ceiling', () => {
    const w = world();
    w.openAndAck();
    w.io({ type: 'net.ended' });
    const faults: IoEvent[] = [
      { type: 'net.failed', fault: 'refused' },
      { type: 'net.failed', fault: 'reset' },
      { type: 'net.failed', fault: 'timeout' },
      { type: 'http.response', status: 503 },
      { type: 'http.response', status: 429 },
      { type: 'http.response', status: 408 },
      { type: 'http.response', status: 502 },
    ];
    const delays: number[] = [];
    for (let i = 0; i < 5 * POLICY.maxRetries + 3; i++) {
      const attempt = w.snap().context.attempt - 1;
      const delay = w.waitBackoff();
      expect(delay).toBeLessThanOrEqual(backoffCeiling(attempt, POLICY));
      delays.push(delay);
      w.io(faults[i % faults.length] as IoEvent);
      expect(w.state()).toBe('"backoff"');
    }
    expect(Math.max(...delays)).toBeLessThanOrEqual(POLICY.maxDelayMs);
    expect(w.snap().context.attempt).toBeGreaterThan(POLICY.maxRetries);
    // And it still comes back.
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.messages(w.ack(reopenId(FIRST, w.snap().context.reopens)));
    expect(w.of('listen.gap')).toHaveLength(1);
  });

  it.each([
    ['connecting', (_: ReturnType<typeof world>) => undefined],
    ['streaming', (w: ReturnType<typeof world>) => w.openAndAck()],
    [
      'backoff',
      (w: ReturnType<typeof world>) => {
        w.openAndAck();
        w.io({ type: 'net.ended' });
      },
    ],
    [
      'reopening',
      (w: ReturnType<typeof world>) => {
        w.openAndAck();
        w.io({ type: 'net.ended' });
        w.waitBackoff();
      },
    ],
  ])('closed by the application while %s: final, its exchange stopped, nothing re-opened', (_, reach) => {
    const w = world();
    reach(w);
    const exchanges = w.exchanges.length;
    w.actor.send({ type: 'app.close' });
    expect(w.state()).toBe('"closed"');
    expect(w.snap().status).toBe('done');
    expect(w.live()).toBe(0);
    w.clock.increment(10 * POLICY.maxDelayMs);
    expect(w.exchanges).toHaveLength(exchanges);
  });
});

describe('listenMachine: stalls', () => {
  const STALL = 5_000;

  it('silence on an open stream for stallTimeoutMs is a break; any unit (a keep-alive) restarts the timer', () => {
    const w = world({ stallTimeoutMs: STALL });
    w.openAndAck();
    w.clock.increment(STALL - 1);
    w.io({ type: 'sse.activity' });
    w.clock.increment(STALL - 1);
    w.messages(w.change(FIRST));
    w.clock.increment(STALL - 1);
    expect(w.state()).toBe('{"exchanging":"streaming"}');
    w.clock.increment(1);
    expect(w.state()).toBe('"backoff"');
    expect(w.of('listen.broken')).toHaveLength(1);
    expect(w.live()).toBe(0);
  });

  it('no headers for stallTimeoutMs: the first attempt fails (notOpened), a re-open is a break', () => {
    const first = world({ stallTimeoutMs: STALL });
    first.clock.increment(STALL);
    expect(first.state()).toBe('"notOpened"');
    const again = world({ stallTimeoutMs: STALL });
    again.openAndAck();
    again.io({ type: 'net.ended' });
    again.waitBackoff();
    again.clock.increment(STALL);
    expect(again.state()).toBe('"backoff"');
    expect(again.snap().context.attempt).toBe(2);
  });

  it('off when 0 (the machine default): silence is waited on', () => {
    const w = world();
    w.openAndAck();
    w.clock.increment(100 * STALL);
    expect(w.state()).toBe('{"exchanging":"streaming"}');
  });
});

describe('listenMachine: jitter', () => {
  const delaysFor = (seed: number, breaks: number, policy = POLICY) => {
    const w = world({ seed, policy });
    w.openAndAck();
    w.io({ type: 'net.ended' });
    const out: number[] = [];
    for (let i = 0; i < breaks; i++) {
      out.push(w.waitBackoff());
      w.io({ type: 'net.failed', fault: 'refused' });
    }
    return out;
  };

  test.prop([fc.nat(), fc.integer({ min: 1, max: 12 })])(
    'full jitter: each delay in [0, ceiling(attempt)], replayable from its seed',
    (seed, breaks) => {
      const delays = delaysFor(seed, breaks);
      delays.forEach((d, attempt) => {
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThanOrEqual(backoffCeiling(attempt, POLICY));
      });
      expect(delaysFor(seed, breaks)).toEqual(delays);
    },
  );

  it('full jitter spreads: 200 seeds give first delays over most of [0, initialDelayMs]', () => {
    const firsts = Array.from({ length: 200 }, (_, seed) => delaysFor(seed, 1)[0] as number);
    expect(Math.min(...firsts)).toBeLessThan(POLICY.initialDelayMs * 0.1);
    expect(Math.max(...firsts)).toBeGreaterThan(POLICY.initialDelayMs * 0.9);
    expect(new Set(firsts).size).toBeGreaterThan(50);
  });

  it('without jitter the delays are the ceilings: the growth and the cap', () => {
    expect(delaysFor(1, 6, { ...POLICY, jitter: 'none' })).toEqual([100, 200, 400, 800, 1000, 1000]);
  });
});

describe('listen helpers', () => {
  it('stampedBack puts the first id back on notifications and on the listen request’s own answer only', () => {
    const cur = reopenId(FIRST, 2);
    const other = { jsonrpc: '2.0', id: 7, result: {} } as JsonRpcMessage;
    expect(stampedBack(other, FIRST, cur)).toBe(other);
    const unstamped = { jsonrpc: '2.0', method: 'notifications/tools/list_changed' } as JsonRpcMessage;
    expect(stampedBack(unstamped, FIRST, cur)).toBe(unstamped);
    const error = { jsonrpc: '2.0', id: cur, error: { code: 1, message: 'x' } } as JsonRpcMessage;
    expect(stampedBack(error, FIRST, cur)).toEqual({ ...error, id: FIRST });
  });

  it('classifies', () => {
    expect([400, 401, 403, 404, 408, 425, 429, 500, 503].map(isPermanentRefusal)).toEqual([
      true,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(isListenStream(200, 'text/event-stream; charset=utf-8')).toBe(true);
    expect(isListenStream(200, 'application/json')).toBe(false);
    expect(isListenStream(202, 'text/event-stream')).toBe(false);
    expect(asListenRequest(REQUEST)).toEqual(REQUEST);
    expect(asListenRequest({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).toBeUndefined();
    expect(asListenRequest({ jsonrpc: '2.0', method: 'subscriptions/listen' })).toBeUndefined();
    expect(relistOf({})).toEqual([]);
  });
});

describe('listenMachine: exact gaps through the continuity extension (docs/continuity-extension.md §12)', () => {
  const DECLARED = {
    [CLIENT_CAPABILITIES_META_KEY]: { extensions: { [CONTINUITY_EXTENSION]: {} } },
  };
  const FILTER = { toolsListChanged: true, resourceSubscriptions: ['file:///a'] };
  const request: JsonRpcRequest = { ...REQUEST, params: { notifications: FILTER } };
  const positioned = (message: JsonRpcMessage, position: string, extra: object = {}): JsonRpcMessage => {
    const m = message as JsonRpcNotification;
    const params = m.params as { _meta: object };
    return {
      ...m,
      params: { ...params, _meta: { ...params._meta, [ListenMeta.position]: position, ...extra } },
    };
  };
  const metaOf = (exchange: Exchange | undefined) =>
    (exchange?.body as { params?: { _meta?: object } } | undefined)?.params?._meta;
  /** Opened, acknowledged at `e.3`, a change at `e.5`, broken, re-opened: returns the re-open's id. */
  const brokenAfterPositions = () => {
    const w = world({ request, useExtension: true });
    w.io({ type: 'http.stream' });
    w.messages(positioned(w.ack(FIRST, FILTER), 'e.3'), positioned(w.change(FIRST), 'e.5'));
    w.io({ type: 'net.failed', fault: 'reset' });
    w.waitBackoff();
    return { w, second: reopenId(FIRST, 1) };
  };

  it('declares the extension on the first request (the rest of the request as sent)', () => {
    const w = world({ request, useExtension: true });
    expect(w.exchanges[0]?.body).toEqual({ ...request, params: { ...request.params, _meta: DECLARED } });
  });

  it('a re-open carries the last position received (a notification’s, after the ack’s)', () => {
    const { w, second } = brokenAfterPositions();
    expect(w.exchanges[1]?.body).toEqual({
      ...request,
      id: second,
      params: { ...request.params, _meta: { ...DECLARED, [ListenMeta.lastPosition]: 'e.5' } },
    });
  });

  it('`missed` with a count: an exact gap, only the named types re-listed', () => {
    const { w, second } = brokenAfterPositions();
    w.io({ type: 'http.stream' });
    w.messages(
      positioned(w.ack(second, FILTER), 'e.9', {
        [ListenMeta.missed]: { count: 2, relist: ['resource:file:///a'] },
      }),
    );
    expect(w.of('listen.gap').map((e) => e.gap)).toEqual([
      {
        missed: { kind: 'exact', count: 2 },
        attempts: 1,
        relist: ['resource:file:///a'],
        subscriptionId: FIRST,
      },
    ]);
    expect(w.of('listen.relist').map((e) => e.what)).toEqual([['resource:file:///a']]);
    const synthesized = w.delivered().slice(2) as { method: string; params: { uri?: string } }[];
    expect(synthesized.map((m) => [m.method, m.params.uri])).toEqual([
      ['notifications/resources/updated', 'file:///a'],
    ]);
    // The next re-open starts from the re-open's own acknowledgement.
    w.io({ type: 'net.ended' });
    w.waitBackoff();
    expect(metaOf(w.exchanges[2])).toMatchObject({
      [ListenMeta.lastPosition]: 'e.9',
    });
  });

  it('`missed` of 0: the gap is reported exact, nothing is re-listed or synthesized', () => {
    const { w, second } = brokenAfterPositions();
    w.io({ type: 'http.stream' });
    w.messages(positioned(w.ack(second, FILTER), 'e.6', { [ListenMeta.missed]: { count: 0, relist: [] } }));
    expect(w.of('listen.gap').map((e) => e.gap.missed)).toEqual([{ kind: 'exact', count: 0 }]);
    expect(w.of('listen.relist')).toHaveLength(0);
    expect(w.delivered()).toHaveLength(2); // the first ack and the change before the cut
  });

  it.each([
    ['no `missed` (the server could not vouch)', {}],
    ['a malformed count', { [ListenMeta.missed]: { count: -1, relist: [] } }],
    ['a count without types', { [ListenMeta.missed]: { count: 3, relist: [] } }],
    ['a type the filter never asked for', { [ListenMeta.missed]: { count: 1, relist: ['prompts'] } }],
  ])('%s: a gap of unknown size, everything re-listed', (_, extra) => {
    const { w, second } = brokenAfterPositions();
    w.io({ type: 'http.stream' });
    w.messages(positioned(w.ack(second, FILTER), 'e.9', extra));
    expect(w.of('listen.gap').map((e) => e.gap.missed)).toEqual([{ kind: 'unknown' }]);
    expect(w.of('listen.relist').map((e) => e.what)).toEqual([['tools', 'resource:file:///a']]);
  });

  it('a server without positions: nothing sent back, the gap unknown', () => {
    const w = world({ request, useExtension: true });
    w.io({ type: 'http.stream' });
    w.messages(w.ack(FIRST, FILTER));
    w.io({ type: 'net.ended' });
    w.waitBackoff();
    expect(metaOf(w.exchanges[1])).toEqual(DECLARED);
    w.io({ type: 'http.stream' });
    // A `missed` the client did not ask for (no position was sent) is not believed.
    w.messages(
      positioned(w.ack(reopenId(FIRST, 1), FILTER), 'e.1', {
        [ListenMeta.missed]: { count: 0, relist: [] },
      }),
    );
    expect(w.of('listen.gap').map((e) => e.gap.missed)).toEqual([{ kind: 'unknown' }]);
  });

  it('narrowedFilter keeps what the relist names, within the filter', () => {
    const all = { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['a', 'b'] };
    expect(narrowedFilter(all, ['prompts', 'resource:b'])).toEqual({
      promptsListChanged: true,
      resourceSubscriptions: ['b'],
    });
    expect(narrowedFilter({ toolsListChanged: true }, ['prompts'])).toEqual({});
  });
});

describe('listenMachine: a hostile re-acknowledgement', () => {
  it.each([
    ['resourceSubscriptions as a string', { toolsListChanged: true, resourceSubscriptions: 'abc' }],
    ['resourceSubscriptions as a number', { toolsListChanged: true, resourceSubscriptions: 5 }],
    [
      'non-string URIs and non-boolean flags',
      { toolsListChanged: true, promptsListChanged: 'yes', resourceSubscriptions: [1, null] },
    ],
    ['not an object', 'everything'],
  ])('%s: never throws; what it says that is well-formed is re-listed', (_, notifications) => {
    const w = world();
    w.openAndAck();
    w.io({ type: 'net.ended' });
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.messages({
      jsonrpc: '2.0',
      method: ACKNOWLEDGED_METHOD,
      params: { notifications, _meta: { [SUBSCRIPTION_ID_META_KEY]: reopenId(FIRST, 1) } },
    } as JsonRpcMessage);
    expect(w.snap().status).toBe('active');
    const expected = typeof notifications === 'string' ? [] : ['tools'];
    expect(w.of('listen.gap').map((e) => e.gap.relist)).toEqual([expected]);
  });
});

describe('listenMachine: attempts start over only on progress (issue 22 item 9)', () => {
  /** Re-open n: open, acknowledge, and close at once, as a hostile server does. */
  const ackAndClose = (w: ReturnType<typeof world>, n: number) => {
    w.io({ type: 'http.stream' });
    w.messages(w.ack(n === 0 ? FIRST : reopenId(FIRST, n)));
    w.io({ type: 'net.ended' });
  };

  it('an acknowledgement alone is not progress: a stream closed after each ack is backed off like a refusal', () => {
    const w = world();
    ackAndClose(w, 0);
    for (let n = 1; n <= 5; n++) {
      expect(w.snap().context.attempt).toBe(n);
      w.waitBackoff();
      ackAndClose(w, n);
    }
    // Each re-open after a break of an acknowledged stream is a gap (changes may have been published).
    expect(w.of('listen.gap')).toHaveLength(5);
    expect(w.snap().context.attempt).toBe(6);
  });

  it('a change notification is progress: the attempts start over', () => {
    const w = world();
    ackAndClose(w, 0);
    w.waitBackoff();
    ackAndClose(w, 1);
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.messages(w.ack(reopenId(FIRST, 2)));
    expect(w.snap().context.attempt).toBe(2);
    w.messages(w.change(reopenId(FIRST, 2)));
    expect(w.snap().context.attempt).toBe(0);
  });

  it('an acknowledged stream up for maxDelayMs is progress; one not acknowledged is not', () => {
    const w = world();
    ackAndClose(w, 0);
    w.waitBackoff();
    ackAndClose(w, 1);
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.clock.increment(POLICY.maxDelayMs);
    expect(w.snap().context.attempt).toBe(2);
    w.messages(w.ack(reopenId(FIRST, 2)));
    w.io({ type: 'net.ended' });
    w.waitBackoff();
    w.io({ type: 'http.stream' });
    w.messages(w.ack(reopenId(FIRST, 3)));
    w.clock.increment(POLICY.maxDelayMs - 1);
    expect(w.snap().context.attempt).toBe(3);
    w.clock.increment(1);
    expect(w.snap().context.attempt).toBe(0);
  });
});
