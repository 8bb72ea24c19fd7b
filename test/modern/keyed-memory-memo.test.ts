import { describe, expect, it } from 'vitest';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import { nextEntry } from '../../machines/server/keyed-plan.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { WakePort } from '../../src/server/wake-port.js';

/**
 * The memory memo keeps an index of its running entries (what the lease tick's `running()` reads) and
 * forgets finished ones through wake-ups on one port, not one Node timer per entry.
 */

class CountingPort extends WakePort {
  asked = 0;
  override after(ms: number, fn: (now: number) => void) {
    this.asked++;
    return super.after(ms, fn);
  }
}

const entry = (n: number, createdAt: number): MemoEntry => ({
  memoKey: `p\u0000k${n}`,
  principal: 'p',
  fingerprint: 'f',
  state: 'running',
  owner: 'me',
  logId: `keyed-${n}`,
  epoch: `e${n}`,
  createdAt,
});

describe('MemoryMemoStore', () => {
  it('running() lists exactly the running entries as they start and finish', async () => {
    const memo = new MemoryMemoStore({ memoWindowMs: 60_000, wakes: new CountingPort() });
    const now = Date.now();
    const entries = [1, 2, 3].map((n) => entry(n, now));
    for (const e of entries) expect(await memo.create(e, 100)).toEqual({ kind: 'created' });
    expect((await memo.running()).map((e) => e.memoKey).sort()).toEqual(entries.map((e) => e.memoKey).sort());
    const finished = nextEntry(
      entries[1] as MemoEntry,
      { type: 'tool.finished', outcome: { kind: 'result', result: {} }, finalSeq: 1 },
      now,
    ) as MemoEntry;
    expect(await memo.replace(finished, { state: 'running', logId: finished.logId })).toBe(finished);
    expect((await memo.running()).map((e) => e.memoKey).sort()).toEqual(
      [entries[0], entries[2]].map((e) => (e as MemoEntry).memoKey).sort(),
    );
    await memo.close();
  });

  it('forgets a finished entry at the end of its window through the port, and tells its log id', async () => {
    const port = new CountingPort();
    const forgotten: string[] = [];
    const memo = new MemoryMemoStore({ memoWindowMs: 30, wakes: port, onForget: (id) => forgotten.push(id) });
    const e = entry(1, Date.now());
    await memo.create(e, 100);
    expect(port.asked).toBe(0); // running: no deadline
    const done = nextEntry(e, { type: 'instance.died' }, Date.now()) as MemoEntry;
    await memo.replace(done, e);
    expect(port.asked).toBe(1);
    const end = Date.now() + 10_000;
    while (forgotten.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(forgotten).toEqual([e.logId]);
    expect(memo.stats()).toEqual({ entries: 0, principals: 0, timers: 0 });
    expect(await memo.running()).toEqual([]);
  });
});
