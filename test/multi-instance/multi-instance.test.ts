import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { McpError } from '@modelcontextprotocol/sdk/types.js';
import { createClient } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { GapReport } from '../../machines/client/session.machine.js';
import { ContinuityClientTransport, isOutcomeUnknown } from '../../src/index.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { type RoundRobinProxy, startRoundRobinProxy } from '../support/round-robin-proxy.js';

/**
 * Several server processes share sessions through Redis, behind a balancer without sticky sessions:
 * every POST, resume and DELETE of one client may land on a different instance. Real processes (so one
 * can be killed with SIGKILL), real Redis with AOF, real HTTP on loopback, the SDK Client over our
 * transport. The properties of the single-process model must hold here too: every call runs at most
 * once, no event is lost without being flagged, and no call hangs.
 */
const INSTANCE_SCRIPT = fileURLToPath(new URL('./instance.ts', import.meta.url));
// The kill -9 test wants a dead instance noticed quickly; the others want a live one never taken for dead
// on a loaded machine (an event-loop stall longer than the lease would reap a live instance's call).
const LEASE_MS = 800;
const RELAXED_LEASE_MS = 5_000;
const CALL_DEADLINE_MS = 20_000;
// A process start (tsx compiling the instance script) took 25 s on 2 cores at load 30: generous, not tight.
const START_DEADLINE_MS = 90_000;

interface Instance {
  readonly port: number;
  readonly process: ChildProcess;
  readonly stderr: string[];
}

let redis: RedisServer;
const keyPrefix = `multi-${process.pid}:`;
let effects: ReturnType<typeof createClient>;

beforeAll(async () => {
  redis = await startRedisServer();
  effects = createClient({ url: redis.url });
  effects.on('error', () => undefined);
  await effects.connect();
});

afterAll(async () => {
  await effects?.close();
  await redis?.dispose();
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function startInstance(prefix: string, leaseMs: number): Promise<Instance> {
  const child = spawn(process.execPath, ['--import', 'tsx', INSTANCE_SCRIPT], {
    env: { ...process.env, REDIS_URL: redis.url, KEY_PREFIX: prefix, LEASE_MS: String(leaseMs) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Registered before the start is awaited: a start that times out must not leave the child running.
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
  });
  const stderr: string[] = [];
  child.stderr?.on('data', (d: Buffer) => stderr.push(d.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`instance did not start: ${stderr.join('')}`)),
      START_DEADLINE_MS,
    );
    child.once('exit', (code) => reject(new Error(`instance exited (${code}): ${stderr.join('')}`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      const m = /^ready (\d+)$/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
  });
  const instance = { port, process: child, stderr };
  return instance;
}

async function cluster(count: number, leaseMs = RELAXED_LEASE_MS) {
  const prefix = `${keyPrefix}${Math.random().toString(36).slice(2)}:`;
  const instances = await Promise.all(Array.from({ length: count }, () => startInstance(prefix, leaseMs)));
  const balancer: RoundRobinProxy = await startRoundRobinProxy(instances.map((i) => i.port));
  cleanups.push(() => balancer.close());
  const [host, port] = new URL(balancer.url).host.split(':');
  const faults = await FaultProxy.start({ target: { host: host as string, port: Number(port) } });
  cleanups.push(() => faults.close());
  const gaps: GapReport[] = [];
  const transport = new ContinuityClientTransport(faults.url(), {
    reconnect: { initialDelayMs: 20, maxDelayMs: 200, maxRetries: 30 },
    onGap: (gap) => gaps.push(gap),
  });
  const client = new Client({ name: 'multi', version: '1.0.0' });
  cleanups.push(() => client.close());
  await client.connect(transport);
  const charges = async (key: string) => Number((await effects.get(`${prefix}charges:${key}`)) ?? 0);
  const ranOn = async (key: string) => (await effects.get(`${prefix}ran:${key}`)) ?? undefined;
  return { instances, balancer, faults, transport, client, gaps, charges, ranOn };
}

const text = (r: unknown) =>
  ((r as { content: Array<{ text: string }> }).content[0] as { text: string }).text;

/** Settles within the deadline or fails the test: a call that never ends is the bug we look for. */
function settle<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return Promise.race([
    p.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    ),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('a call hung past its deadline')), CALL_DEADLINE_MS),
    ),
  ]);
}

describe('several instances sharing sessions through Redis, behind a round-robin balancer', () => {
  it('serves one session from every instance: POSTs, resumes and DELETE land anywhere, nothing runs twice or goes missing', async () => {
    const c = await cluster(3);
    const progress = new Map<string, number[]>();
    // Connections are cut again and again while the calls run, so most resumes go to another instance.
    // A cut waits for new progress since the last one (not for a guessed time): the streams it cuts have
    // delivered events, so the client resumes them with Last-Event-ID even when a loaded machine is slow
    // to deliver the first (cuts before that are re-sent POSTs, and 40 of them taught nothing).
    let cuts = 0;
    let progressAtCut = 0;
    const progressSeen = () => [...progress.values()].reduce((sum, seen) => sum + seen.length, 0);
    const cutter = setInterval(() => {
      const now = progressSeen();
      if (cuts >= 40 || now === progressAtCut) return;
      if (c.faults.reset() > 0) {
        cuts++;
        progressAtCut = now;
      }
    }, 150);
    cleanups.push(async () => clearInterval(cutter));
    const calls: Array<Promise<unknown>> = [];
    for (let i = 0; i < 6; i++) {
      calls.push(c.client.callTool({ name: 'charge', arguments: { key: `k${i}`, ms: 300 } }));
      const seen: number[] = [];
      progress.set(`chatty${i}`, seen);
      calls.push(
        c.client.callTool({ name: 'chatty', arguments: { count: 40, intervalMs: 10 } }, undefined, {
          onprogress: (p) => seen.push(p.progress),
          resetTimeoutOnProgress: true,
        }),
      );
      calls.push(c.client.callTool({ name: 'echo', arguments: { text: `e${i}` } }));
    }
    const results = await Promise.all(calls.map(settle));
    clearInterval(cutter);

    // No hang (settle would have thrown), and every call got its answer: with retention to spare and
    // instances alive, a reset is never a reason to lose a call.
    const failures = results.filter((r) => !r.ok);
    expect(failures).toEqual([]);
    for (let i = 0; i < 6; i++) {
      expect(await c.charges(`k${i}`)).toBe(1); // at most once, and it ran
      // Progress of every chatty call arrived exactly once, in order, whichever instance replayed it.
      expect(progress.get(`chatty${i}`)).toEqual(Array.from({ length: 40 }, (_, n) => n + 1));
    }
    expect(c.gaps).toEqual([]);
    expect(cuts).toBeGreaterThan(0);
    // The balancer really spread the session over every instance, resumes included.
    expect(c.balancer.routed.every((n) => n > 0)).toBe(true);
    const resumes = c.balancer.log.filter((r) => r.method === 'GET' && r.lastEventId);
    expect(new Set(resumes.map((r) => r.upstream)).size).toBeGreaterThan(1);
    const sessionId = c.transport.sessionId;

    // DELETE lands on one instance; the session is gone on all of them.
    await c.client.close();
    for (let attempt = 0; attempt < 3; attempt++) {
      const answer = await fetch(c.balancer.url, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'Mcp-Session-Id': sessionId as string,
          'Mcp-Protocol-Version': '2025-11-25',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list' }),
      });
      expect(answer.status).toBe(404);
      await answer.body?.cancel();
    }
  }, 180_000);

  it('kill -9 of one instance mid-call: its calls end outcome unknown, everything else continues', async () => {
    const c = await cluster(3, LEASE_MS);
    expect(text(await c.client.callTool({ name: 'echo', arguments: { text: 'warm' } }))).toMatch(/^warm/);
    // Six slow charges: the balancer deals two to each instance.
    const calls = Array.from({ length: 6 }, (_, i) =>
      settle(c.client.callTool({ name: 'charge', arguments: { key: `slow${i}`, ms: 1500 } })),
    );
    // Every charge has started and said where (each instance counts its effect and names itself before it
    // sleeps: a kill between the two would leave a call the victim ran with no record of it).
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const started = await Promise.all(
        calls.map(
          async (_, i) => (await c.charges(`slow${i}`)) === 1 && (await c.ranOn(`slow${i}`)) !== undefined,
        ),
      );
      if (started.every(Boolean)) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const victim = c.instances[1] as Instance;
    const victimLabel = `pid ${victim.process.pid}`;
    const exited = new Promise((r) => victim.process.once('exit', r));
    victim.process.kill('SIGKILL');
    await exited;

    const results = await Promise.all(calls);
    for (let i = 0; i < 6; i++) {
      const result = results[i];
      const ranOn = await c.ranOn(`slow${i}`);
      expect(await c.charges(`slow${i}`)).toBe(1);
      if (ranOn === victimLabel) {
        // The instance died holding the call: nobody can know whether the charge went through.
        expect(result?.ok).toBe(false);
        const error = (result as { error: unknown }).error;
        expect(isOutcomeUnknown(error)).toBe(true);
        expect((error as McpError).data).toMatchObject({ reason: 'instance_lost' });
      } else {
        expect(result, `slow${i} ran on ${ranOn}, which lived`).toMatchObject({ ok: true });
        expect(text((result as { value: unknown }).value)).toBe(`charged slow${i} @ ${ranOn}`);
      }
    }
    expect(
      (await Promise.all(calls.map((_, i) => c.ranOn(`slow${i}`)))).filter((r) => r === victimLabel),
    ).toHaveLength(2);
    // The session survives on the other instances.
    for (let i = 0; i < 4; i++) {
      expect(text(await c.client.callTool({ name: 'echo', arguments: { text: `after${i}` } }))).toMatch(
        new RegExp(`^after${i} @ pid \\d+$`),
      );
    }
    expect(c.gaps).toEqual([]);
  }, 180_000);

  it('Redis restarts (AOF) under a running session: nothing acknowledged is lost, nothing runs twice', async () => {
    const c = await cluster(2);
    expect(text(await c.client.callTool({ name: 'echo', arguments: { text: 'before' } }))).toMatch(/^before/);
    const progress: number[] = [];
    const chatty = settle(
      c.client.callTool({ name: 'chatty', arguments: { count: 60, intervalMs: 15 } }, undefined, {
        onprogress: (p) => progress.push(p.progress),
        resetTimeoutOnProgress: true,
      }),
    );
    await new Promise((r) => setTimeout(r, 300));
    await redis.shutdown();
    await redis.start();
    const result = await chatty;
    // The call either finished with every event delivered once, or ended flagged: never silently short.
    // A notification whose append the restart cut off was never stored, and its sender was told so: the
    // tool failed and said so in its result (`isError`), or the call ended outcome unknown.
    const complete = Array.from({ length: 60 }, (_, n) => n + 1);
    const value = result.ok ? (result.value as { isError?: boolean }) : undefined;
    if (value && !value.isError) {
      expect(progress).toEqual(complete);
    } else {
      expect(value?.isError === true || isOutcomeUnknown((result as { error?: unknown }).error)).toBe(true);
      // What did arrive arrived once and in order.
      expect(progress).toEqual(complete.slice(0, progress.length));
    }
    expect(c.gaps).toEqual([]);
    expect(text(await c.client.callTool({ name: 'echo', arguments: { text: 'after' } }))).toMatch(/^after/);
    const charged = await settle(
      c.client.callTool({ name: 'charge', arguments: { key: 'post-restart', ms: 0 } }),
    );
    expect(charged.ok).toBe(true);
    expect(await c.charges('post-restart')).toBe(1);
  }, 180_000);
});
