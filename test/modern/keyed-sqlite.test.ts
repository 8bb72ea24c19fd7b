import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ContinuityErrorCode, memoKey } from '../../machines/continuity-extension.js';
import { SqliteEventLog } from '../../src/server/sqlite-event-log.js';
import { SqliteMemoStore } from '../../src/server/sqlite-memo-store.js';
import { type KeyedServer, keyedCall, type Ledger, post, startKeyedServer } from './keyed-harness.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function instance(dir: string, ledger: Ledger, memoWindowMs = 60_000) {
  const log = new SqliteEventLog({ path: join(dir, 'log.db') });
  const memo = new SqliteMemoStore({ path: join(dir, 'memo.db'), memoWindowMs });
  const s: KeyedServer = await startKeyedServer({ log, memo, ledger, pollMs: 50 });
  let closed = false;
  const stop = async () => {
    if (closed) return;
    closed = true;
    await s.close();
    await memo.close();
    await log.close();
  };
  cleanup.push(stop);
  return { s, log, memo, stop };
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mcpc-keyed-'));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('keyed requests on SQLite: the memo and the key logs survive a restart', () => {
  it('a restart keeps the recorded result: the re-issue gets it after its last event id, nothing runs again', async () => {
    const dir = await tempDir();
    const ledger: Ledger = { charges: 0, aborted: 0, started: 0 };
    const a = await instance(dir, ledger);
    const first = await post(
      a.s.url,
      keyedCall(1, 'charge', { amount: 3 }, 'key-restart', { progressToken: 'a' }),
    );
    expect(first.response).toMatchObject({ id: 1, result: { content: [{ text: 'charged 3 (#1)' }] } });
    const second = first.events[1]?.id as string;
    await a.stop();

    const b = await instance(dir, ledger);
    const r = await post(
      b.s.url,
      keyedCall(2, 'charge', { amount: 3 }, 'key-restart', { lastEventId: second, progressToken: 'b' }),
    );
    expect(r.response).toMatchObject({ id: 2, result: { content: [{ text: 'charged 3 (#1)' }] } });
    // Exactly the events after the cursor: progress 3 and 4 (with the re-issue's token), then the result
    // under the id it had on the first attempt.
    expect(r.events.map((e) => e.id)).toEqual(first.events.slice(2).map((e) => e.id));
    expect(
      r.events
        .filter((e) => 'method' in e.message)
        .map((e) => (e.message as unknown as { params: { progressToken: string } }).params.progressToken),
    ).toEqual(['b', 'b']);
    expect(ledger.started).toBe(1);
    expect(ledger.charges).toBe(1);
    // Other arguments are still refused after the restart.
    const other = await post(b.s.url, keyedCall(3, 'charge', { amount: 4 }, 'key-restart'));
    expect(other.status).toBe(409);
  }, 20_000);

  it('a process that stops mid-run: the next one finds the entry running, declares it outcome unknown, runs nothing', async () => {
    const dir = await tempDir();
    const ledger: Ledger = { charges: 0, aborted: 0, started: 0 };
    const a = await instance(dir, ledger);
    const pending = post(a.s.url, keyedCall(1, 'charge', { amount: 9 }, 'key-died'));
    const deadline = Date.now() + 5000;
    while (a.memo.count() === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await a.stop();
    await pending;
    const b = await instance(dir, ledger);
    const r = await post(b.s.url, keyedCall(2, 'charge', { amount: 9 }, 'key-died', { lastEventId: null }));
    expect(r.response).toMatchObject({ id: 2, error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } });
    expect(await b.memo.running()).toEqual([]);
    expect((await b.memo.get(memoKey('', 'key-died')))?.state).toBe('outcomeUnknown');
    expect(ledger.started).toBe(1);
  }, 20_000);

  it('entries and key logs are deleted once their window passed', async () => {
    const dir = await tempDir();
    const ledger: Ledger = { charges: 0, aborted: 0, started: 0 };
    const a = await instance(dir, ledger, 300);
    const r = await post(a.s.url, keyedCall(1, 'chatty', { count: 3 }, 'key-sweep', { progressToken: 'x' }));
    expect(r.response).toMatchObject({ result: {} });
    expect(a.memo.count()).toBe(1);
    const entry = await a.memo.get(memoKey('', 'key-sweep'));
    expect(await a.log.window(entry?.logId as string, 1)).toMatchObject({ head: 4, finished: true });
    const deadline = Date.now() + 10_000;
    while (a.memo.count() > 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    expect(a.memo.count()).toBe(0);
    while ((await a.log.window(entry?.logId as string, 1)) !== undefined && Date.now() < deadline)
      await new Promise((res) => setTimeout(res, 50));
    expect(await a.log.window(entry?.logId as string, 1)).toBeUndefined();
  }, 20_000);
});
