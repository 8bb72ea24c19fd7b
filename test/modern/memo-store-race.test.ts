import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import type { MemoStore } from '../../src/server/memo-store.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { SqliteMemoStore } from '../../src/server/sqlite-memo-store.js';

/**
 * The memo's two atomic operations under a race: two first attempts of one key created at once must
 * give exactly one `created` (one body runs), and two compare-and-sets from the same state exactly one
 * winner. The keyed runtime calls them concurrently (two requests, two instances), so a store that waits
 * between its read and its write runs a charge twice.
 */
const WINDOW = 60_000;
const entry = (over: Partial<MemoEntry> = {}): MemoEntry => ({
  memoKey: '0:|k1',
  principal: '',
  fingerprint: 'f',
  state: 'running',
  owner: 'me',
  logId: 'log-1',
  epoch: 'e1',
  createdAt: Date.now(),
  ...over,
});

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const stores: Record<string, () => MemoStore> = {
  memory: () => new MemoryMemoStore({ memoWindowMs: WINDOW }),
  sqlite: () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcpc-memo-'));
    dirs.push(dir);
    return new SqliteMemoStore({ path: join(dir, 'memo.db'), memoWindowMs: WINDOW });
  },
};

describe.each(Object.entries(stores))('%s memo store under a race', (_name, open) => {
  it('two creates of one key at once: exactly one is created, the other sees it', async () => {
    const store = open();
    const results = await Promise.all([
      store.create(entry({ logId: 'a' }), 10),
      store.create(entry({ logId: 'b' }), 10),
    ]);
    expect(results.filter((r) => r.kind === 'created')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'exists')).toHaveLength(1);
    await store.close();
  });

  it('two compare-and-sets from running at once: exactly one wins', async () => {
    const store = open();
    await store.create(entry(), 10);
    const now = Date.now();
    const [a, b] = await Promise.all([
      store.replace(
        entry({ state: 'committed', finishedAt: now, outcome: { kind: 'result', result: 1 } }),
        entry(),
      ),
      store.replace(entry({ state: 'cancelled', finishedAt: now }), entry()),
    ]);
    const stored = await store.get(entry().memoKey);
    // The loser is told what is stored now; what is stored is the winner's.
    expect(a?.state).toBe(stored?.state);
    expect(b?.state).toBe(stored?.state);
    expect(stored?.state).toBe('committed');
    await store.close();
  });
});
