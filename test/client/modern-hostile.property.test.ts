import type { ServerResponse } from 'node:http';
import { createParser } from 'eventsource-parser';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffCeiling, type ReconnectPolicy } from '../../machines/backoff.js';
import { MAX_EVENT_ID_LENGTH } from '../../machines/client/limits.js';
import type { ModernCallPolicy } from '../../machines/client/modern-call-decide.js';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import { ACKNOWLEDGED_METHOD, SUBSCRIPTION_ID_META_KEY } from '../../machines/listen-wire.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { listenRequestInit } from '../support/listen-request.js';
import {
  discoverAnswer,
  event,
  hostileModernServer,
  json,
  type ModernRequest,
  modernInit,
  retainedHeap,
} from './hostile-modern-server.js';

/**
 * Issue 22, the 2026-07-28 client against generated hostile servers, over real HTTP on 127.0.0.1: each
 * run is a fast-check script of replies (statuses, JSON bodies, event streams with any ids and payloads,
 * keep-alives, resets, hangs), played by a loopback server to `continuityFetch`'s calls and to its
 * re-opening listen stream. Judged from what the server saw and what the application got:
 *
 * - calls: every call settles within `SETTLE_MS` (the stall timeout cuts a hang), with the call's one
 *   answer as its last message, a JSON-RPC error with a code and a message, an HTTP error status, or a
 *   thrown error; a message is never delivered twice; and no side effect can run twice: a call without
 *   the extension's key is never re-sent after an attempt that may have run, and through the extension
 *   every attempt of a call carries its one key;
 * - listen: the first answer settles; a re-open without progress since the last one waits at least the
 *   backoff's ceiling (an acknowledgement is not progress); never more gaps than re-opens;
 * - memory: the heap after all runs (full GC) is within `HEAP_MIB` of before.
 */
const CALL_RUNS = Number(process.env.MCPC_HOSTILE_MODERN_RUNS ?? 30);
const LISTEN_RUNS = Math.max(1, Math.round(CALL_RUNS / 2));
const SETTLE_MS = 20_000;
const STALL_MS = 250;
const HEAP_MIB = 48;
const CALL_POLICY: Partial<ModernCallPolicy> = {
  maxReissues: 3,
  backoff: { initialDelayMs: 10, maxDelayMs: 80, factor: 2, maxRetries: 3, jitter: 'none' },
};
const LISTEN_POLICY: ReconnectPolicy = {
  initialDelayMs: 40,
  maxDelayMs: 320,
  factor: 2,
  maxRetries: 3,
  jitter: 'none',
};
const LISTEN_WINDOW_MS = 1_500;

type Payload = 'note' | 'answer' | 'other-answer' | 'garbage' | 'request';
type Item =
  | { readonly kind: 'event'; readonly id: 'none' | 'fresh' | 'repeat' | 'long'; readonly payload: Payload }
  | { readonly kind: 'keep-alive' }
  | { readonly kind: 'retry'; readonly ms: number };
type Reply =
  | {
      readonly kind: 'status';
      readonly status: number;
      readonly body: 'none' | 'error' | 'junk';
      readonly retryAfter: boolean;
    }
  | { readonly kind: 'json'; readonly body: 'answer' | 'other-answer' | 'error' | 'junk' }
  | { readonly kind: 'stream'; readonly items: readonly Item[]; readonly end: 'end' | 'reset' | 'hang' }
  | { readonly kind: 'reset' }
  | { readonly kind: 'hang' };

const item: fc.Arbitrary<Item> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant('event' as const),
      id: fc.constantFrom('none', 'fresh', 'repeat', 'long'),
      payload: fc.constantFrom<Payload>('note', 'note', 'answer', 'other-answer', 'garbage', 'request'),
    }),
    weight: 4,
  },
  fc.constant({ kind: 'keep-alive' as const }),
  fc.record({ kind: fc.constant('retry' as const), ms: fc.constantFrom(0, 5, 99_999_999) }),
);
const reply: fc.Arbitrary<Reply> = fc.oneof(
  fc.record({
    kind: fc.constant('status' as const),
    status: fc.constantFrom(400, 401, 404, 410, 429, 500, 502, 503),
    body: fc.constantFrom('none', 'error', 'junk'),
    retryAfter: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('json' as const),
    body: fc.constantFrom('answer', 'other-answer', 'error', 'junk'),
  }),
  {
    arbitrary: fc.record({
      kind: fc.constant('stream' as const),
      items: fc.array(item, { maxLength: 6 }),
      end: fc.constantFrom('end', 'reset', 'hang'),
    }),
    weight: 3,
  },
  fc.constant({ kind: 'reset' as const }),
  fc.constant({ kind: 'hang' as const }),
);

interface CallScenario {
  readonly extension: boolean;
  /** How `server/discover` is answered: a JSON body, or an event stream ended or kept open by keep-alives. */
  readonly discover: 'json' | 'stream-ended' | 'stream-kept-open';
  readonly calls: number;
  /** Replies to `tools/call` POSTs in arrival order; past the script, a proper answer. */
  readonly replies: readonly Reply[];
}
const callScenario: fc.Arbitrary<CallScenario> = fc.record({
  extension: fc.boolean(),
  discover: fc.constantFrom('json', 'stream-ended', 'stream-kept-open'),
  calls: fc.integer({ min: 1, max: 3 }),
  replies: fc.array(reply, { minLength: 1, maxLength: 8 }),
});

/** Whether the server can have run the call on this reply: only a 4xx or a 503 with Retry-After say no. */
function mayHaveRun(r: Reply): boolean {
  if (r.kind !== 'status') return true;
  return !(r.status >= 400 && r.status < 500) && !(r.status === 503 && r.retryAfter);
}

/** The application's request id an attempt's id stands for (a re-issue's id names it). */
function callOf(id: unknown): string {
  const text = String(id);
  const cut = text.indexOf('~reissue-');
  return cut < 0 ? `n${text}` : text.slice(0, cut);
}

/** Plays one scripted reply on `res`; `serial` numbers the notes the server ever sent. */
function play(res: ServerResponse, r: Reply, id: unknown, state: { serial: number; sent: string[] }) {
  const answer = { jsonrpc: '2.0', id, result: { resultType: 'complete', content: [] } };
  const error = { jsonrpc: '2.0', id, error: { code: -32000, message: 'no' } };
  switch (r.kind) {
    case 'status': {
      const headers: Record<string, string> = r.retryAfter ? { 'retry-after': '0' } : {};
      if (r.body === 'error') headers['content-type'] = 'application/json';
      res.writeHead(r.status, headers);
      res.end(r.body === 'error' ? JSON.stringify(error) : r.body === 'junk' ? '<html>' : undefined);
      return;
    }
    case 'json':
      if (r.body === 'junk') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"not": "json-rpc"');
        return;
      }
      return json(
        res,
        r.body === 'answer' ? answer : r.body === 'error' ? error : { ...answer, id: 'other' },
      );
    case 'reset':
      res.socket?.destroy();
      return;
    case 'hang':
      return;
    case 'stream': {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const it of r.items) {
        if (it.kind === 'keep-alive') res.write(': keep-alive\n\n');
        else if (it.kind === 'retry') res.write(`retry: ${it.ms}\n\n`);
        else if (it.id === 'repeat' && state.sent.length > 0)
          res.write(state.sent[state.sent.length - 1] ?? '');
        else {
          const serial = state.serial++;
          const data =
            it.payload === 'note'
              ? { jsonrpc: '2.0', method: 'notifications/message', params: { serial } }
              : it.payload === 'answer'
                ? answer
                : it.payload === 'other-answer'
                  ? { ...answer, id: 'other' }
                  : it.payload === 'request'
                    ? { jsonrpc: '2.0', id: `srv-${serial}`, method: 'ping' }
                    : undefined;
          const eventId =
            it.id === 'fresh' || it.id === 'repeat'
              ? `e-${serial}`
              : it.id === 'long'
                ? `${serial}-${'x'.repeat(MAX_EVENT_ID_LENGTH)}`
                : undefined;
          const text =
            data === undefined ? `id: ${eventId ?? serial}\ndata: {garbage\n\n` : event(data, eventId);
          if (eventId !== undefined && eventId.length <= MAX_EVENT_ID_LENGTH) state.sent.push(text);
          res.write(text);
        }
      }
      if (r.end === 'end') res.end();
      else if (r.end === 'reset') res.socket?.destroy();
      return;
    }
  }
}

/** A call's body read to its end: every message, or the error that ended it. */
async function readBody(
  response: Response,
): Promise<{ messages: Record<string, unknown>[]; error?: unknown }> {
  const messages: Record<string, unknown>[] = [];
  const type = response.headers.get('content-type') ?? '';
  try {
    if (!type.startsWith('text/event-stream')) {
      const text = await response.text();
      if (type.startsWith('application/json')) messages.push(JSON.parse(text));
      return { messages };
    }
    const parser = createParser({ onEvent: (e) => messages.push(JSON.parse(e.data)) });
    const decoder = new TextDecoder();
    const reader = response.body?.getReader();
    for (;;) {
      const chunk = reader ? await reader.read() : { done: true as const, value: undefined };
      if (chunk.done) return { messages };
      parser.feed(decoder.decode(chunk.value, { stream: true }));
    }
  } catch (error) {
    return { messages, error };
  }
}

const within = <T>(what: string, p: Promise<T>, ms = SETTLE_MS) =>
  Promise.race([
    p,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`${what}: no end within ${ms} ms`)), ms).unref(),
    ),
  ]);

async function runCalls(sc: CallScenario): Promise<string[]> {
  const problems: string[] = [];
  const attempts: { call: string; key: unknown; reply: Reply | undefined }[] = [];
  const state = { serial: 0, sent: [] as string[] };
  let nthCall = 0;
  const server = await hostileModernServer(({ res, body }: ModernRequest) => {
    if (body.method === 'server/discover') {
      const plain = { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: {} };
      const answer = sc.extension ? discoverAnswer(body.id) : { jsonrpc: '2.0', id: body.id, result: plain };
      if (sc.discover === 'json') return json(res, answer);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(event(answer));
      if (sc.discover === 'stream-ended') return res.end();
      const timer = setInterval(() => res.write(': keep-alive\n\n'), 20);
      res.on('close', () => clearInterval(timer));
      return;
    }
    if (body.method !== 'tools/call') return res.writeHead(404).end();
    const r = sc.replies[nthCall++];
    const key = (body.params?._meta as Record<string, unknown> | undefined)?.[ContinuityMeta.idempotencyKey];
    attempts.push({ call: callOf(body.id), key, reply: r });
    if (r === undefined)
      return json(res, { jsonrpc: '2.0', id: body.id, result: { resultType: 'complete', content: [] } });
    play(res, r, body.id, state);
  });
  try {
    const fetchImpl = continuityFetch({ policy: CALL_POLICY, stallTimeoutMs: STALL_MS });
    // The discover answer settles at its response, however long the server keeps its stream open.
    const discovered = await within(
      'server/discover',
      fetchImpl(server.url, modernInit('d', 'server/discover')).then((r) => readBody(r)),
    ).catch((error: unknown) => ({ messages: [], error }));
    if (discovered.messages.at(-1)?.id !== 'd') return [`discover: ${String(discovered.error)}`];
    const outcomes = await Promise.all(
      Array.from({ length: sc.calls }, (_, i) =>
        within(
          `call ${i + 1}`,
          (async () => {
            try {
              const response = await fetchImpl(
                server.url,
                modernInit(i + 1, 'tools/call', { name: 'charge', arguments: {} }),
              );
              return { id: i + 1, status: response.status, ...(await readBody(response)) };
            } catch (error) {
              return { id: i + 1, status: 0, messages: [], error };
            }
          })(),
        ).catch((error: unknown) => ({ id: i + 1, status: -1, messages: [], error })),
      ),
    );
    for (const o of outcomes) {
      const tag = `call ${o.id}`;
      if (o.status === -1) {
        problems.push(`${tag}: ${String(o.error)}`);
        continue;
      }
      const answers = o.messages.filter((m) => m.id === o.id && ('result' in m || 'error' in m));
      const last = o.messages.at(-1);
      if (o.status === 0) {
        if (!(o.error instanceof Error)) problems.push(`${tag}: the fetch threw ${String(o.error)}`);
      } else if (o.status === 200) {
        if (answers.length !== 1 || last !== answers[0])
          problems.push(`${tag}: ${answers.length} answers, last ${JSON.stringify(last)?.slice(0, 200)}`);
        const error = answers[0]?.error as { code?: unknown; message?: unknown } | undefined;
        if (
          error &&
          (typeof error.code !== 'number' || typeof error.message !== 'string' || error.message === '')
        )
          problems.push(`${tag}: an unclear error ${JSON.stringify(error)}`);
      } else if (o.status < 400) problems.push(`${tag}: HTTP ${o.status} handed on`);
      const serials = o.messages.flatMap((m) =>
        m.method === 'notifications/message' ? [(m.params as { serial: number }).serial] : [],
      );
      if (new Set(serials).size !== serials.length)
        problems.push(`${tag}: a note delivered twice ${serials}`);
    }
    const calls = new Set(attempts.map((a) => a.call));
    const keys = new Map<unknown, string>();
    for (const call of calls) {
      const mine = attempts.filter((a) => a.call === call);
      if (sc.extension) {
        if (new Set(mine.map((a) => a.key)).size !== 1 || typeof mine[0]?.key !== 'string')
          problems.push(`${call}: attempts with keys ${mine.map((a) => a.key)}`);
        const other = keys.get(mine[0]?.key);
        if (other !== undefined) problems.push(`${call} and ${other} share a key`);
        keys.set(mine[0]?.key, call);
      } else {
        const ran = mine.findIndex((a) => a.reply === undefined || mayHaveRun(a.reply));
        if (ran >= 0 && ran < mine.length - 1)
          problems.push(
            `${call}: re-sent without a key after attempt ${ran + 1} (${JSON.stringify(mine[ran]?.reply)}) may have run`,
          );
      }
    }
  } finally {
    await server.close();
  }
  return problems;
}

interface ListenReply {
  readonly kind: 'stream' | 'status' | 'json-answer' | 'reset' | 'hang';
  readonly ack: boolean;
  readonly notes: number;
  readonly end: 'end' | 'reset' | 'hang';
  readonly status: number;
}
const listenReply: fc.Arbitrary<ListenReply> = fc.record({
  kind: fc.oneof(
    { arbitrary: fc.constant('stream' as const), weight: 4 },
    fc.constantFrom('status' as const, 'json-answer' as const, 'reset' as const, 'hang' as const),
  ),
  ack: fc.boolean(),
  notes: fc.integer({ min: 0, max: 2 }),
  end: fc.constantFrom('end', 'reset', 'hang'),
  status: fc.constantFrom(404, 429, 500, 503),
});

async function runListen(script: readonly ListenReply[]): Promise<string[]> {
  const problems: string[] = [];
  /**
   * Per listen POST: when it arrived, when the server ended it itself (none for a hang: the client's
   * stall timer ends those), whether it delivered a note.
   */
  const posts: { at: number; endedAt?: number; notes: boolean }[] = [];
  const server = await hostileModernServer(({ res, body }) => {
    if (body.method !== 'subscriptions/listen') return res.writeHead(404).end();
    // Past the script: acknowledge and close at once, forever (issue 22 item 9).
    const r = script[posts.length] ?? { kind: 'stream', ack: true, notes: 0, end: 'end', status: 0 };
    const post: { at: number; endedAt?: number; notes: boolean } = { at: performance.now(), notes: false };
    posts.push(post);
    const meta = { [SUBSCRIPTION_ID_META_KEY]: body.id };
    if (r.kind !== 'hang' && !(r.kind === 'stream' && r.end === 'hang')) post.endedAt = post.at;
    switch (r.kind) {
      case 'status':
        return res.writeHead(r.status).end();
      case 'json-answer':
        return json(res, { jsonrpc: '2.0', id: body.id, error: { code: -32603, message: 'limit' } });
      case 'reset':
        return res.socket?.destroy();
      case 'hang':
        return;
      case 'stream': {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const notifications = (body.params as { notifications?: unknown } | undefined)?.notifications;
        if (r.ack)
          res.write(
            event({ jsonrpc: '2.0', method: ACKNOWLEDGED_METHOD, params: { notifications, _meta: meta } }),
          );
        for (let i = 0; i < r.notes; i++) {
          post.notes = true;
          res.write(
            event({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: meta } }),
          );
        }
        if (r.end === 'end') res.end();
        else if (r.end === 'reset') res.socket?.destroy();
      }
    }
  });
  try {
    let gaps = 0;
    const stop = new AbortController();
    const fetchImpl = continuityFetch({
      listenPolicy: LISTEN_POLICY,
      listenStallTimeoutMs: 400,
      onListenGap: () => {
        gaps++;
      },
    });
    const first = await within(
      'the listen answer',
      fetchImpl(server.url, listenRequestInit('L', {}, stop.signal)).then(
        (response) => ({ response }),
        (error: unknown) => ({ error }),
      ),
    ).catch((error: unknown) => ({ hang: error }));
    if ('hang' in first) return [String(first.hang)];
    if ('response' in first) {
      const body = readBody(first.response);
      await new Promise((r) => setTimeout(r, LISTEN_WINDOW_MS));
      stop.abort();
      const ended = await within('the listen body after abort', body).catch((error: unknown) => ({
        hang: error,
      }));
      if ('hang' in ended) problems.push(String(ended.hang));
    }
    // A re-open after k answers without progress waits at least ceiling(k-1) after the server ended the
    // last one (the client cannot see the end earlier). Progress: a note; a stream the server left
    // hanging (the client's stall timer ended it, and it may have been up long enough to be steady)
    // counts as progress too, conservatively.
    let withoutProgress = 0;
    for (let i = 1; i < posts.length; i++) {
      const before = posts[i - 1];
      if (!before) continue;
      if (before.notes || before.endedAt === undefined) {
        withoutProgress = 0;
        continue;
      }
      withoutProgress++;
      const wait = (posts[i]?.at ?? 0) - before.endedAt;
      const floor = withoutProgress === 0 ? 0 : backoffCeiling(withoutProgress - 1, LISTEN_POLICY) - 2;
      if (wait < floor)
        problems.push(
          `re-open ${i} after ${wait.toFixed(0)} ms, ${withoutProgress} without progress (floor ${floor})`,
        );
    }
    if (gaps > Math.max(0, posts.length - 1)) problems.push(`${gaps} gaps for ${posts.length} listen POSTs`);
  } finally {
    await server.close();
  }
  return problems;
}

describe('the 2026 client against generated hostile servers (real HTTP)', () => {
  let heapBefore = 0;

  it(`${CALL_RUNS} scripted servers against continuityFetch's calls: each call settles with one answer or a clear error, nothing twice, nothing re-run`, async () => {
    await runCalls({ extension: true, discover: 'json', calls: 1, replies: [] }); // warm-up: loading code is not retained heap
    heapBefore = await retainedHeap();
    await fc.assert(
      fc.asyncProperty(callScenario, async (sc) => {
        expect(await runCalls(sc)).toEqual([]);
      }),
      { numRuns: CALL_RUNS, endOnFailure: true },
    );
  }, 120_000);

  it(`${LISTEN_RUNS} scripted servers against the listen stream: it settles, re-opens only at the backoff's pace, no more gaps than re-opens`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(listenReply, { maxLength: 5 }), async (script) => {
        expect(await runListen(script)).toEqual([]);
      }),
      { numRuns: LISTEN_RUNS, endOnFailure: true },
    );
    const grown = (await retainedHeap()) - heapBefore;
    console.log(`hostile 2026 servers: heap grew ${(grown / 2 ** 20).toFixed(1)} MiB over all runs`);
    expect(grown).toBeLessThan(HEAP_MIB * 2 ** 20);
  }, 120_000);
});
