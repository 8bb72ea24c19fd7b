import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { type RedisServer, startRedisServer } from '../../test/support/redis-server.js';
import { type RoundRobinProxy, startRoundRobinProxy } from '../../test/support/round-robin-proxy.js';
import { connectModernClient } from '../lib/modern.js';
import { countsSince, type RedisMeter, type RedisMeterCounts, startRedisMeter } from '../lib/redis-meter.js';
import { type RemoteServer, startRemote } from '../lib/remote.js';
import { connectClient } from '../lib/stacks.js';
import { bounded, pool, summarize } from '../lib/stats.js';
import type { StoreKind } from '../serve.js';

/**
 * Row 6 (issues 25 and 29): what a store costs. Our server (each instance in its own process) with its
 * event log and memo in memory, in a SQLite file, or in a real `redis-server` started here; Redis traffic
 * goes through a counting relay (lib/redis-meter.ts), so commands, bytes and round trips are counted on
 * the wire. Round trips per call are measured with one call in flight (writes the instances flushed).
 */

/** Where the servers keep their state, and the Redis meter when it is Redis. */
interface Backing {
  readonly options: { store: StoreKind; sqlitePath?: string; redisUrl?: string; keyPrefix?: string };
  readonly meter?: RedisMeter;
  close(): Promise<void>;
}

async function backing(store: StoreKind): Promise<Backing> {
  if (store === 'sqlite') {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-bench-sqlite-'));
    return {
      options: { store, sqlitePath: join(dir, 'state.db') },
      close: () => rm(dir, { recursive: true, force: true }),
    };
  }
  if (store === 'redis') {
    const redis: RedisServer = await startRedisServer();
    const meter = await startRedisMeter(redis.port);
    return {
      options: { store, redisUrl: meter.url, keyPrefix: 'bench:' },
      meter,
      async close() {
        await meter.close();
        await redis.dispose();
      },
    };
  }
  return { options: { store }, close: async () => undefined };
}

/** Redis traffic per unit of work (per call, or per notification). */
export interface RedisCost {
  readonly commands: number;
  readonly bytesSent: number;
  readonly bytesReceived: number;
  /** Batches flushed per unit: round trips, when one unit is in flight at a time. */
  readonly writes: number;
  /** Commands by name, per unit, largest first. */
  readonly byName: string;
}

function perUnit(c: RedisMeterCounts, units: number): RedisCost {
  return {
    commands: c.commands / units,
    bytesSent: c.bytesSent / units,
    bytesReceived: c.bytesReceived / units,
    writes: c.writes / units,
    byName: Object.entries(c.byName)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${(v / units).toFixed(2)}`)
      .join(', '),
  };
}

/** Measures `units` of work with the meter (when there is one). */
async function metered<T>(
  meter: RedisMeter | undefined,
  units: number,
  work: () => Promise<T>,
): Promise<{ value: T; cost?: RedisCost }> {
  const before = meter?.counts();
  const value = await work();
  if (!meter || !before) return { value };
  return { value, cost: perUnit(countsSince(before, meter.counts()), units) };
}

export interface StoreCallsResult {
  readonly store: StoreKind;
  readonly instances: number;
  readonly total: number;
  readonly concurrency: number;
  readonly perSecond: number;
  readonly latencyMs: { median: number; p99: number };
  /** Calls per second over each consecutive `window` completions. */
  readonly windowsPerSecond: number[];
  readonly window: number;
  /** Redis traffic per call under the load above. */
  readonly loaded?: RedisCost;
  /** Redis traffic per call with one call in flight: `writes` is round trips. */
  readonly sequential?: RedisCost;
  readonly errors: string[];
}

/** Starts `instances` server processes on one store (behind a round-robin balancer when more than one). */
async function servers(
  kind: 'ours' | 'ours-2026',
  b: Backing,
  instances: number,
  proxy: boolean,
): Promise<{ url: string; remotes: RemoteServer[]; balancer?: RoundRobinProxy }> {
  const remotes: RemoteServer[] = [];
  for (let i = 0; i < instances; i++) remotes.push(await startRemote(kind, b.options));
  if (!proxy) return { url: remotes[0]?.url as string, remotes };
  const balancer = await startRoundRobinProxy(remotes.map((r) => Number(new URL(r.url).port)));
  return { url: balancer.url, remotes, balancer };
}

function windows(completions: readonly number[], start: number, window = 1_000): number[] {
  const out: number[] = [];
  for (let end = window - 1; end < completions.length; end += window) {
    const from = end - window < 0 ? start : (completions[end - window] as number);
    out.push(window / (((completions[end] as number) - from) / 1000));
  }
  return out;
}

/** A throughput run of `call` plus a sequential run for round trips; shared by the 2025 and 2026 rows. */
async function callsRun(
  meter: RedisMeter | undefined,
  call: (i: number) => Promise<void>,
  total: number,
  concurrency: number,
  sequentialCalls: number,
  timeoutMs: number,
  window = 1_000,
): Promise<Omit<StoreCallsResult, 'store' | 'instances' | 'errors'>> {
  await bounded(pool(Math.min(200, total), concurrency, call), timeoutMs, 'warm-up');
  const latencies: number[] = [];
  const completions: number[] = [];
  const timed = async (i: number) => {
    const t = performance.now();
    await call(i);
    latencies.push(performance.now() - t);
    completions.push(performance.now());
  };
  const start = performance.now();
  const loaded = await metered(meter, total, () =>
    bounded(pool(total, concurrency, timed), timeoutMs, `${total} calls`),
  );
  const ms = performance.now() - start;
  const sequential = await metered(meter, sequentialCalls, () =>
    bounded(pool(sequentialCalls, 1, call), timeoutMs, `${sequentialCalls} sequential calls`),
  );
  const s = summarize(latencies);
  return {
    total,
    concurrency,
    perSecond: total / (ms / 1000),
    latencyMs: { median: s.median, p99: s.p99 },
    windowsPerSecond: windows(completions, start, Math.min(window, total)),
    window: Math.min(window, total),
    loaded: loaded.cost,
    sequential: sequential.cost,
  };
}

/** 2025 `echo` calls, one session, `concurrency` callers; `instances` > 1 (or `proxy`) through a balancer. */
export async function storeCalls(
  store: StoreKind,
  instances: number,
  proxy: boolean,
  total: number,
  concurrency: number,
  timeoutMs: number,
): Promise<StoreCallsResult> {
  const b = await backing(store);
  const s = await servers('ours', b, instances, proxy || instances > 1);
  const client = await connectClient('ours', s.url);
  try {
    const call = async (i: number) => {
      const text = `hello ${i}`;
      const result = await client.client.callTool(
        { name: 'echo', arguments: { text } },
        CallToolResultSchema,
        {
          timeout: timeoutMs,
        },
      );
      const got = (result.content as Array<{ text?: string }>)[0]?.text;
      if (got !== text) throw new Error(`call ${i}: expected ${text}, got ${JSON.stringify(result)}`);
    };
    const run = await callsRun(b.meter, call, total, concurrency, 100, timeoutMs);
    const errors = [...client.errors];
    for (const r of s.remotes) errors.push(...(await r.stats()).errors);
    return { store, instances, ...run, errors };
  } finally {
    await client.close();
    await s.balancer?.close();
    for (const r of s.remotes) await r.close();
    await b.close();
  }
}

/**
 * 2026-07-28 calls through our endpoint with the continuity extension (every call keyed); `instances` > 1
 * behind the round-robin balancer. `window`: the calls per rate in `windowsPerSecond` (the memo-fill row).
 */
export async function storeKeyedCalls(
  store: StoreKind,
  instances: number,
  total: number,
  concurrency: number,
  timeoutMs: number,
  window = 1_000,
): Promise<StoreCallsResult> {
  const b = await backing(store);
  const s = await servers('ours-2026', b, instances, instances > 1);
  const c = await connectModernClient(s.url, true);
  try {
    const call = async (i: number) => {
      const text = `hello ${i}`;
      const result = await c.client.callTool({ name: 'echo', arguments: { text } }, { timeout: timeoutMs });
      const got = (result.content as Array<{ text?: string }>)[0]?.text;
      if (got !== text) throw new Error(`call ${i}: expected ${text}, got ${JSON.stringify(result)}`);
    };
    const run = await callsRun(b.meter, call, total, concurrency, 100, timeoutMs, window);
    const errors = [...c.errors];
    for (const r of s.remotes) errors.push(...(await r.stats()).errors);
    return { store, instances, ...run, errors };
  } finally {
    await c.close();
    await s.balancer?.close();
    for (const r of s.remotes) await r.close();
    await b.close();
  }
}

export interface StoreNotifyResult {
  readonly store: StoreKind;
  readonly count: number;
  readonly perSecond: number;
  /** Redis traffic per notification. */
  readonly cost?: RedisCost;
  readonly errors: string[];
}

/** One 2025 `stream {count}` call: notifications per second, and what each costs Redis. */
export async function storeNotify(
  store: StoreKind,
  count: number,
  timeoutMs: number,
): Promise<StoreNotifyResult> {
  const b = await backing(store);
  const s = await servers('ours', b, 1, false);
  const client = await connectClient('ours', s.url);
  try {
    const run = async (n: number) => {
      let received = 0;
      const result = await client.client.callTool(
        { name: 'stream', arguments: { count: n } },
        CallToolResultSchema,
        {
          timeout: timeoutMs,
          resetTimeoutOnProgress: true,
          onprogress: () => {
            received++;
          },
        },
      );
      const text = (result.content as Array<{ text?: string }>)[0]?.text;
      if (text !== `sent ${n}` || received !== n) throw new Error(`got ${received} of ${n}: ${text}`);
    };
    await bounded(run(Math.min(1_000, count)), timeoutMs, 'warm-up');
    const start = performance.now();
    const { cost } = await metered(b.meter, count, () => bounded(run(count), timeoutMs, `stream ${count}`));
    const ms = performance.now() - start;
    const errors = [...client.errors];
    for (const r of s.remotes) errors.push(...(await r.stats()).errors);
    return { store, count, perSecond: count / (ms / 1000), cost, errors };
  } finally {
    await client.close();
    for (const r of s.remotes) await r.close();
    await b.close();
  }
}

export interface SessionAgeResult {
  readonly calls: number;
  /** Per call, over the calls just before each mark (`from`..`to`, 1-based), one call in flight. */
  readonly marks: Array<{ from: number; to: number; perSecond: number; cost: RedisCost }>;
  readonly errors: string[];
}

/**
 * One 2025 session on Redis making `calls` calls: Redis traffic per call over the 100 calls ending at
 * each mark, made one at a time (the calls in between, 50 at a time). Flat when a call's cost does not
 * depend on the session's age.
 */
export async function storeSessionAge(
  calls: number,
  marks: readonly number[],
  timeoutMs: number,
): Promise<SessionAgeResult> {
  const b = await backing('redis');
  const s = await servers('ours', b, 1, false);
  const client = await connectClient('ours', s.url);
  const meter = b.meter as RedisMeter;
  try {
    const call = async (i: number) => {
      await client.client.callTool(
        { name: 'echo', arguments: { text: `hello ${i}` } },
        CallToolResultSchema,
        {
          timeout: timeoutMs,
        },
      );
    };
    const out: SessionAgeResult['marks'] = [];
    let done = 0;
    for (const mark of [...marks].filter((m) => m <= calls).sort((x, y) => x - y)) {
      const from = Math.max(done, mark - 100);
      // The calls between marks only age the session: 50 at a time, to keep the row inside the time budget.
      if (from > done) await bounded(pool(from - done, 50, call), timeoutMs, `calls ${done + 1}..${from}`);
      const start = performance.now();
      const { cost } = await metered(meter, mark - from, () =>
        bounded(pool(mark - from, 1, call), timeoutMs, `calls ${from + 1}..${mark}`),
      );
      const ms = performance.now() - start;
      out.push({ from: from + 1, to: mark, perSecond: (mark - from) / (ms / 1000), cost: cost as RedisCost });
      done = mark;
    }
    const errors = [...client.errors];
    for (const r of s.remotes) errors.push(...(await r.stats()).errors);
    return { calls, marks: out, errors };
  } finally {
    await client.close();
    for (const r of s.remotes) await r.close();
    await b.close();
  }
}
