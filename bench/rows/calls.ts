import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startRemote } from '../lib/remote.js';
import { type ClientKind, connectClient, type ServerKind } from '../lib/stacks.js';
import { bounded, pool, summarize } from '../lib/stats.js';

/** Row 2: small `echo` tool calls per second, `concurrency` callers sharing one Client (one session). */
export interface CallsResult {
  readonly total: number;
  readonly concurrency: number;
  readonly ms: number;
  readonly perSecond: number;
  /** Per-call latency under that load. */
  readonly latencyMs: { median: number; p99: number };
  /** Calls per second over the first and the last `window` completions: does a session slow down as it ages? */
  readonly window: number;
  readonly firstWindowPerSecond: number;
  readonly lastWindowPerSecond: number;
  /** Calls per second over each consecutive `window` completions, in order: how a stack warms up. */
  readonly windowsPerSecond: number[];
  /**
   * Calls per second over the first `freshCalls` calls the fresh client and server processes made (the
   * warm-up, timed on its own): how a process that was just started does before its JIT has compiled.
   */
  readonly freshPerSecond: number;
  readonly errors: string[];
}

/**
 * Runs the first `count` calls of a fresh process (the warm-up; issue 25 names 1,000: "the first 1,000
 * calls of a fresh process") and returns their rate.
 */
export async function freshRate(
  count: number,
  concurrency: number,
  call: (i: number) => Promise<void>,
  timeoutMs: number,
  what: string,
): Promise<number> {
  const start = performance.now();
  await bounded(pool(count, concurrency, call), timeoutMs, `${what}: first ${count} calls`);
  return count / ((performance.now() - start) / 1000);
}

export async function callsStack(
  serverKind: ServerKind,
  clientKind: ClientKind,
  total: number,
  concurrency: number,
  timeoutMs: number,
  freshCalls = 1_000,
): Promise<CallsResult> {
  const server = await startRemote(serverKind);
  const client = await connectClient(clientKind, server.url);
  try {
    const latencies: number[] = [];
    const completions: number[] = [];
    const call = async (i: number) => {
      const start = performance.now();
      const text = `hello ${i}`;
      const result = await client.client.callTool(
        { name: 'echo', arguments: { text } },
        CallToolResultSchema,
        {
          timeout: timeoutMs,
        },
      );
      latencies.push(performance.now() - start);
      completions.push(performance.now());
      const got = (result.content as Array<{ text?: string }>)[0]?.text;
      if (got !== text) throw new Error(`call ${i}: expected ${text}, got ${JSON.stringify(result)}`);
    };
    const freshPerSecond = await freshRate(
      freshCalls,
      concurrency,
      call,
      timeoutMs,
      `${serverKind}/${clientKind}`,
    );
    latencies.length = 0;
    completions.length = 0;
    const start = performance.now();
    await bounded(pool(total, concurrency, call), timeoutMs, `${serverKind}/${clientKind}: ${total} calls`);
    const ms = performance.now() - start;
    const s = summarize(latencies);
    const window = Math.min(1_000, total);
    const last = completions.length - 1;
    const firstWindowPerSecond = window / (((completions[window - 1] as number) - start) / 1000);
    const lastWindowPerSecond =
      window / (((completions[last] as number) - (completions[last - window] ?? start)) / 1000);
    const windowsPerSecond: number[] = [];
    for (let end = window - 1; end < completions.length; end += window) {
      const from = end - window < 0 ? start : (completions[end - window] as number);
      windowsPerSecond.push(window / (((completions[end] as number) - from) / 1000));
    }
    return {
      total,
      concurrency,
      windowsPerSecond,
      freshPerSecond,
      ms,
      perSecond: total / (ms / 1000),
      latencyMs: { median: s.median, p99: s.p99 },
      window,
      firstWindowPerSecond,
      lastWindowPerSecond,
      errors: [...(await server.stats()).errors, ...client.errors],
    };
  } finally {
    await client.close();
    await server.close();
  }
}
