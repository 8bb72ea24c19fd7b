import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import { SqliteMemoStore } from '../../src/server/sqlite-memo-store.js';

/**
 * `SqliteMemoStore.liveEntries` (the `server.memo_entries` gauge) counts from the per-principal row counts
 * less the rows past their window, never by scanning the live ones (issue 29). What it must still say:
 * running and in-window entries are live; an entry past its window is not, swept or not; a reopened file
 * counts the same.
 */
const dir = mkdtempSync(join(tmpdir(), 'mcpc-live-entries-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const WINDOW = 60_000;
const entry = (key: string, principal: string, now: number): MemoEntry => ({
  memoKey: key,
  principal,
  fingerprint: `f-${key}`,
  state: 'running',
  owner: 'me',
  logId: `keyed-${key}`,
  epoch: 'e',
  createdAt: now,
});

describe('SqliteMemoStore.liveEntries', () => {
  it('counts running and in-window entries, not ones past their window, before and after a sweep', async () => {
    let now = 1_000_000;
    const path = join(dir, 'memo.db');
    const store = new SqliteMemoStore({ path, memoWindowMs: WINDOW, now: () => now });
    expect(store.liveEntries()).toBe(0);
    const a = entry('a', 'p', now);
    for (const e of [a, entry('b', 'p', now), entry('c', 'q', now)]) {
      expect((await store.create(e, 10)).kind).toBe('created');
    }
    expect(store.liveEntries()).toBe(3);
    await store.replace({ ...a, state: 'committed', finishedAt: now }, a);
    now += WINDOW - 1;
    expect(store.liveEntries()).toBe(3);
    now += 2;
    // Past its window, its row still held (not swept yet): not live.
    expect(store.count()).toBe(3);
    expect(store.liveEntries()).toBe(2);
    // The same key created again replaces the expired row: one row, live.
    expect((await store.create(entry('a', 'p', now), 10)).kind).toBe('created');
    expect(store.liveEntries()).toBe(3);
    await store.replace(
      { ...entry('a', 'p', now), state: 'committed', finishedAt: now },
      entry('a', 'p', now),
    );
    now += WINDOW + 1;
    expect(store.liveEntries()).toBe(2);
    expect(await store.sweep()).toEqual(['keyed-a']);
    expect(store.liveEntries()).toBe(2);
    await store.close();
    const reopened = new SqliteMemoStore({ path, memoWindowMs: WINDOW, now: () => now });
    expect(reopened.liveEntries()).toBe(2);
    await reopened.close();
    expect(reopened.liveEntries()).toBe(0);
  });
});
