import { afterEach, describe, expect, it } from 'vitest';
import { memoKey } from '../../machines/continuity-extension.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import {
  admitKeyedEvent,
  DEFAULT_MAX_EVENT_BYTES_PER_KEY,
  EMPTY_EVENT_BUDGET,
  maxEventBytesPerKey,
  storedEvent,
} from '../../machines/server/keyed-events.js';
import { KEYED_STREAM } from '../../machines/server/keyed-memo.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { type KeyedServer, keyedCall, post, type SseEvent, startKeyedServer } from './keyed-harness.js';

/**
 * Issue 22, item 2: what a key's log keeps is bounded by the server. A keyed call with a 1 MiB progress
 * token, to a tool sending 100 progress notifications, kept ~100 MiB for the memo window (every stored
 * notification carried the token, which no attempt is ever sent: each gets its own). Now the token is
 * not stored, and a key's events are bounded in bytes; past the budget the body's messages are not kept,
 * and its result is always recorded and answered, once (machines/server/keyed-events.ts).
 */

const progress = (params: Record<string, unknown>): JsonRpcMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: params as { progressToken: string; progress: number },
});

describe('what a key’s log keeps (machines/server/keyed-events.ts)', () => {
  it('a progress notification without its token; everything else as it came', () => {
    expect(storedEvent(progress({ progressToken: 'x'.repeat(1000), progress: 3, total: 9 }))).toEqual(
      progress({ progress: 3, total: 9 }),
    );
    const log: JsonRpcMessage = {
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { level: 'info', data: 'progressToken' },
    };
    expect(storedEvent(log)).toBe(log);
    const answer: JsonRpcMessage = { jsonrpc: '2.0', id: 1, result: {} };
    expect(storedEvent(answer)).toBe(answer);
  });

  it('the byte budget keeps a prefix: once a message does not fit, no later one is kept', () => {
    let budget = EMPTY_EVENT_BUDGET;
    const kinds: string[] = [];
    for (const bytes of [40, 40, 30, 5, 1]) {
      const a = admitKeyedEvent(budget, bytes, 100);
      kinds.push(a.kind);
      budget = a.budget;
    }
    // 40 + 40 fit; 30 would make 110; the 5 and the 1 that would fit are dropped too.
    expect(kinds).toEqual(['append', 'append', 'drop', 'drop', 'drop']);
    expect(budget).toEqual({ keptBytes: 80, dropped: 3 });
    expect(admitKeyedEvent(EMPTY_EVENT_BUDGET, 1, 0).kind).toBe('drop');
  });

  it('an application’s setting: whole bytes ≥ 0, anything else the default (1 MiB)', () => {
    expect(maxEventBytesPerKey(undefined)).toBe(DEFAULT_MAX_EVENT_BYTES_PER_KEY);
    expect(maxEventBytesPerKey(-1)).toBe(DEFAULT_MAX_EVENT_BYTES_PER_KEY);
    expect(maxEventBytesPerKey(Number.POSITIVE_INFINITY)).toBe(DEFAULT_MAX_EVENT_BYTES_PER_KEY);
    expect(maxEventBytesPerKey(0)).toBe(0);
    expect(maxEventBytesPerKey(10.5)).toBe(10);
  });
});

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function server(
  maxEventBytesPerKey?: number,
): Promise<KeyedServer & { log: MemoryEventLog; memo: MemoryMemoStore }> {
  const log = new MemoryEventLog();
  const memo = new MemoryMemoStore({ memoWindowMs: 60_000 });
  const s = await startKeyedServer({
    log,
    memo,
    pollMs: 50,
    ...(maxEventBytesPerKey === undefined ? {} : { maxEventBytesPerKey }),
  });
  cleanup.push(async () => {
    await s.close();
    await memo.close();
    await log.close();
  });
  return Object.assign(s, { log, memo });
}

/** The bytes (JSON) the key's log holds, and its events. */
async function held(s: { log: MemoryEventLog; memo: MemoryMemoStore }, key: string) {
  const entry = await s.memo.get(memoKey('', key));
  expect(entry).toBeDefined();
  const read = await s.log.read(entry?.logId as string, KEYED_STREAM, 0);
  const events = read?.events ?? [];
  return { bytes: events.reduce((n, e) => n + JSON.stringify(e.message).length, 0), events };
}

const progressOf = (events: { message: unknown }[]) =>
  events
    .map((e) => e.message as { method?: string; params?: { progress?: number; progressToken?: unknown } })
    .filter((m) => m.method === 'notifications/progress');

describe('a key’s events over real HTTP on the official v2 server', () => {
  it('a 1 MiB progress token on 100 notifications: each is delivered with the token, the log keeps none of it', async () => {
    const s = await server();
    const token = 't'.repeat(1_048_576);
    // 100 MiB to deliver: a reader too far behind is cut by the server's SSE pacing (16 MiB buffered) and
    // re-issues from its last event id with the same token, as a client of the extension does (bounded).
    const events: SseEvent[] = [];
    let response: JsonRpcMessage | undefined;
    let lastEventId: string | null | undefined;
    for (let i = 1; i <= 30 && !response; i++) {
      const a = await post(
        s.url,
        keyedCall(i, 'chatty', { count: 100 }, 'key-big-token', {
          progressToken: token,
          ...(lastEventId === undefined ? {} : { lastEventId }),
        }),
        30_000,
      );
      events.push(...a.events);
      response = a.response;
      lastEventId = [...a.events].reverse().find((e) => e.id !== undefined)?.id ?? lastEventId ?? null;
    }
    expect(response).toMatchObject({ result: { content: [{ text: 'said 100' }] } });
    const a = { events };
    const delivered = progressOf(a.events);
    expect(delivered).toHaveLength(100);
    expect(delivered.every((m) => m.params?.progressToken === token)).toBe(true);
    const { bytes, events: kept } = await held(s, 'key-big-token');
    console.log(`1 MiB token × 100 progress: the key's log holds ${bytes} bytes in ${kept.length} events`);
    // 100 notifications and the final response, each well under 1 KiB without the token (it was ~100 MiB).
    expect(bytes).toBeLessThan(64 * 1024);
    // A re-issue with another token is written its own token (and the same result).
    const b = await post(
      s.url,
      keyedCall(2, 'chatty', { count: 100 }, 'key-big-token', { progressToken: 'mine', lastEventId: null }),
    );
    expect(b.response).toMatchObject({ id: 2, result: { content: [{ text: 'said 100' }] } });
    expect(progressOf(b.events).map((m) => m.params?.progressToken)).toEqual(Array(100).fill('mine'));
  }, 60_000);

  it('past the byte budget the messages are not kept, and the charge is answered once, also to a re-issue', async () => {
    // About three stored progress notifications fit (each is under 100 bytes without its token).
    const s = await server(300);
    const a = await post(s.url, keyedCall(1, 'chatty', { count: 50 }, 'key-budget', { progressToken: 'p' }));
    expect(a.response).toMatchObject({ id: 1, result: { content: [{ text: 'said 50' }] } });
    const seen = progressOf(a.events).map((m) => m.params?.progress);
    // A prefix: 1, 2, … k, never a later one without the earlier ones.
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.length).toBeLessThan(50);
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i + 1));
    const { bytes } = await held(s, 'key-budget');
    // The kept events, plus the final response (never subject to the budget).
    expect(bytes - JSON.stringify(a.response).length).toBeLessThanOrEqual(300);

    // A charge with no room for any progress: charged once, answered to the first attempt and a re-issue.
    const t = await server(0);
    const first = await post(
      t.url,
      keyedCall(1, 'charge', { amount: 7 }, 'key-charge', { progressToken: 'c' }),
    );
    expect(first.response).toMatchObject({ id: 1, result: { content: [{ text: 'charged 7 (#1)' }] } });
    expect(progressOf(first.events)).toHaveLength(0);
    const again = await post(
      t.url,
      keyedCall(2, 'charge', { amount: 7 }, 'key-charge', { progressToken: 'd', lastEventId: null }),
    );
    expect(again.response).toMatchObject({ id: 2, result: { content: [{ text: 'charged 7 (#1)' }] } });
    expect(t.ledger.charges).toBe(1);
  }, 60_000);
});
