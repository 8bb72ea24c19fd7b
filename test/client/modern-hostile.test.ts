import type { ServerResponse } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createParser } from 'eventsource-parser';
import { afterEach, describe, expect, it } from 'vitest';
import { backoffCeiling, type ReconnectPolicy } from '../../machines/backoff.js';
import {
  MAX_EVENT_ID_LENGTH,
  MAX_REMEMBERED_CALL_IDS,
  rememberCallId,
} from '../../machines/client/limits.js';
import type { ModernCallOutput } from '../../machines/client/modern-call.machine.js';
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
    const endings: ModernCallOutput[] = [];
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

describe('item 8: discover and list answers are passed on as they arrive, capped', () => {
  /** Keep-alive comments every 20 ms until the client goes away. */
  const keepAlive = (res: ServerResponse) => {
    const timer = setInterval(() => res.write(': keep-alive\n\n'), 20);
    res.on('close', () => clearInterval(timer));
  };
  const bounded = <T>(what: string, p: Promise<T>) =>
    Promise.race([
      p,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${what} did not settle within 20 s`)), 20_000).unref(),
      ),
    ]);

  it('answers on event streams kept open by keep-alives: connect and listTools settle at the answer; what they said is learned', async () => {
    const callMeta: Record<string, unknown>[] = [];
    const server = await hostileModernServer(({ res, body }) => {
      switch (body.method) {
        case 'server/discover':
        case 'tools/list': {
          sse(res);
          keepAlive(res);
          res.write(': keep-alive\n\n');
          const result =
            body.method === 'server/discover'
              ? discoverAnswer(body.id)
              : {
                  jsonrpc: '2.0',
                  id: body.id,
                  result: {
                    resultType: 'complete',
                    ttlMs: 0,
                    cacheScope: 'private',
                    tools: [{ name: 'charge', inputSchema: { type: 'object' } }],
                  },
                };
          // Another id's response first: it does not end the exchange.
          res.write(event({ jsonrpc: '2.0', id: 'not-yours', result: {} }));
          res.write(event(result));
          return; // never ended: keep-alives until the client leaves
        }
        case 'tools/call':
          callMeta.push((body.params?._meta ?? {}) as Record<string, unknown>);
          return json(res, { jsonrpc: '2.0', id: body.id, result: { resultType: 'complete', content: [] } });
        default:
          return res.writeHead(404).end();
      }
    });
    servers.push(server);
    const client = new Client(
      { name: 'item-8', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await bounded(
      'connect',
      client.connect(new StreamableHTTPClientTransport(new URL(server.url), { fetch: continuityFetch() })),
    );
    const listed = await bounded('listTools', client.listTools());
    expect(listed.tools.map((t) => t.name)).toEqual(['charge']);
    await bounded('callTool', client.callTool({ name: 'charge', arguments: {} }));
    // The discover answer was read as it passed: the extension's key went with the call.
    expect(typeof callMeta[0]?.[ContinuityMeta.idempotencyKey]).toBe('string');
    await client.close();
  }, 60_000);

  it('a 64 MiB tools/list body: the client reads at most the cap and the call fails saying why', async () => {
    let written = 0;
    const server = await hostileModernServer(({ res, body }) => {
      if (body.method !== 'tools/list') return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      const piece = 'x'.repeat(1024 * 1024);
      void (async () => {
        await write(res, `{"jsonrpc":"2.0","id":${JSON.stringify(body.id)},"result":{"tools":[],"pad":"`);
        for (let i = 0; i < 64 && !res.destroyed; i++) {
          await write(res, piece);
          written += piece.length;
        }
        res.end('"}}');
      })();
    });
    servers.push(server);
    const fetchImpl = continuityFetch();
    const response = await bounded('tools/list', fetchImpl(server.url, modernInit(1, 'tools/list')));
    const answer = await response.json();
    expect(answer).toMatchObject({ id: 1, error: { code: -32055, data: { reason: 'answer_too_large' } } });
    expect(answer.error.message).toMatch(/tools\/list answer exceeded 16777216 bytes/);
    // The server could write the cap plus what the sockets buffer, not the 64 MiB.
    console.log(`item 8: the server wrote ${(written / 2 ** 20).toFixed(0)} MiB of a 64 MiB body`);
    expect(written).toBeLessThan(40 * 2 ** 20);
  }, 60_000);

  it('an event stream of keep-alives that never answers: cut at the cap with a clear error', async () => {
    const server = await hostileModernServer(({ res }) => {
      sse(res);
      keepAlive(res);
    });
    servers.push(server);
    const fetchImpl = continuityFetch({ maxListingBytes: 1024 });
    const response = await bounded(
      'server/discover',
      fetchImpl(server.url, modernInit(7, 'server/discover')),
    );
    const messages: Record<string, unknown>[] = [];
    await bounded(
      'the body',
      readMessages(response, (m) => messages.push(m)),
    );
    expect(messages).toMatchObject([
      { id: 7, error: { code: -32055, data: { reason: 'answer_too_large', limit: 1024 } } },
    ]);
  }, 60_000);
});
