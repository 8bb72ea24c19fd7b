import type { ServerResponse } from 'node:http';
import { createParser } from 'eventsource-parser';
import { afterEach, describe, expect, it } from 'vitest';
import { backoffCeiling, type ReconnectPolicy } from '../../machines/backoff.js';
import {
  MAX_EVENT_ID_LENGTH,
  MAX_REMEMBERED_CALL_IDS,
  rememberCallId,
} from '../../machines/client/limits.js';
import type { StatelessCallOutput } from '../../machines/client/stateless-call.machine.js';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import { ACKNOWLEDGED_METHOD, SUBSCRIPTION_ID_META_KEY } from '../../machines/listen-wire.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import type { ListenGap } from '../../src/client/modern/listen.js';
import { listenRequestInit } from '../support/listen-request.js';
import { until } from '../support/until.js';
import {
  discoverAnswer,
  event,
  hostileModernServer,
  json,
  modernInit,
  retainedHeap,
  sse,
} from './hostile-modern-server.js';

/**
 * The 2026-07-28 client (`continuityFetch`) against hostile 2026 servers on 127.0.0.1 (issue 22, items
 * 7–9): what a server sends can neither grow the client without bound nor keep a call pending.
 */

const servers: { close: () => Promise<void> }[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** Writes `text` and waits for the socket to take it (the server keeps no backlog of its own). */
function write(res: ServerResponse, text: string): Promise<void> {
  return new Promise((resolve) => {
    if (res.write(text)) resolve();
    else res.once('drain', resolve);
  });
}

/** Reads an event-stream body, handing each JSON-RPC message to `onMessage`, to its end. */
async function readMessages(response: Response, onMessage: (m: Record<string, unknown>) => void) {
  const parser = createParser({ onEvent: (e) => onMessage(JSON.parse(e.data)) });
  const decoder = new TextDecoder();
  const reader = response.body?.getReader();
  if (!reader) return;
  for (;;) {
    const chunk = await reader.read();
    if (chunk.done) return;
    parser.feed(decoder.decode(chunk.value, { stream: true }));
  }
}

describe('item 7: event ids on a keyed call', () => {
  it('800 events with distinct 256 KiB ids: the client keeps none of them, the re-issue carries no long id, the call settles', async () => {
    const EVENTS = 800;
    const longId = (i: number) => `${i}-${'x'.repeat(256 * 1024)}`;
    let releaseAnswer: () => void = () => undefined;
    const answerGate = new Promise<void>((resolve) => {
      releaseAnswer = resolve;
    });
    const reissueMeta: Record<string, unknown>[] = [];
    const server = await hostileModernServer(({ res, body, nth }) => {
      if (body.method === 'server/discover') return json(res, discoverAnswer(body.id));
      if (body.method !== 'tools/call') return res.writeHead(404).end();
      if (nth > 0) {
        reissueMeta.push((body.params?._meta ?? {}) as Record<string, unknown>);
        return json(res, { jsonrpc: '2.0', id: body.id, result: { content: [], isError: false } });
      }
      sse(res);
      void (async () => {
        // Short ids first: these the client may keep and send back.
        await write(res, event({ jsonrpc: '2.0', method: 'notifications/message', params: {} }, 'short-1'));
        for (let i = 0; i < EVENTS; i++)
          await write(
            res,
            event({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: i } }, longId(i)),
          );
        await answerGate;
        // Cut: the keyed call is re-issued with the last id the client kept.
        res.socket?.destroy();
      })();
    });
    servers.push(server);
    const endings: StatelessCallOutput[] = [];
    const fetchImpl = continuityFetch({ onCallEnded: (e) => endings.push(e) });
    await (await fetchImpl(server.url, modernInit(1, 'server/discover'))).text();
    const before = await retainedHeap();

    const response = await fetchImpl(
      server.url,
      modernInit(2, 'tools/call', { name: 'charge', arguments: {} }),
    );
    let progress = 0;
    let grown = Number.NaN;
    const messages: Record<string, unknown>[] = [];
    await readMessages(response, (m) => {
      messages.push(m);
      if (m.method !== 'notifications/progress') return;
      progress++;
      if (progress === EVENTS) {
        // Every event has been through the call machine: what it kept is on the heap now.
        void retainedHeap().then((after) => {
          grown = after - before;
          releaseAnswer();
        });
      }
    });

    expect(progress).toBe(EVENTS);
    // 800 ids of 256 KiB are 200 MiB; the client may keep at most MAX_REMEMBERED_CALL_IDS short ones.
    console.log(`item 7: heap grew ${(grown / 2 ** 20).toFixed(1)} MiB while 800 × 256 KiB ids went by`);
    expect(grown).toBeLessThan(32 * 2 ** 20);
    expect(messages.at(-1)).toMatchObject({ id: 2, result: { isError: false } });
    expect(endings).toMatchObject([{ outcome: 'answered', attempts: 1 }]);
    expect(reissueMeta).toHaveLength(1);
    expect(reissueMeta[0]?.[ContinuityMeta.lastEventId]).toBe('short-1');
    expect(MAX_EVENT_ID_LENGTH).toBeLessThan(1024);
  }, 60_000);

  it(`a call's remembered ids are bounded (${MAX_REMEMBERED_CALL_IDS}): a replay of a recent event is still dropped`, async () => {
    const EVENTS = MAX_REMEMBERED_CALL_IDS + 500;
    let releaseCut: () => void = () => undefined;
    const cutGate = new Promise<void>((resolve) => {
      releaseCut = resolve;
    });
    const server = await hostileModernServer(({ res, body, nth }) => {
      if (body.method === 'server/discover') return json(res, discoverAnswer(body.id));
      sse(res);
      const progress = (i: number) =>
        write(res, event({ jsonrpc: '2.0', method: 'notifications/progress', params: { i } }, `e${i}`));
      void (async () => {
        if (nth === 0) {
          for (let i = 0; i < EVENTS; i++) await progress(i);
          await cutGate;
          res.socket?.destroy();
          return;
        }
        // The re-issue replays the last 10 events (already delivered), then one new one and the answer.
        for (let i = EVENTS - 10; i <= EVENTS; i++) await progress(i);
        res.end(event({ jsonrpc: '2.0', id: body.id, result: { content: [] } }));
      })();
    });
    servers.push(server);
    const fetchImpl = continuityFetch();
    await (await fetchImpl(server.url, modernInit(1, 'server/discover'))).text();
    const response = await fetchImpl(
      server.url,
      modernInit(2, 'tools/call', { name: 'charge', arguments: {} }),
    );
    const seen: number[] = [];
    await readMessages(response, (m) => {
      if (m.method !== 'notifications/progress') return;
      seen.push((m.params as { i: number }).i);
      // Every event of the first attempt arrived: the cut comes after them.
      if (seen.length === EVENTS) releaseCut();
    });
    expect(seen).toHaveLength(EVENTS + 1);
    expect(new Set(seen).size).toBe(EVENTS + 1);
  }, 60_000);

  it('the remembered ids keep the newest, never more than the bound', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 3 * MAX_REMEMBERED_CALL_IDS; i++) rememberCallId(seen, `e${i}`);
    expect(seen.size).toBe(MAX_REMEMBERED_CALL_IDS);
    expect(seen.has(`e${3 * MAX_REMEMBERED_CALL_IDS - 1}`)).toBe(true);
    expect(seen.has(`e${2 * MAX_REMEMBERED_CALL_IDS - 1}`)).toBe(false);
  });
});

describe('item 9: a listen stream that closes right after each acknowledgement', () => {
  it('is re-opened after a growing backoff (an ack is not progress), each re-open one gap', async () => {
    const REOPENS = 7;
    const policy: ReconnectPolicy = {
      initialDelayMs: 20,
      maxDelayMs: 5_000,
      factor: 2,
      maxRetries: 8,
      jitter: 'none',
    };
    const arrivals: number[] = [];
    const server = await hostileModernServer(({ res, body }) => {
      if (body.method !== 'subscriptions/listen') return res.writeHead(404).end();
      arrivals.push(performance.now());
      sse(res);
      const ack = {
        jsonrpc: '2.0',
        method: ACKNOWLEDGED_METHOD,
        params: {
          notifications: (body.params as { notifications?: unknown }).notifications,
          _meta: { [SUBSCRIPTION_ID_META_KEY]: body.id },
        },
      };
      res.end(event(ack));
    });
    servers.push(server);
    const gaps: ListenGap[] = [];
    const stop = new AbortController();
    const fetchImpl = continuityFetch({ listenPolicy: policy, onListenGap: (g) => gaps.push(g) });
    const response = await fetchImpl(server.url, listenRequestInit('L1', {}, stop.signal));
    const draining = response.text().catch(() => undefined);
    await until('the re-opens', () => arrivals.length > REOPENS || undefined, 30_000);
    stop.abort();
    await draining;
    // Re-open k waits the ceiling of attempt k-1 (no jitter): a timer never fires early, however busy
    // the machine. Before the fix every re-open came ~20 ms after the last (the ack restarted the backoff).
    const waits = arrivals.slice(1, REOPENS + 1).map((t, k) => t - (arrivals[k] ?? 0));
    console.log(`item 9: waits before re-opens ${waits.map((w) => w.toFixed(0)).join(', ')} ms`);
    waits.forEach((wait, k) => {
      expect(wait).toBeGreaterThanOrEqual(backoffCeiling(k, policy) - 2);
    });
    // Each re-open after an acknowledged stream broke is one gap: never more gaps than re-opens.
    expect(gaps.length).toBeLessThanOrEqual(arrivals.length - 1);
    expect(gaps.length).toBeGreaterThanOrEqual(REOPENS - 1);
  }, 60_000);
});
