import { afterEach, describe, expect, it } from 'vitest';
import { ContinuityErrorCode, ContinuityMeta } from '../../machines/continuity-extension.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import {
  CHARGE_PROGRESS_AT,
  callWithReissues,
  cancelFor,
  type KeyedServer,
  keyedCall,
  post,
  startKeyedServer,
} from './keyed-harness.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function server(
  o: { memoWindowMs?: number; maxEventsPerRequest?: number; maxEntriesPerPrincipal?: number } = {},
): Promise<KeyedServer & { log: MemoryEventLog; memo: MemoryMemoStore }> {
  const log = new MemoryEventLog({ maxEventsPerStream: o.maxEventsPerRequest ?? 1000 });
  const memo = new MemoryMemoStore({ memoWindowMs: o.memoWindowMs ?? 60_000 });
  const s = await startKeyedServer({
    log,
    memo,
    maxEntriesPerPrincipal: o.maxEntriesPerPrincipal,
    pollMs: 50,
  });
  cleanup.push(async () => {
    await s.close();
    await memo.close();
    await log.close();
  });
  return Object.assign(s, { log, memo });
}

/** Waits (bounded) until the memo holds `n` entries: the first attempts have been admitted. */
async function untilEntries(s: { memo: MemoryMemoStore }, n: number): Promise<void> {
  const deadline = Date.now() + 5000;
  while (s.memo.stats().entries < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(s.memo.stats().entries).toBe(n);
}

const progressOf = (events: { message: unknown }[]) =>
  events
    .map((e) => e.message as { method?: string; params?: { progress?: number; progressToken?: unknown } })
    .filter((m) => m.method === 'notifications/progress');

describe('keyed requests over real HTTP on the official v2 server', () => {
  it('a keyed charge without faults: one charge, the result with SSE ids, progress with its token', async () => {
    const s = await server();
    const a = await post(
      s.url,
      keyedCall(1, 'charge', { amount: 5 }, 'key-plain-1', { progressToken: 't1' }),
    );
    expect(a.status).toBe(200);
    expect(a.response).toMatchObject({ id: 1, result: { content: [{ text: 'charged 5 (#1)' }] } });
    expect(progressOf(a.events).map((m) => m.params?.progress)).toEqual([1, 2, 3, 4]);
    expect(a.events.every((e) => e.id !== undefined)).toBe(true);
    expect(s.ledger.charges).toBe(1);
  });

  it('through a balancer cutting connections idle for 300 ms during a 1.5 s charge: one charge, one result, exactly the missing progress', async () => {
    const s = await server();
    const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: s.port }, idleTimeoutMs: 300 });
    cleanup.push(() => proxy.close());
    const cuts: number[] = [];
    proxy.on('fault', (f) => {
      if (f.type === 'cut') cuts.push(f.id);
    });
    const r = await callWithReissues(proxy.url().toString(), 'charge', { amount: 7 }, 'key-cut-1');
    expect(r.response).toMatchObject({ result: { content: [{ text: 'charged 7 (#1)' }] } });
    // The response carries the id of the attempt it was delivered on (the last re-issue).
    expect((r.response as { id: number }).id).toBe(r.attempts.length);
    expect(cuts.length).toBeGreaterThanOrEqual(1);
    expect(r.attempts.length).toBeGreaterThan(1);
    expect(s.ledger.charges).toBe(1);
    expect(s.ledger.started).toBe(1);
    // Each progress event exactly once over all attempts, in order, each with its own attempt's token.
    const progress = progressOf(r.events);
    expect(progress.map((m) => m.params?.progress)).toEqual(CHARGE_PROGRESS_AT.map((_, i) => i + 1));
    const answers = r.events.filter((e) => 'result' in e.message || 'error' in e.message);
    expect(answers).toHaveLength(1);
    const ids = r.events.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const [i, a] of r.attempts.entries()) {
      for (const m of progressOf(a.events)) expect(m.params?.progressToken).toBe(`p${i + 1}`);
    }
    // Every cut attempt's response was let go on the server: nothing waits, nothing runs.
    const deadline = Date.now() + 5000;
    while (s.keyed.stats().waitingLogs > 0 && Date.now() < deadline)
      await new Promise((res) => setTimeout(res, 25));
    expect(s.keyed.stats()).toEqual({ runningHere: 0, waitingLogs: 0 });
    console.log(`[keyed] cut ${cuts.length}x, ${r.attempts.length} attempts, charges ${s.ledger.charges}`);
  }, 30_000);

  it('same key, other arguments: 409 -32010 and nothing runs', async () => {
    const s = await server();
    const first = post(s.url, keyedCall(1, 'charge', { amount: 5 }, 'key-409'));
    await untilEntries(s, 1);
    const other = await post(s.url, keyedCall(2, 'charge', { amount: 6 }, 'key-409', { lastEventId: null }));
    expect(other.status).toBe(409);
    expect(other.response).toMatchObject({ id: 2, error: { code: ContinuityErrorCode.KEY_REUSED } });
    expect((await first).response).toMatchObject({ id: 1, result: {} });
    const after = await post(s.url, keyedCall(3, 'charge', { amount: 6 }, 'key-409'));
    expect(after.status).toBe(409);
    expect(s.ledger.started).toBe(1);
  }, 20_000);

  it('tiny maxEventsPerRequest: a re-issue after evicted events gets 410 -32011 with the exact lost count', async () => {
    const s = await server({ maxEventsPerRequest: 3 });
    const a = await post(s.url, keyedCall(1, 'chatty', { count: 10 }, 'key-410', { progressToken: 'c' }));
    expect(a.response).toMatchObject({ result: {} });
    const second = a.events[1]?.id as string;
    expect(second).toMatch(/-1-2$/);
    // Log: 10 progress + the final response = seq 1..11; retained 9..11; after 2, 3..8 are lost: 6.
    const r = await post(s.url, keyedCall(2, 'chatty', { count: 10 }, 'key-410', { lastEventId: second }));
    expect(r.status).toBe(410);
    const data = (r.response as { error: { code: number; data: Record<string, unknown> } }).error;
    expect(data.code).toBe(ContinuityErrorCode.EVENTS_EVICTED);
    expect(data.data).toMatchObject({ lostCount: 6, requestedId: second, streamComplete: true });
    // From resumeAfter: the rest, then the recorded result under the re-issue's id.
    const rest = await post(
      s.url,
      keyedCall(3, 'chatty', { count: 10 }, 'key-410', {
        lastEventId: data.data.resumeAfter as string,
        progressToken: 'z',
      }),
    );
    expect(progressOf(rest.events).map((m) => [m.params?.progress, m.params?.progressToken])).toEqual([
      [9, 'z'],
      [10, 'z'],
    ]);
    expect(rest.response).toMatchObject({ id: 3, result: { content: [{ text: 'said 10' }] } });
    // A cursor never issued by this key's log: -32602.
    const bad = await post(
      s.url,
      keyedCall(4, 'chatty', { count: 10 }, 'key-410', { lastEventId: 'zz-1-2' }),
    );
    expect(bad.status).toBe(400);
    expect(bad.response).toMatchObject({ error: { code: -32602 } });
  });

  it('a closed stream never aborts; an explicit notifications/cancelled does: 202, watchers and re-issues get -32013', async () => {
    const s = await server();
    const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: s.port }, idleTimeoutMs: 300 });
    cleanup.push(() => proxy.close());
    // Cut at once (no progress asked: idle from the start); the run goes on.
    const cut = await post(proxy.url().toString(), keyedCall(1, 'charge', { amount: 1 }, 'key-cancel'));
    expect(cut.cut).toBe(true);
    const watcher = post(s.url, keyedCall(2, 'charge', { amount: 1 }, 'key-cancel', { lastEventId: null }));
    await new Promise((r) => setTimeout(r, 100));
    const c = await fetch(s.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'mcp-method': 'notifications/cancelled',
        'mcp-protocol-version': '2026-07-28',
      },
      body: JSON.stringify(cancelFor(1, 'key-cancel')),
    });
    expect(c.status).toBe(202);
    expect((await watcher).response).toMatchObject({ id: 2, error: { code: ContinuityErrorCode.CANCELLED } });
    const again = await post(
      s.url,
      keyedCall(3, 'charge', { amount: 1 }, 'key-cancel', { lastEventId: null }),
    );
    expect(again.response).toMatchObject({ id: 3, error: { code: ContinuityErrorCode.CANCELLED } });
    // The body saw its abort signal: no charge.
    const deadline = Date.now() + 5000;
    while (s.ledger.aborted === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(s.ledger.aborted).toBe(1);
    expect(s.ledger.charges).toBe(0);
  }, 20_000);

  it('the memo window frees everything; an unknown re-issue is -32012 until the memo covers the window', async () => {
    const s = await server({ memoWindowMs: 1000 });
    const a = await post(s.url, keyedCall(1, 'chatty', { count: 2 }, 'key-expire', { progressToken: 'x' }));
    expect(a.response).toMatchObject({ result: {} });
    expect(s.memo.stats().entries).toBe(1);
    expect(s.log.stats().sessions).toBe(1);
    const deadline = Date.now() + 10_000;
    while ((s.memo.stats().entries > 0 || s.log.stats().sessions > 0) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect(s.memo.stats()).toEqual({ entries: 0, principals: 0, timers: 0 });
    expect(s.log.stats().sessions).toBe(0);
    expect(s.keyed.stats()).toEqual({ runningHere: 0, waitingLogs: 0 });
    // The process has been up longer than the window: a re-issue of a forgotten key runs (its first
    // attempt was more than a window ago, which the client's own rule excludes).
    const b = await post(s.url, keyedCall(2, 'chatty', { count: 1 }, 'key-expire-2', { lastEventId: null }));
    expect(b.response).toMatchObject({ id: 2, result: {} });
  }, 20_000);

  it('a fresh memory memo answers a re-issue of an unknown key -32012 (it may have run before a restart)', async () => {
    const s = await server({ memoWindowMs: 60_000 });
    const r = await post(s.url, keyedCall(1, 'charge', { amount: 1 }, 'key-unknown', { lastEventId: null }));
    expect(r.response).toMatchObject({ id: 1, error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } });
    expect(s.ledger.started).toBe(0);
  });

  it('the per-principal bound: 429 with Retry-After before anything runs, never evicting', async () => {
    const s = await server({ maxEntriesPerPrincipal: 1 });
    const first = post(s.url, keyedCall(1, 'charge', { amount: 1 }, 'key-bound-1'));
    await untilEntries(s, 1);
    const second = await post(s.url, keyedCall(2, 'charge', { amount: 1 }, 'key-bound-2'));
    expect(second.status).toBe(429);
    expect(Number(second.retryAfter)).toBeGreaterThan(0);
    expect((await first).response).toMatchObject({ result: {} });
    expect(s.ledger.started).toBe(1);
  }, 20_000);

  it('malformed keyed requests are answered 400 -32602 and nothing runs', async () => {
    const s = await server();
    const bad = (mutate: (meta: Record<string, unknown>) => void) => {
      const call = keyedCall(1, 'charge', { amount: 1 }, 'key-bad');
      mutate(call.params?._meta as Record<string, unknown>);
      return post(s.url, call);
    };
    for (const r of [
      await bad((m) => {
        m[ContinuityMeta.idempotencyKey] = 'has space';
      }),
      await bad((m) => {
        m[ContinuityMeta.idempotencyKey] = 'k'.repeat(256);
      }),
      await bad((m) => {
        m[ContinuityMeta.lastEventId] = 7;
      }),
      await bad((m) => {
        delete m[ContinuityMeta.idempotencyKey];
        m[ContinuityMeta.lastEventId] = 'x-1-1';
      }),
    ]) {
      expect(r.status).toBe(400);
      expect(r.response).toMatchObject({ id: 1, error: { code: -32602 } });
    }
    expect(s.ledger.started).toBe(0);
    expect(s.memo.stats().entries).toBe(0);
  });

  it('keys are scoped by principal: the same key of two principals runs twice; one cannot cancel the other', async () => {
    const s = await server();
    const as = (p: string) => ({ 'x-test-principal': p });
    const alice = post(s.url, keyedCall(1, 'charge', { amount: 1 }, 'key-shared'), 20_000, as('alice'));
    const bob = post(s.url, keyedCall(1, 'charge', { amount: 2 }, 'key-shared'), 20_000, as('bob'));
    await untilEntries(s, 2);
    const c = await fetch(s.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-test-principal': 'mallory' },
      body: JSON.stringify(cancelFor(1, 'key-shared')),
    });
    expect(c.status).toBe(202);
    expect((await alice).response).toMatchObject({
      result: { content: [{ text: expect.stringMatching(/^charged 1/) }] },
    });
    expect((await bob).response).toMatchObject({
      result: { content: [{ text: expect.stringMatching(/^charged 2/) }] },
    });
    expect(s.ledger.charges).toBe(2);
  }, 20_000);

  it('unkeyed requests are left to the endpoint', async () => {
    const s = await server();
    const call = keyedCall(1, 'chatty', { count: 1 }, 'x');
    const meta = call.params?._meta as Record<string, unknown>;
    delete meta[ContinuityMeta.idempotencyKey];
    const r = await post(s.url, call);
    expect(r.response).toMatchObject({ id: 1, result: {} });
    expect(s.memo.stats().entries).toBe(0);
  });
});
