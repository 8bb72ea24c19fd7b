import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import type { IoEvent, SseEvent } from '../machines/client/io.js';
import type { JsonRpcMessage } from '../machines/jsonrpc.js';
import { activeClient, initialize, initResult, scriptedClient, toolCall } from './helpers/scripted-client.js';

/**
 * A parsed chunk (`sse.events`) must be taken exactly as its events one by one would be: same messages
 * delivered in the same order, same orphans, same end of the stream, same cursor for the next resume.
 * Only the number of cursor writes may differ (one per chunk instead of one per event).
 */

const progress = (n: number): JsonRpcMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { n },
});

/** Events a server might send on the call's stream (request id 1, stream 2 of epoch e). */
const eventArb: fc.Arbitrary<SseEvent> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .nat({ max: 12 })
      .map((seq) => ({ type: 'sse.event', id: `e-2-${seq}`, message: progress(seq) }) as const),
  },
  {
    weight: 1,
    arbitrary: fc.nat({ max: 12 }).map((seq) => ({ type: 'sse.event', id: `e-2-${seq}`, data: '' }) as const),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('x', 'y', 'z')
      .map((id) => ({ type: 'sse.event', id, message: progress(99) }) as const),
  },
  { weight: 1, arbitrary: fc.constant({ type: 'sse.event', message: progress(-1) } as const) },
  {
    weight: 1,
    arbitrary: fc.nat({ max: 12 }).map(
      (seq) =>
        ({
          type: 'sse.event',
          id: `e-2-${seq}`,
          message: { jsonrpc: '2.0', id: 1, result: { seq } },
        }) as const,
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constant({
      type: 'sse.event',
      id: 'e-2-50',
      message: { jsonrpc: '2.0', id: 77, result: {} },
    } as const),
  },
  { weight: 1, arbitrary: fc.constant({ type: 'sse.event', event: 'close', data: 'terminated' } as const) },
);

/** Cuts a list into consecutive chunks at the given cut points. */
function chunksOf<T>(items: readonly T[], cuts: readonly number[]): T[][] {
  const at = [...new Set(cuts.map((c) => c % (items.length + 1)))].sort((a, b) => a - b);
  const chunks: T[][] = [];
  let from = 0;
  for (const cut of [...at, items.length]) {
    if (cut > from) chunks.push(items.slice(from, cut));
    from = Math.max(from, cut);
  }
  return chunks;
}

const asChunk = (events: SseEvent[]): IoEvent =>
  events.length === 1 && events[0] ? events[0] : { type: 'sse.events', events };

/** What the application and the next request see: everything but the number of cursor writes. */
function observed(c: ReturnType<typeof scriptedClient>) {
  const snapshot = c.actor.getSnapshot();
  return {
    state: snapshot.value,
    delivered: c.delivered,
    orphans: c.orphans,
    gaps: c.gaps,
    errors: c.errors,
    exchanges: c.exchanges.map((e) => ({ ...e.request, aborted: e.aborted })),
    cursor: c.persisted[c.persisted.length - 1],
  };
}

describe('a parsed chunk is taken as its events one by one', () => {
  test.prop(
    [
      fc.array(eventArb, { minLength: 1, maxLength: 24 }),
      fc.array(fc.nat(), { maxLength: 8 }),
      fc.option(fc.constantFrom(50, 300, 800), { nil: undefined }),
    ],
    { numRuns: 400 },
  )('on a call stream of an active session', (events, cuts, retryMs) => {
    const run = (chunked: boolean) => {
      const c = activeClient();
      c.send(toolCall(1, 'chatty'));
      const post = c.last();
      post.reply({ type: 'http.stream' });
      if (chunked) {
        // The server's `retry:` came in the first chunk.
        const [first = [], ...rest] = chunksOf(events, cuts);
        post.reply({ type: 'sse.events', events: first, retryMs }, ...rest.map(asChunk));
      } else {
        if (retryMs !== undefined) post.reply({ type: 'sse.retry', ms: retryMs });
        post.reply(...events);
      }
      // Then the connection drops: when the resume goes out and what it asks for show the retry floor and
      // the cursor the stream kept.
      post.reply({ type: 'net.failed', fault: 'reset' });
      const requests: unknown[] = [];
      for (const ms of [100, 250, 500]) {
        c.clock.increment(ms);
        requests.push(c.exchanges.length);
      }
      return { ...observed(c), requests };
    };
    expect(run(true)).toEqual(run(false));
  });

  it('with opaque ids, remembers the last 512 as one by one would: an id 600 events back is delivered again', () => {
    const opaque = (i: number): SseEvent => ({ type: 'sse.event', id: `op${i}`, message: progress(i) });
    const events = [...Array.from({ length: 600 }, (_, i) => opaque(i)), opaque(0), opaque(599)];
    const run = (chunked: boolean) => {
      const c = activeClient();
      c.send(toolCall(1, 'chatty'));
      c.last().reply({ type: 'http.stream' }, ...(chunked ? [asChunk(events)] : events));
      return c.delivered.filter((m) => 'method' in m && m.method === 'notifications/progress').length;
    };
    // op0 was forgotten (600 > 512) and comes again; op599 was just delivered and is dropped.
    expect(run(false)).toBe(601);
    expect(run(true)).toBe(601);
  });

  test.prop(
    [
      fc.array(eventArb, { maxLength: 8 }),
      fc.array(eventArb, { maxLength: 8 }),
      fc.array(fc.nat(), { maxLength: 6 }),
    ],
    {
      numRuns: 300,
    },
  )('around the initialize answer', (before, after, cuts) => {
    const events: SseEvent[] = [
      ...before,
      { type: 'sse.event', id: 'e-1-20', message: initResult() },
      ...after,
    ];
    const run = (chunked: boolean) => {
      const c = scriptedClient();
      c.send(initialize);
      const post = c.last();
      post.reply({ type: 'http.stream', sessionId: 'S1' });
      if (chunked) post.reply(...chunksOf(events, cuts).map(asChunk));
      else post.reply(...events);
      return observed(c);
    };
    expect(run(true)).toEqual(run(false));
  });

  test.prop(
    [
      fc.array(eventArb, { maxLength: 8 }),
      fc.array(eventArb, { maxLength: 8 }),
      fc.array(fc.nat(), { maxLength: 6 }),
    ],
    { numRuns: 200 },
  )('around the answer of a re-initialize', (before, after, cuts) => {
    const run = (chunked: boolean) => {
      const c = activeClient();
      c.send(toolCall(1, 'echo'));
      // The call's own POST is answered 404: the session is gone, the client initializes again.
      c.last().reply({ type: 'http.response', status: 404 });
      const reinit = c.last();
      const id = (reinit.request.body as { id: string }).id;
      const events: SseEvent[] = [
        ...before,
        { type: 'sse.event', id: 'f-1-20', message: initResult(id) },
        ...after,
      ];
      reinit.reply({ type: 'http.stream', sessionId: 'S2' });
      if (chunked) reinit.reply(...chunksOf(events, cuts).map(asChunk));
      else reinit.reply(...events);
      return observed(c);
    };
    const chunked = run(true);
    expect(chunked.state).not.toBe('reinitializing');
    expect(chunked).toEqual(run(false));
  });
});
