import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { MemoryTaskJournal } from '../../src/client/modern/task-journal.js';
import { MemoryTaskStore } from '../../src/server/tasks/memory-task-store.js';
import { RedisTaskStore } from '../../src/server/tasks/redis-task-store.js';
import type { TaskStore } from '../../src/server/tasks/task-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { startTasksServer } from '../support/tasks-server.js';
import { until } from '../support/until.js';

/**
 * Issue 26's "Done when", over real HTTP on 127.0.0.1 with the official v2 `Client` on
 * `continuityFetch({ tasks: { journal } })`, through a balancer that resets every connection every
 * 300 ms (and cuts those idle for 300 ms): a keyed task-creating charge is one task and one charge, its
 * result read with `tasks/get`; cuts during polling give the same task's result, never "failed"; a
 * client process killed with SIGKILL after its send is restarted on the same journal file and finds the
 * same task: one charge. Then the same on two instances sharing Redis, the restarted client's re-issue
 * landing on the other instance.
 */

const MODERN = '2026-07-28';
const CHILD = 'test/tasks/journal-client.ts';
const ledger = { started: 0, charges: 0 };
let errors: unknown[];
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => errors.push(e));
  expect(errors).toEqual([]);
});

function app(): McpServerV2 {
  const server = new McpServerV2({ name: 'journal', version: '1.0.0' });
  server.registerTool(
    'charge',
    { inputSchema: z.object({ amount: z.number(), ms: z.number() }) },
    async ({ amount, ms }) => {
      ledger.started++;
      await new Promise((r) => setTimeout(r, ms));
      ledger.charges++;
      return { content: [{ type: 'text', text: `charged ${amount}` }] };
    },
  );
  return server;
}

/** One server instance on `store`: its port on 127.0.0.1. */
async function instance(store: TaskStore): Promise<number> {
  // The continuity extension advertised: calls are keyed (the task store binds each key to its task).
  const server = await startTasksServer({
    app,
    taskTools: ['charge'],
    errors,
    store,
    keyed: true,
    leaseMs: 5_000,
    heartbeatMs: 0,
  });
  cleanups.push(() => server.close(true));
  return server.port;
}

interface Balancer {
  readonly url: URL;
  readonly cuts: () => number;
  readonly proxy: FaultProxy;
}

/**
 * A balancer in front of `target` resetting every connection every 300 ms (and those idle for 300 ms).
 * Each new connection goes to `target.port` as it is then: a test moves it to send traffic elsewhere.
 */
async function balancer(target: { host: string; port: number }): Promise<Balancer> {
  const proxy = await FaultProxy.start({ target, idleTimeoutMs: 300 });
  let cuts = 0;
  proxy.on('fault', (e) => {
    if (e.type === 'cut') cuts++;
  });
  // Every exchange spends time on the wire, so the periodic reset lands on requests in flight.
  proxy.setLatency(40);
  const cutting = setInterval(() => proxy.reset(), 300);
  cleanups.push(async () => {
    clearInterval(cutting);
    await proxy.close();
  });
  return { url: proxy.url(), cuts: () => cuts, proxy };
}

/** The network under the client: each `tasks/*` request's method, and how many of them failed. */
function network(): { fetch: typeof fetch; sent: string[]; failed: string[] } {
  const sent: string[] = [];
  const failed: string[] = [];
  const f = (async (input: string | URL | Request, init?: RequestInit) => {
    const method = typeof init?.body === 'string' ? String(JSON.parse(init.body).method) : '';
    if (method.startsWith('tasks/')) sent.push(method);
    try {
      const response = await fetch(input, init);
      if (method.startsWith('tasks/') && response.status >= 500) failed.push(method);
      return response;
    } catch (error) {
      if (method.startsWith('tasks/')) failed.push(method);
      throw error;
    }
  }) as typeof fetch;
  return { fetch: f, sent, failed };
}

describe('through a balancer resetting every connection every 300 ms', () => {
  it('a keyed task-creating charge: one task, one charge, its result via tasks/get; cuts during polling never read "failed"', async () => {
    Object.assign(ledger, { started: 0, charges: 0 });
    errors = [];
    const store = counted(new MemoryTaskStore());
    const lb = await balancer({ host: '127.0.0.1', port: await instance(store) });
    await chargeThrough(lb, 11, () => undefined);
    expect(store.created()).toBe(1);
  });

  it('kill -9 of the client once its handle arrived: the restarted process makes no call, resumeTasks re-attaches to the same task from the file journal, one charge', async () => {
    Object.assign(ledger, { started: 0, charges: 0 });
    errors = [];
    const lb = await balancer({ host: '127.0.0.1', port: await instance(new MemoryTaskStore()) });
    const dir = mkdtempSync(join(tmpdir(), 'task-journal-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const journal = join(dir, 'journal.json');

    const one = child(lb.url, journal, 15);
    const handed = (await until(
      'the first process’s handle',
      () => one.lines.find((l) => (l as { task?: string }).task),
      20_000,
    )) as { task: string };
    const exited = new Promise((r) => one.proc.once('exit', r));
    one.proc.kill('SIGKILL');
    await exited;
    expect(ledger.charges).toBe(0);
    // The task id was journaled before the application was told it.
    const kept = JSON.parse(readFileSync(journal, 'utf8')) as { entries: { taskId?: string }[] };
    expect(kept.entries.map((e) => e.taskId)).toEqual([handed.task]);

    const two = child(lb.url, journal, 15, 'resume');
    const done = (await until(
      'the restarted process’s resumption',
      () => two.lines.find((l) => (l as { resumed?: unknown }).resumed),
      30_000,
    )) as {
      resumed: { tasks: { taskId: string; toolName: string; outcome: unknown }[]; unhanded: unknown[] };
    };
    expect(done.resumed.unhanded).toEqual([]);
    expect(done.resumed.tasks).toEqual([
      {
        taskId: handed.task,
        toolName: 'charge',
        key: expect.any(String),
        outcome: {
          kind: 'completed',
          result: expect.objectContaining({ content: [{ type: 'text', text: 'charged 15' }] }),
        },
      },
    ]);
    // The same task, not a second one: one run, one charge; its outcome known, the entry dropped.
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await new Promise((r) => (two.proc.exitCode === null ? two.proc.once('exit', r) : r(undefined)));
    expect(JSON.parse(readFileSync(journal, 'utf8')).entries).toEqual([]);
  });

  it('kill -9 of the client after its send: the restarted process on the same journal file gets the same task, one charge', async () => {
    Object.assign(ledger, { started: 0, charges: 0 });
    errors = [];
    const server = await balancer({ host: '127.0.0.1', port: await instance(new MemoryTaskStore()) });
    await killedThenResumed(server.url, 12, () => undefined);
  });
});

describe('two instances on Redis, each behind a balancer resetting every 300 ms', () => {
  let redis: RedisServer;
  let prefix = 0;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis.dispose();
  });

  const redisStore = (keyPrefix: string) =>
    new RedisTaskStore({ url: redis.url, keyPrefix, onError: (e) => errors.push(e) });

  it('kill -9 of the client after its send on A: restarted, its re-issue lands on B and finds A’s task, one charge', async () => {
    Object.assign(ledger, { started: 0, charges: 0 });
    errors = [];
    const keyPrefix = `journal${++prefix}:`;
    const a = await instance(redisStore(keyPrefix));
    const b = await instance(redisStore(keyPrefix));
    const target = { host: '127.0.0.1', port: a };
    const lb = await balancer(target);
    // The first process reaches A; after its kill every new connection (the restarted one's) reaches B.
    await killedThenResumed(lb.url, 13, () => {
      target.port = b;
    });
  });

  it('a keyed charge created on A, its polls landing on B through the cuts: one task, one charge, the result', async () => {
    Object.assign(ledger, { started: 0, charges: 0 });
    errors = [];
    const keyPrefix = `journal${++prefix}:`;
    const storeA = counted(redisStore(keyPrefix));
    const a = await instance(storeA);
    const b = await instance(redisStore(keyPrefix));
    const target = { host: '127.0.0.1', port: a };
    const lb = await balancer(target);
    // Once the handle arrived from A, every new connection (the polls after a cut) reaches B.
    await chargeThrough(lb, 14, () => {
      target.port = b;
    });
    expect(storeA.created()).toBe(1);
  });
});

/** `store`, counting the tasks it really created (a key already bound creates none). */
function counted<S extends TaskStore>(store: S): S & { created: () => number } {
  let n = 0;
  const create = store.create.bind(store);
  return Object.assign(store, {
    create: async (record: Parameters<TaskStore['create']>[0]) => {
      const r = await create(record);
      if (r.kind === 'created') n++;
      return r;
    },
    created: () => n,
  });
}

/**
 * The official v2 `Client` on `continuityFetch({ tasks })` calls a 1.5 s charge through `lb`:
 * `onHandle` runs when the handle arrives. The result, one run, polls sent and some lost to the cuts.
 */
async function chargeThrough(lb: Balancer, amount: number, onHandle: () => void): Promise<void> {
  const net = network();
  const handles: string[] = [];
  const client = new Client(
    { name: 'journal', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: MODERN } } },
  );
  await connectThrough(client, lb.url, net.fetch, (taskId) => {
    handles.push(taskId);
    onHandle();
    // A cut during polling, for sure: open connections reset, new ones answered 503 for 400 ms.
    lb.proxy.outage(400);
  });
  const result = (await client.callTool(
    { name: 'charge', arguments: { amount, ms: 1_500 } },
    { timeout: 30_000 },
  )) as { content: { text: string }[] };
  expect(result.content[0]?.text).toBe(`charged ${amount}`);
  expect(ledger).toEqual({ started: 1, charges: 1 });
  expect(handles).toHaveLength(1);
  expect(net.sent).toContain('tasks/get');
  // The balancer did cut, and polls were lost to it: each was retried, none read as a failed task.
  expect(lb.cuts()).toBeGreaterThanOrEqual(3);
  expect(net.failed.filter((m) => m === 'tasks/get').length).toBeGreaterThanOrEqual(1);
  await client.close().catch(() => undefined);
}

async function connectThrough(
  client: Client,
  url: URL,
  net: typeof fetch,
  onTask: (taskId: string) => void,
): Promise<void> {
  // The connect's own requests may be cut by the balancer: retried a bounded number of times.
  for (let i = 0; ; i++) {
    try {
      await client.connect(
        new StreamableHTTPClientTransport(url, {
          fetch: continuityFetch({
            fetch: net,
            tasks: {
              journal: new MemoryTaskJournal(),
              policy: { minPollMs: 20, retryDelayMs: 20, maxPollMs: 200, requestTimeoutMs: 5_000 },
              onTask: ({ taskId }) => onTask(taskId),
            },
          }),
          requestInit: { headers: { authorization: 'Bearer alice' } },
        }),
        // A request the balancer leaves hanging is given up after 5 s and the connect tried again.
        { timeout: 5_000 },
      );
      return;
    } catch (error) {
      if (i >= 20) throw error;
    }
  }
}

/** Spawns the client process (`resume`: it makes no call, it resumes the journal); its JSON lines are collected. */
function child(
  url: URL,
  journal: string,
  amount: number,
  mode: 'call' | 'resume' = 'call',
): { proc: ChildProcess; lines: unknown[] } {
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', CHILD, String(url), journal, String(amount), '1500', mode],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const lines: unknown[] = [];
  createInterface({ input: proc.stdout as NodeJS.ReadableStream }).on('line', (l) => {
    try {
      lines.push(JSON.parse(l));
    } catch {
      // Not ours.
    }
  });
  cleanups.push(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    }
  });
  return { proc, lines };
}

/**
 * The first client process sends the charge to `url` and is killed with SIGKILL as soon as the server
 * has started the run (its send arrived); its journal holds the call's key. `afterKill` runs; a second
 * process on the same journal file gets that task's result: one run, one charge, the entry then dropped.
 */
async function killedThenResumed(url: URL, amount: number, afterKill: () => void): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'task-journal-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const journal = join(dir, 'journal.json');

  const one = child(url, journal, amount);
  await until('the first process’s send to start the run', () => ledger.started === 1, 20_000);
  const exited = new Promise((r) => one.proc.once('exit', r));
  one.proc.kill('SIGKILL');
  await exited;
  expect(one.lines.some((l) => (l as { result?: unknown }).result !== undefined)).toBe(false);
  // Written before the send: the key is there, whether or not the handle arrived before the kill.
  const kept = JSON.parse(readFileSync(journal, 'utf8')) as { entries: { key: string; taskId?: string }[] };
  expect(kept.entries).toHaveLength(1);

  afterKill();
  const two = child(url, journal, amount);
  const done = await until(
    'the restarted process’s answer',
    () =>
      two.lines.find(
        (l) => (l as { result?: unknown; error?: unknown }).result ?? (l as { error?: unknown }).error,
      ),
    30_000,
  );
  expect(done).toMatchObject({ result: { content: [{ type: 'text', text: `charged ${amount}` }] } });
  expect(ledger).toEqual({ started: 1, charges: 1 });
  // The task the restarted process was told is the one the journal held (when the kill came after the handle).
  const told = two.lines.find((l) => (l as { task?: string }).task) as { task: string } | undefined;
  if (kept.entries[0]?.taskId) expect(told?.task).toBe(kept.entries[0].taskId);
  await new Promise((r) => (two.proc.exitCode === null ? two.proc.once('exit', r) : r(undefined)));
  // The outcome is known: the entry is dropped.
  expect(JSON.parse(readFileSync(journal, 'utf8')).entries).toEqual([]);
}
