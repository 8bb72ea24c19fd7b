import { connectModernClient } from '../lib/modern.js';
import { startRemote } from '../lib/remote.js';
import { bounded, pool } from '../lib/stats.js';

/**
 * Row 4 on MCP 2026-07-28 (issue 25): what a keyed call leaves in the server's heap while its memo window
 * is open. Our server (memory stores, its own process) takes `calls` keyed `echo` calls from the v2
 * `Client` with `continuityFetch()`, 50 at a time; its heap (after gc) is read before, halfway and at the
 * end, with the memo's entry count and the events its log retains. Two halves: the cost per call should
 * not depend on how full the memo is, so 100,000 calls can be stated from it.
 */
export interface MemoMemoryResult {
  readonly calls: number;
  /** Heap growth per keyed call, over the first half and over the second half of the calls. */
  readonly bytesPerCallFirstHalf: number;
  readonly bytesPerCallSecondHalf: number;
  /** Over all the calls. */
  readonly bytesPerCall: number;
  /** Memo entries and retained events added per keyed call. */
  readonly entriesPerCall: number;
  readonly eventsPerCall: number;
  readonly ms: number;
}

export async function memoMemory(calls: number, timeoutMs: number): Promise<MemoMemoryResult> {
  const remote = await startRemote('ours-2026');
  const c = await connectModernClient(remote.url, true);
  try {
    let next = 0;
    const call = async () => {
      const text = `hello ${next++}`;
      const result = await c.client.callTool({ name: 'echo', arguments: { text } }, { timeout: timeoutMs });
      const got = (result.content as Array<{ text?: string }>)[0]?.text;
      if (got !== text) throw new Error(`expected ${text}, got ${JSON.stringify(result)}`);
    };
    // Warm-up: lazily built structures (zod, xstate, undici) are not per-call costs.
    await bounded(pool(200, 50, call), timeoutMs, 'warm-up');
    const read = async () => {
      const [heap, stats] = [await remote.heap(), await remote.stats()];
      return { heap: heap.heapUsed, entries: stats.memo?.entries ?? 0, events: stats.log?.events ?? 0 };
    };
    const before = await read();
    const half = Math.floor(calls / 2);
    const start = performance.now();
    await bounded(pool(half, 50, call), timeoutMs, `${half} keyed calls`);
    const middle = await read();
    await bounded(pool(calls - half, 50, call), timeoutMs, `${calls - half} keyed calls`);
    const ms = performance.now() - start;
    const after = await read();
    return {
      calls,
      bytesPerCallFirstHalf: (middle.heap - before.heap) / half,
      bytesPerCallSecondHalf: (after.heap - middle.heap) / (calls - half),
      bytesPerCall: (after.heap - before.heap) / calls,
      entriesPerCall: (after.entries - before.entries) / calls,
      eventsPerCall: (after.events - before.events) / calls,
      ms,
    };
  } finally {
    await c.close();
    await remote.close();
  }
}
