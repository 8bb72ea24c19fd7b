import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import type { MemoStore } from '../../src/server/memo-store.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { RedisMemoStore } from '../../src/server/redis-memo-store.js';
import { SqliteMemoStore } from '../../src/server/sqlite-memo-store.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

/**
 * Issue 22, item 5: admitting a new key counts the principal's live entries in the store; it never reads
 * them. `SqliteMemoStore.create` used to read and JSON.parse every live entry of the principal for each
 * new key (3.5–5.8 ms per key at 1,500 entries, 20–50 ms near the 10,000 bound), and the Redis store
 * sent every entry's score back once the bound was reached. The assertions are on what cannot vary with
 * the machine's load: the entries parsed, the bytes Redis sends back.
 */

const WINDOW = 60_000;
const HELD = 2_000;
const NOW = 1_000_000;

const entry = (i: number, over: Partial<MemoEntry> = {}): MemoEntry => ({
  memoKey: `p|k${i}`,
  principal: 'p',
  fingerprint: `f${i}`,
  state: 'running',
  owner: 'me',
  logId: `keyed-${i}`,
  epoch: `e${i}`,
  createdAt: NOW,
  ...over,
});

/** `HELD` live entries for principal `p`: the first `finished` of them finished at `NOW - age`. */
async function fill(store: MemoStore, finished: number, age: number): Promise<void> {
  for (let i = 0; i < HELD; i++) {
    expect((await store.create(entry(i), HELD)).kind).toBe('created');
    if (i < finished) {
      const done: MemoEntry = { ...entry(i), state: 'committed', finishedAt: NOW - age + i };
      expect(await store.replace(done, entry(i))).toEqual(done);
    }
  }
}

/** The JSON.parse calls `work` makes (the store's own reads of entries). */
async function parsesDuring<T>(work: () => Promise<T>): Promise<{ result: T; parses: number }> {
  const spy = vi.spyOn(JSON, 'parse');
  try {
    const result = await work();
    return { result, parses: spy.mock.calls.length };
  } finally {
    spy.mockRestore();
  }
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const local: Record<string, () => MemoStore> = {
  memory: () => new MemoryMemoStore({ memoWindowMs: WINDOW, now: () => NOW }),
  sqlite: () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcpc-memo-cost-'));
    dirs.push(dir);
    return new SqliteMemoStore({ path: join(dir, 'memo.db'), memoWindowMs: WINDOW, now: () => NOW });
  },
};

describe.each(Object.entries(local))('%s memo store: a new key is admitted by a count', (_name, open) => {
  it(`with ${HELD} live entries, a new key is created without parsing any of them`, async () => {
    const store = open();
    await fill(store, HELD / 2, 1_000);
    const { result, parses } = await parsesDuring(() => store.create(entry(HELD), HELD + 1));
    expect(result).toEqual({ kind: 'created' });
    expect(parses).toBe(0);
    await store.close();
  });

  it('at the bound: 429 until the first window ends, still without parsing; past windows do not count', async () => {
    const store = open();
    // The first finished entry finished at NOW - 40 s: its window (60 s) ends in 20 s.
    await fill(store, 10, 40_000);
    const full = await parsesDuring(() => store.create(entry(HELD), HELD));
    expect(full.result).toEqual({ kind: 'full', retryAfterSeconds: 20 });
    expect(full.parses).toBe(0);
    await store.close();
  });

  it('at the bound with every entry running: 429 for a whole window', async () => {
    const store = open();
    await fill(store, 0, 0);
    expect(await store.create(entry(HELD), HELD)).toEqual({ kind: 'full', retryAfterSeconds: 60 });
    await store.close();
  });
});

describe('SQLite memo store: entries past their window free the bound', () => {
  it('a principal whose finished entries are past their window is admitted again', async () => {
    let now = NOW;
    const dir = mkdtempSync(join(tmpdir(), 'mcpc-memo-cost-'));
    dirs.push(dir);
    const store = new SqliteMemoStore({ path: join(dir, 'memo.db'), memoWindowMs: WINDOW, now: () => now });
    await fill(store, 3, 0);
    expect((await store.create(entry(HELD), HELD)).kind).toBe('full');
    now = NOW + WINDOW + 10;
    expect(await store.create(entry(HELD), HELD)).toEqual({ kind: 'created' });
    await store.close();
  });
});

// One throwaway redis-server for the Redis rows. Without redis-server installed this fails, never skips.
describe('Redis memo store: the bound is counted in Redis', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.dispose();
  });

  /** Bytes the server has sent to all its clients (INFO stats). */
  async function sentBytes(probe: ReturnType<typeof createClient>): Promise<number> {
    const info = await probe.info('stats');
    return Number(/total_net_output_bytes:(\d+)/.exec(info)?.[1]);
  }

  it(`at the bound (${HELD} entries) a refused key costs a reply of constant size, not one score per entry`, async () => {
    const store = new RedisMemoStore({ url: redis.url, memoWindowMs: WINDOW, now: () => NOW });
    const probe = createClient({ url: redis.url });
    await probe.connect();
    try {
      await fill(store, 10, 40_000);
      // What one INFO costs alone, then one INFO plus one refused create.
      const a = await sentBytes(probe);
      const b = await sentBytes(probe);
      const result = await store.create(entry(HELD), HELD);
      const c = await sentBytes(probe);
      expect(result).toEqual({ kind: 'full', retryAfterSeconds: 20 });
      const createBytes = c - b - (b - a);
      console.log(`Redis: a refused create at ${HELD} entries sent ~${createBytes} bytes`);
      // One score per entry would be over 4 bytes each (`inf`, or a 13-digit window end).
      expect(createBytes).toBeLessThan(1_000);
      // Below the bound nothing changed: created.
      expect(await store.create(entry(HELD + 1), HELD + 2)).toEqual({ kind: 'created' });
      // Another principal whose entries all run: nothing frees before a whole window.
      const q = (i: number) => entry(i, { principal: 'q', memoKey: `q|k${i}` });
      for (let i = 0; i < 3; i++) expect((await store.create(q(i), 3)).kind).toBe('created');
      expect(await store.create(q(3), 3)).toEqual({ kind: 'full', retryAfterSeconds: 60 });
    } finally {
      await probe.close();
      await store.close();
    }
  });
});
