import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { memoKey } from '../../machines/continuity-extension.js';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import type { MemoStore } from '../../src/server/memo-store.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { RedisMemoStore } from '../../src/server/redis-memo-store.js';
import { SqliteMemoStore } from '../../src/server/sqlite-memo-store.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

/**
 * A refused key restarted (refused → running, machines/server/keyed-plan.ts `execute-over`) is a running
 * entry again in every store: it never expires, it is among `running()` (so a restarted instance declares
 * it if its owner dies), and it counts for its principal's bound. The refused entry had a window end; the
 * restart must clear it (a review found the Redis store kept the hash's expiry, its principal score and
 * its absence from the running set).
 */
const WINDOW = 1_000;
let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.dispose();
});
const dirs: string[] = [];
const closing: MemoStore[] = [];
afterEach(async () => {
  for (const s of closing.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

let clock = 0;
const now = () => clock;
let prefixes = 0;
const stores: Record<string, () => MemoStore> = {
  memory: () => new MemoryMemoStore({ memoWindowMs: WINDOW, now }),
  sqlite: () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcpc-memo-'));
    dirs.push(dir);
    return new SqliteMemoStore({ path: join(dir, 'memo.db'), memoWindowMs: WINDOW, now });
  },
  redis: () =>
    new RedisMemoStore({
      url: redis.url,
      keyPrefix: `restart-${process.pid}-${++prefixes}:`,
      memoWindowMs: WINDOW,
      now,
    }),
};

const entry = (key: string, over: Partial<MemoEntry> = {}): MemoEntry => ({
  memoKey: memoKey('bob', key),
  principal: 'bob',
  fingerprint: 'f',
  state: 'running',
  owner: 'me',
  logId: `log-${key}-1`,
  epoch: 'e1',
  createdAt: clock,
  ...over,
});

describe.each(Object.keys(stores))('%s memo store: a refused key restarted is running again', (name) => {
  it('never expires, is running(), and counts for its principal', async () => {
    clock = Date.now(); // Redis expires hashes on its own wall clock: start there.
    const store = stores[name as keyof typeof stores]?.() as MemoStore;
    closing.push(store);
    const first = entry('k');
    expect(await store.create(first, 1)).toEqual({ kind: 'created' });
    const refused: MemoEntry = { ...first, state: 'refused', finishedAt: clock };
    expect(await store.replace(refused, first)).toEqual(refused);
    const fresh = entry('k', { logId: 'log-k-2', epoch: 'e2' });
    expect(await store.replace(fresh, refused)).toEqual(fresh);

    // Long past the refused entry's window (and its Redis expiry margin): still running, still counted.
    clock += 10 * WINDOW + 120_000;
    expect(await store.get(fresh.memoKey)).toEqual(fresh);
    expect((await store.running()).map((e) => e.logId)).toEqual(['log-k-2']);
    expect(await store.create(entry('other'), 1)).toMatchObject({ kind: 'full' });
    if (name === 'redis') {
      // Redis itself would have deleted the hash at the refused window's end: no expiry is left on it.
      const client = createClient({ url: redis.url });
      await client.connect();
      try {
        const keys = await client.keys(`restart-${process.pid}-${prefixes}:memo:e:*`);
        expect(keys).toHaveLength(1);
        expect(await client.pTTL(keys[0] as string)).toBe(-1);
      } finally {
        await client.quit();
      }
    }
  });
});
