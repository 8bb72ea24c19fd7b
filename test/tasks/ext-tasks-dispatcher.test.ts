import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  createApplicationInputHandler,
  createTaskSessionFromClient,
  DispatchError,
  type ToolExecutionSettlement,
} from '@modelcontextprotocol/ext-tasks/client';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { withCompleteResult } from '../../machines/tasks/task-request-retry.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { type ExtTasksDispatch, extTasksDispatcher } from '../../src/client/modern/ext-tasks-dispatcher.js';
import { followTask } from '../../src/client/modern/tasks-follow.js';
import { RedisTaskStore } from '../../src/server/tasks/redis-task-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { registerHello } from '../support/hello-tool.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { type RoundRobinProxy, startRoundRobinProxy } from '../support/round-robin-proxy.js';
import { startTasksServer, type TasksServer } from '../support/tasks-server.js';
import { until } from '../support/until.js';

/**
 * The official `@modelcontextprotocol/ext-tasks` 0.2.2 client on the official v2 `Client` 2.4.0, against
 * our server with the tasks extension, over real HTTP through a `FaultProxy`: with our raw dispatcher
 * (`extTasksDispatcher`, on `continuityFetch`) and with a raw dispatcher on plain fetch, the way a host
 * writes one from the package's docs (a network failure is a retryable `DispatchError`). The same cuts;
 * the second measures the cost the issue predicts (docs/compare.md, "Tasks").
 */

const MODERN = '2026-07-28';
const AUTH = { authorization: 'Bearer alice' };
const ledger = { started: 0, charges: 0 };
let server: TasksServer;
let proxy: FaultProxy;
let errors: unknown[];

function app(): McpServerV2 {
  const server = new McpServerV2({ name: 'tasks', version: '1.0.0' });
  server.registerTool('charge', { inputSchema: z.object({ amount: z.number() }) }, async ({ amount }) => {
    ledger.started++;
    await new Promise((r) => setTimeout(r, 600));
    ledger.charges++;
    return { content: [{ type: 'text', text: `charged ${amount}` }] };
  });
  registerHello(server);
  return server;
}

beforeEach(async () => {
  Object.assign(ledger, { started: 0, charges: 0 });
  errors = [];
  // The continuity extension, advertised in server/discover: what makes continuityFetch key a call.
  server = await startTasksServer({
    app,
    taskTools: ['charge', 'hello'],
    errors,
    keyed: true,
    memoWindowMs: 10 * 60_000,
  });
  proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: server.port } });
});

afterEach(async () => {
  await proxy.close();
  await server.close();
  expect(errors).toEqual([]);
});

/** The requests the client sent, by method, in order (under the dispatcher, above the network). */
let sent: string[] = [];
beforeEach(() => {
  sent = [];
});

function recording(inner: typeof fetch = fetch): typeof fetch {
  return ((input: string | URL | Request, init?: RequestInit) => {
    if (typeof init?.body === 'string') sent.push(String(JSON.parse(init.body).method));
    return inner(input, init);
  }) as typeof fetch;
}

/**
 * A raw dispatcher on plain fetch, as a host writes one: one POST, the JSON-RPC response read from a JSON
 * body or an event stream; a network failure or an answer without one is a retryable `DispatchError`.
 */
function plainDispatcher(url: URL, net: typeof fetch): ExtTasksDispatch {
  let next = 0;
  return async (request, options) => {
    const id = ++next;
    const body: Record<string, unknown> = { ...(request as Record<string, unknown>), jsonrpc: '2.0', id };
    const params = (body.params ?? {}) as Record<string, unknown>;
    const headers: Record<string, string> = {
      ...AUTH,
      ...(options?.context?.headers ?? {}),
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': String(body.method),
    };
    if (body.method === 'tools/call') headers['mcp-name'] = String(params.name);
    let text: string;
    try {
      const response = await net(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        ...(options?.signal ? { signal: options.signal } : {}),
      });
      text = await response.text();
    } catch (cause) {
      throw new DispatchError('fetch failed', true, { cause });
    }
    const lines = text.trimStart().startsWith('{')
      ? [text]
      : text
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5));
    for (const line of lines) {
      const m = JSON.parse(line) as { id?: unknown; result?: never; error?: never };
      if (m.id !== id) continue;
      // The same reading of a completed task's result as ours (ext-tasks 0.2.2 wants its resultType):
      // only the transport differs.
      return m.error
        ? { kind: 'error', error: m.error }
        : { kind: 'result', result: withCompleteResult(m.result ?? {}) as never };
    }
    throw new DispatchError(`no JSON-RPC response (HTTP status in: ${text.slice(0, 40)})`, true);
  };
}

interface Stack {
  readonly client: Client;
  readonly session: ReturnType<typeof createTaskSessionFromClient>;
}

/** The v2 `Client` on `continuityFetch` over `net`, and an ext-tasks session on it with a raw dispatcher (ours or plain). */
/** Every question ext-tasks put to the user (its elicitation handler), in order. */
let asked: string[] = [];
beforeEach(() => {
  asked = [];
});

async function connect(which: 'ours' | 'plain', net: typeof fetch = recording()): Promise<Stack> {
  const fetch = continuityFetch({ fetch: net });
  const client = new Client(
    { name: 'ext-tasks-client', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: MODERN } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(proxy.url(), { fetch, requestInit: { headers: AUTH } }),
  );
  const rawDispatch =
    which === 'ours'
      ? extTasksDispatcher({
          url: proxy.url(),
          fetch,
          headers: AUTH,
          policy: { minPollMs: 20, retryDelayMs: 50, maxPollMs: 200, giveUpAfterMs: 5_000 },
        })
      : plainDispatcher(proxy.url(), net);
  const session = createTaskSessionFromClient(client, {
    endpointId: `ext-tasks-test:${which}`,
    onInputRequest: createApplicationInputHandler({
      elicitation: async (request) => {
        asked.push(String((request.params as { message?: unknown }).message));
        return { action: 'accept', content: { name: 'Luca' } };
      },
      sampling: async () => {
        throw new Error('no sampling here');
      },
      roots: async () => ({ roots: [] }),
    }),
    rawDispatch,
    v2RequestFraming: {
      protocolVersion: MODERN,
      clientInfo: { name: 'ext-tasks-client', version: '1.0.0' },
      clientCapabilities: { elicitation: { form: {} } },
    },
  });
  return { client, session };
}

async function close({ client, session }: Stack): Promise<void> {
  await session.close();
  await client.close();
}

type Settled = ToolExecutionSettlement<unknown>;

describe('ext-tasks 0.2.2 with our raw dispatcher', () => {
  it('no fault: the task’s result, through tasks/get; one charge', async () => {
    const stack = await connect('ours');
    const execution = await stack.session.callTool('charge', { amount: 1 });
    const { outcome } = (await execution.settle()) as Settled;
    expect(outcome).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: 'charged 1' }] },
    });
    expect(sent).toContain('tasks/get');
    expect(ledger.charges).toBe(1);
    await close(stack);
  });
});

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A cut before the handle: the proxy holds every answer 400 ms; once the task's run has started (the
 * server stored the task and answered its handle), every connection is reset, so the handle is lost.
 */
async function cutBeforeHandle(stack: Stack, amount: number) {
  proxy.setLatency(400);
  const execution = stack.session.callTool('charge', { amount });
  await until('the task’s run', () => ledger.started >= 1, 5_000);
  proxy.reset();
  proxy.setLatency(0);
  return execution;
}

/** A balancer outage (resets, then 503s for 700 ms) while the task runs, once it is being polled. */
async function outageWhilePolling(stack: Stack, amount: number) {
  const execution = await stack.session.callTool('charge', { amount });
  await until('the first poll', () => sent.includes('tasks/get'), 5_000);
  proxy.outage(700);
  return execution;
}

describe('through the same cuts', () => {
  it('ours: a cut before the handle: the re-issue (same key) gets the same task: one task, one charge', async () => {
    const stack = await connect('ours');
    const execution = await cutBeforeHandle(stack, 2);
    const { outcome } = (await (await execution).settle()) as Settled;
    expect(outcome).toMatchObject({ status: 'completed', result: { content: [{ text: 'charged 2' }] } });
    // The cut landed: the creation was sent again, and that found the task the first one made.
    expect(sent.filter((m) => m === 'tools/call').length).toBeGreaterThanOrEqual(2);
    await wait(700);
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await close(stack);
  });

  it('plain: a cut before the handle: ext-tasks re-sends without a key: a second task, a second charge', async () => {
    const stack = await connect('plain');
    const execution = await cutBeforeHandle(stack, 3);
    const { outcome } = (await (await execution).settle()) as Settled;
    expect(outcome).toMatchObject({ status: 'completed', result: { content: [{ text: 'charged 3' }] } });
    await until('the second charge', () => ledger.charges >= 2, 5_000);
    expect(sent.filter((m) => m === 'tools/call')).toHaveLength(2);
    expect(ledger).toEqual({ started: 2, charges: 2 });
    await close(stack);
  });

  it('ours: tasks/get fails during an outage: retried, the same task’s result, never "failed"', async () => {
    const stack = await connect('ours');
    const execution = await outageWhilePolling(stack, 4);
    const before = sent.filter((m) => m === 'tasks/get').length;
    const { outcome } = (await execution.settle()) as Settled;
    expect(outcome).toMatchObject({ status: 'completed', result: { content: [{ text: 'charged 4' }] } });
    expect(sent.filter((m) => m === 'tasks/get').length - before).toBeGreaterThanOrEqual(2);
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await close(stack);
  });

  it('plain: tasks/get fails during an outage: ext-tasks reports "failed" while the task completes', async () => {
    const stack = await connect('plain');
    const execution = await outageWhilePolling(stack, 5);
    const taskId = String(execution.handle?.taskId);
    const { outcome } = (await execution.settle()) as Settled;
    expect(outcome.status).toBe('failed');
    // The server's truth, read once the outage is over: the task completed, its charge landed once.
    await wait(800);
    const truth = await followTask(proxy.url(), taskId, { headers: AUTH, policy: { minPollMs: 20 } });
    expect(truth).toMatchObject({ kind: 'completed', result: { content: [{ text: 'charged 5' }] } });
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await close(stack);
  });

  it('ours: a balancer cutting connections idle for 300 ms: one task, one charge, the result via tasks/get', async () => {
    proxy.setIdleTimeout(300);
    const stack = await connect('ours');
    const execution = await stack.session.callTool('charge', { amount: 6 });
    const { outcome } = (await execution.settle()) as Settled;
    expect(outcome).toMatchObject({ status: 'completed', result: { content: [{ text: 'charged 6' }] } });
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await close(stack);
  });

  it('ours: a client killed after the handle; a restarted one resumes the journaled reference: the same task, one charge', async () => {
    let dead = false;
    const live = recording();
    const net = ((input: string | URL | Request, init?: RequestInit) =>
      dead ? Promise.reject(new TypeError('fetch failed (dead)')) : live(input, init)) as typeof fetch;
    const first = await connect('ours', net);
    const execution = await first.session.callTool('charge', { amount: 7 });
    if (execution.kind !== 'task') throw new Error('expected a task');
    const journal = JSON.stringify(execution.serializeReference());
    // kill -9: nothing of the first process reaches the server any more.
    dead = true;
    const second = await connect('ours');
    const resumed = await second.session.resumeTask(JSON.parse(journal));
    const { outcome } = (await resumed.settle()) as Settled;
    expect(outcome).toMatchObject({ status: 'completed', result: { content: [{ text: 'charged 7' }] } });
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await close(second);
    await close(first);
  });

  it('ours: the first two tasks/update answers are cut after the server read them: re-sent, asked once, the result', async () => {
    const cut = cutUpdates(2);
    const stack = await connect('ours', cut.net);
    const execution = await stack.session.callTool('hello', {});
    const { outcome } = (await execution.settle()) as Settled;
    expect(outcome).toMatchObject({ status: 'completed', result: { content: [{ text: 'Hello, Luca!' }] } });
    expect(asked).toEqual(['Your name?']);
    expect(cut.updates()).toBe(3);
    await close(stack);
  });

  it('plain: the same two cuts: ext-tasks re-sends the update once, then reports "failed" while the task completes', async () => {
    const cut = cutUpdates(2);
    const stack = await connect('plain', cut.net);
    const execution = await stack.session.callTool('hello', {});
    const taskId = String(execution.handle?.taskId);
    const { outcome } = (await execution.settle()) as Settled;
    expect(outcome.status).toBe('failed');
    expect(cut.updates()).toBe(2);
    // The server took the first update: the task completed with the answer given once.
    const truth = await followTask(proxy.url(), taskId, { headers: AUTH, policy: { minPollMs: 20 } });
    expect(truth).toMatchObject({ kind: 'completed', result: { content: [{ text: 'Hello, Luca!' }] } });
    expect(asked).toEqual(['Your name?']);
    await close(stack);
  });
});

/** A network that cuts the answers of the first `count` tasks/update after the server read them. */
function cutUpdates(count: number) {
  let updates = 0;
  const live = recording();
  const net = (async (input: string | URL | Request, init?: RequestInit) => {
    const method = typeof init?.body === 'string' ? String(JSON.parse(init.body).method) : '';
    const response = await live(input, init);
    if (method === 'tasks/update' && ++updates <= count) {
      await response.text();
      throw new TypeError('fetch failed (the answer was cut after the server read the request)');
    }
    return response;
  }) as typeof fetch;
  return { net, updates: () => updates };
}

/**
 * Issue 26's fleet: two instances sharing one Redis (tasks bound to their key there), behind a balancer
 * that sends each request to the next instance in turn, with the `FaultProxy` in front of it for the cut.
 * ext-tasks on our dispatcher: the creation's answer is cut, and its keyed re-issue finds the task the
 * first one made on whichever instance the balancer picks; the polls alternate between the two.
 */
describe('two instances on Redis behind a round-robin balancer', () => {
  let redis: RedisServer;
  let fleet: TasksServer[];
  let balancer: RoundRobinProxy;
  let prefix = 0;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis.dispose();
  });
  beforeEach(async () => {
    const keyPrefix = `ext-fleet${++prefix}:`;
    const one = () =>
      startTasksServer({
        app,
        taskTools: ['charge'],
        errors,
        keyed: true,
        memoWindowMs: 10 * 60_000,
        store: new RedisTaskStore({ url: redis.url, keyPrefix, onError: (e) => errors.push(e) }),
      });
    fleet = [await one(), await one()];
    balancer = await startRoundRobinProxy(fleet.map((f) => f.port));
    // The client reaches the fleet through the fault proxy, now in front of the balancer.
    await proxy.close();
    proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port: Number(new URL(balancer.url).port) },
    });
  });
  afterEach(async () => {
    await balancer.close();
    for (const f of fleet) await f.close(true);
  });

  it('ours: a cut before the handle, the re-issue and polls spread over both instances: one task, one charge, the result', async () => {
    const stack = await connect('ours');
    const execution = await cutBeforeHandle(stack, 21);
    const { outcome } = (await (await execution).settle()) as Settled;
    expect(outcome).toMatchObject({ status: 'completed', result: { content: [{ text: 'charged 21' }] } });
    // The cut landed (the creation was sent again), and both instances served the call's requests.
    expect(sent.filter((m) => m === 'tools/call').length).toBeGreaterThanOrEqual(2);
    expect(balancer.routed.every((n) => n > 0)).toBe(true);
    await wait(700);
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await close(stack);
  });
});
