import { connectModernClient } from '../lib/modern.js';
import { startRemote } from '../lib/remote.js';
import { bounded, pool, summarize } from '../lib/stats.js';
import { type CallsResult, freshRate } from './calls.js';
import type { ThroughputResult } from './throughput.js';

/**
 * Rows 1 and 2 on MCP 2026-07-28: the official v2 server (in its own process, bench/serve.ts `v2`) and the
 * official v2 `Client` pinned to 2026-07-28, measured as rows 1 and 2 measure the 2025 stacks.
 */

const WARMUP = 2_000;

/** `v2`: the official server and client; `ours-2026`: createContinuityServer + the v2 Client with continuityFetch. */
export type ModernKind = 'v2' | 'ours-2026';

/** Row 1: one `stream {count}` call; every progress notification must arrive, in order. */
export async function notifyModern(
  kind: ModernKind,
  count: number,
  timeoutMs: number,
): Promise<ThroughputResult> {
  const server = await startRemote(kind);
  const c = await connectModernClient(server.url, kind === 'ours-2026');
  try {
    const run = async (n: number) => {
      let received = 0;
      let last = 0;
      let outOfOrder = 0;
      const start = performance.now();
      const result = await bounded(
        c.client.callTool(
          { name: 'stream', arguments: { count: n } },
          {
            onprogress: (p) => {
              received++;
              if (p.progress !== last + 1) outOfOrder++;
              last = p.progress;
            },
            timeout: timeoutMs,
            resetTimeoutOnProgress: true,
          },
        ),
        timeoutMs,
        `v2: stream ${n}`,
      );
      const ms = performance.now() - start;
      const text = (result.content as Array<{ text?: string }>)[0]?.text;
      if (text !== `sent ${n}`) throw new Error(`unexpected result ${JSON.stringify(result)}`);
      if (outOfOrder > 0) throw new Error(`${outOfOrder} notifications out of order`);
      return { ms, received };
    };
    await run(WARMUP);
    const { ms, received } = await run(count);
    if (received !== count) throw new Error(`received ${received} of ${count} notifications`);
    return {
      count,
      received,
      ms,
      perSecond: count / (ms / 1000),
      errors: [...(await server.stats()).errors, ...c.errors],
    };
  } finally {
    await c.close();
    await server.close();
  }
}

/**
 * Row 2: `echo` calls, `concurrency` callers sharing one v2 `Client`; after a 500-call warm-up. `tool`
 * `peek` is the read-only `echo`: with `continuityFetch` its calls go unkeyed.
 */
export async function callsModern(
  kind: ModernKind,
  total: number,
  concurrency: number,
  timeoutMs: number,
  tool: 'echo' | 'peek' = 'echo',
  freshCalls = 1_000,
): Promise<CallsResult> {
  const server = await startRemote(kind);
  const c = await connectModernClient(server.url, kind === 'ours-2026');
  try {
    const latencies: number[] = [];
    const completions: number[] = [];
    const call = async (i: number) => {
      const start = performance.now();
      const text = `hello ${i}`;
      const result = await c.client.callTool({ name: tool, arguments: { text } }, { timeout: timeoutMs });
      latencies.push(performance.now() - start);
      completions.push(performance.now());
      const got = (result.content as Array<{ text?: string }>)[0]?.text;
      if (got !== text) throw new Error(`call ${i}: expected ${text}, got ${JSON.stringify(result)}`);
    };
    // `continuityFetch` learns the tools' annotations from `tools/list`: unlisted, `peek` would be keyed.
    if (tool === 'peek') await bounded(c.client.listTools(), timeoutMs, 'v2: tools/list');
    const freshPerSecond = await freshRate(freshCalls, concurrency, call, timeoutMs, kind);
    latencies.length = 0;
    completions.length = 0;
    const start = performance.now();
    await bounded(pool(total, concurrency, call), timeoutMs, `v2: ${total} calls`);
    const ms = performance.now() - start;
    const s = summarize(latencies);
    const window = Math.min(1_000, total);
    const windowsPerSecond: number[] = [];
    for (let end = window - 1; end < completions.length; end += window) {
      const from = end - window < 0 ? start : (completions[end - window] as number);
      windowsPerSecond.push(window / (((completions[end] as number) - from) / 1000));
    }
    return {
      total,
      concurrency,
      ms,
      perSecond: total / (ms / 1000),
      latencyMs: { median: s.median, p99: s.p99 },
      window,
      firstWindowPerSecond: windowsPerSecond[0] ?? Number.NaN,
      lastWindowPerSecond: windowsPerSecond.at(-1) ?? Number.NaN,
      windowsPerSecond,
      freshPerSecond,
      errors: [...(await server.stats()).errors, ...c.errors],
    };
  } finally {
    await c.close();
    await server.close();
  }
}
