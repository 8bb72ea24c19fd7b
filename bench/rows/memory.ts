import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { type AnyActorRef, createActor } from 'xstate';
import { MemoryEventLog, serverSessionMachine } from '../../src/index.js';
import { RawSession } from '../lib/raw.js';
import { startRemote } from '../lib/remote.js';
import { bounded, pool, settledHeap } from '../lib/stats.js';
import { bareMcpServer, benchMcpServer, progressMessage } from '../lib/tools.js';

/** Row 4: memory. Heap readings are `heapUsed` after repeated gc() (node --expose-gc). */

export interface SessionsMemoryResult {
  readonly server: 'ours' | 'sdk';
  readonly mcp: 'bench' | 'bare';
  readonly sessions: number;
  /** Heap growth per idle session, everything included (ours: its log holds the initialize answer). */
  readonly bytesPerSession: number;
  /** Ours: the same after every session's events were dropped from the MemoryEventLog. */
  readonly bytesPerSessionExcludingLog?: number;
  readonly createMs: number;
}

/**
 * Opens `n` idle sessions on a server in its own process: raw fetch initialize (answer read to its end) +
 * notifications/initialized, `concurrency` at a time, no GET stream. The server's heap is read before and
 * after (in the server process, after gc); for ours, again after its log dropped every session's events.
 */
/** Longer than two of our server's sweeps (1 s each with the default idle TTL). */
const IDLE_SETTLE_MS = 2_500;

export async function sessionsMemory(
  server: 'ours' | 'sdk',
  mcp: 'bench' | 'bare',
  n: number,
  concurrency: number,
): Promise<SessionsMemoryResult> {
  const remote = await startRemote(server, { mcp });
  try {
    // Warm-up: lazily built SDK/zod/xstate structures and V8's optimized code are not per-session costs.
    // With 20 warm sessions about 1 KB of each measured session was code compiled while they opened
    // (bench/memory-2025-idle.ts --warm=N shows it); 1,000 reach the steady state a serving process is in.
    await pool(1_000, 10, () => new RawSession(remote.url).initialize());
    await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_MS));
    if (server === 'ours') await remote.dropLogs();
    const before = await remote.heap();
    const start = performance.now();
    await bounded(
      pool(n, concurrency, () => new RawSession(remote.url).initialize()),
      120_000,
      `${server}: ${n} sessions`,
    );
    const createMs = performance.now() - start;
    // Idle means idle for a while: our server lets idle sessions sleep after about a second (both
    // stacks wait the same).
    await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_MS));
    const after = await remote.heap();
    if (after.sessions !== before.sessions + n) {
      throw new Error(`${server}: ${after.sessions - before.sessions} new sessions, expected ${n}`);
    }
    const bytesPerSession = (after.heapUsed - before.heapUsed) / n;
    if (server !== 'ours') return { server, mcp, sessions: n, bytesPerSession, createMs };
    await remote.dropLogs();
    const dropped = await remote.heap();
    return {
      server,
      mcp,
      sessions: n,
      bytesPerSession,
      bytesPerSessionExcludingLog: (dropped.heapUsed - before.heapUsed) / n,
      createMs,
    };
  } finally {
    await remote.close();
  }
}

class NullTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  async start(): Promise<void> {}
  async send(): Promise<void> {}
  async close(): Promise<void> {}
}

export interface BreakdownResult {
  readonly count: number;
  /** An SDK McpServer with the bench's two tools, connected to a transport that does nothing. */
  readonly mcpServerBench: number;
  /** An SDK McpServer without tools, connected likewise. */
  readonly mcpServerBare: number;
  /** Our serverSessionMachine actor, started (its idle-TTL timer armed). */
  readonly sessionActor: number;
}

/** Per-object heap cost of what one session is made of, measured in this process. */
export async function sessionBreakdown(count: number): Promise<BreakdownResult> {
  const measure = async (make: () => unknown | Promise<unknown>) => {
    const keep: unknown[] = new Array(count);
    await make(); // warm-up
    const before = await settledHeap();
    for (let i = 0; i < count; i++) keep[i] = await make();
    const after = await settledHeap();
    const perObject = (after - before) / count;
    keep.length = 0;
    return perObject;
  };
  const mcpServerBench = await measure(async () => {
    const s = benchMcpServer();
    await s.connect(new NullTransport());
    return s;
  });
  const mcpServerBare = await measure(async () => {
    const s = bareMcpServer();
    await s.connect(new NullTransport());
    return s;
  });
  const actors: AnyActorRef[] = [];
  const sessionActor = await measure(() => {
    const a = createActor(serverSessionMachine, {
      input: { sessionId: 'x'.repeat(22), epoch: 'abcdef123456', idleTtlMs: 30 * 60_000 },
    });
    a.start();
    actors.push(a);
    return a;
  });
  for (const a of actors) a.stop();
  return { count, mcpServerBench, mcpServerBare, sessionActor };
}

export interface EventsMemoryResult {
  readonly events: number;
  readonly streams: number;
  readonly bytesPerEvent: number;
  /** The same message objects held in a plain array: what the messages themselves weigh. */
  readonly bytesPerMessageObject: number;
  readonly appendMs: number;
}

/**
 * Appends `events` progress notifications (each its own object, as the SDK hands them over) to a
 * MemoryEventLog with the default policy (1,000 per stream), spread over events/1000 streams of one session
 * so that nothing is evicted. Heap delta / events.
 */
export async function eventsMemory(events: number): Promise<EventsMemoryResult> {
  const perStream = 1_000;
  const streams = Math.ceil(events / perStream);
  const plain = await (async () => {
    const before = await settledHeap();
    const keep = Array.from({ length: events }, (_, i) => progressMessage(1, i));
    const after = await settledHeap();
    const bytes = (after - before) / keep.length;
    keep.length = 0;
    return bytes;
  })();
  const log = new MemoryEventLog({ maxEventsPerStream: perStream });
  try {
    await log.append('warm', 1, progressMessage(1, 0));
    await log.dropSession('warm');
    const before = await settledHeap();
    const start = performance.now();
    for (let i = 0; i < events; i++) {
      await log.append('session', 1 + Math.floor(i / perStream), progressMessage(1, i));
    }
    const appendMs = performance.now() - start;
    const after = await settledHeap();
    const held = log.stats().events;
    if (held !== events) throw new Error(`the log holds ${held} events, expected ${events}`);
    return {
      events,
      streams,
      bytesPerEvent: (after - before) / events,
      bytesPerMessageObject: plain,
      appendMs,
    };
  } finally {
    await log.close();
  }
}

export interface AppendCostResult {
  readonly capacity: number;
  readonly appends: number;
  readonly ms: number;
  readonly microsPerAppend: number;
}

/** Fills one stream of a MemoryEventLog whose capacity is `capacity` events: cost per append as it grows. */
export async function appendCost(capacity: number): Promise<AppendCostResult> {
  const log = new MemoryEventLog({ maxEventsPerStream: capacity });
  try {
    const start = performance.now();
    for (let i = 1; i <= capacity; i++) await log.append('s', 1, progressMessage(1, i));
    const ms = performance.now() - start;
    return { capacity, appends: capacity, ms, microsPerAppend: (ms * 1000) / capacity };
  } finally {
    await log.close();
  }
}

export interface ManySessionsResult {
  readonly sessions: number;
  readonly concurrency: number;
  readonly createMs: number;
  readonly sessionsPerSecond: number;
  readonly heapBytes: number;
  readonly bytesPerSession: number;
  /** An echo call on the first of those sessions, afterwards. */
  readonly oldSessionCallMs: number;
  /** A new session (initialize) plus an echo call on it, afterwards. */
  readonly newSessionCallMs: number;
}

/** `n` concurrent idle sessions on one of our servers: time to open them, heap, and whether it still serves. */
export async function manySessions(n: number, concurrency: number): Promise<ManySessionsResult> {
  const remote = await startRemote('ours');
  try {
    await pool(20, 10, () => new RawSession(remote.url).initialize());
    const before = await remote.heap();
    const sessions: RawSession[] = new Array(n);
    const start = performance.now();
    await bounded(
      pool(n, concurrency, async (i) => {
        const s = new RawSession(remote.url);
        await s.initialize();
        sessions[i] = s;
      }),
      240_000,
      `ours: ${n} sessions`,
    );
    const createMs = performance.now() - start;
    await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_MS));
    const after = await remote.heap();
    if (after.sessions !== before.sessions + n) {
      throw new Error(`ours: ${after.sessions - before.sessions} new sessions, expected ${n}`);
    }
    const echo = async (s: RawSession) => {
      const t = performance.now();
      const r = await s.call('echo', { text: 'still here' }, 10_000);
      const text = (r.last as { result?: { content?: Array<{ text?: string }> } })?.result?.content?.[0]
        ?.text;
      if (text !== 'still here') throw new Error(`echo after ${n} sessions: ${JSON.stringify(r.last)}`);
      return performance.now() - t;
    };
    const oldSessionCallMs = await echo(sessions[0] as RawSession);
    const t = performance.now();
    const fresh = new RawSession(remote.url);
    await fresh.initialize();
    await echo(fresh);
    const newSessionCallMs = performance.now() - t;
    return {
      sessions: n,
      concurrency,
      createMs,
      sessionsPerSecond: n / (createMs / 1000),
      heapBytes: after.heapUsed - before.heapUsed,
      bytesPerSession: (after.heapUsed - before.heapUsed) / n,
      oldSessionCallMs,
      newSessionCallMs,
    };
  } finally {
    await remote.close();
  }
}
