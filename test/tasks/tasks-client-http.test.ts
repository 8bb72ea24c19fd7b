import type { Client } from '@modelcontextprotocol/client';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { followTask, type TaskFollowOptions } from '../../src/client/modern/tasks-follow.js';
import type { FaultProxy } from '../../src/testing/fault-proxy.js';
import { registerHello } from '../support/hello-tool.js';
import { connectTasksClient, registerCharge, startProxiedTasksServer } from '../support/tasks-server.js';
import { until } from '../support/until.js';

/**
 * The client side of the tasks extension over real HTTP on 127.0.0.1: the official v2 `Client` with
 * `continuityFetch({ tasks })` gets a task-capable tool's RESULT from `callTool` (the handle is followed
 * with `tasks/get`), through a balancer outage during polling (never "failed"), with an input round whose
 * `tasks/update` ack is lost (re-sent, the question asked once), and a restarted client resumes a task
 * from its journaled id (`followTask`). Each of these is what the official ext-tasks 0.2.2 client gets wrong.
 */

const ledger = { charges: 0, started: 0, asked: 0 };
let close: () => Promise<void>;
let proxy: FaultProxy;
let errors: unknown[];
/** The `tasks/*` methods the client sent, in order. */
let sent: string[];

function app(): McpServerV2 {
  const server = new McpServerV2({ name: 'tasks', version: '1.0.0' });
  registerCharge(server, ledger, 600);
  registerHello(server);
  return server;
}

beforeEach(async () => {
  Object.assign(ledger, { charges: 0, started: 0, asked: 0 });
  errors = [];
  sent = [];
  ({ proxy, close } = await startProxiedTasksServer({ app, taskTools: ['charge', 'hello'], errors }));
});

afterEach(async () => {
  await close();
  expect(errors).toEqual([]);
});

/** The network under the client: records `tasks/*` methods; `cut` may drop an answer after the server read it. */
function network(cut?: (method: string) => boolean): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const method = typeof init?.body === 'string' ? String(JSON.parse(init.body).method) : '';
    if (method.startsWith('tasks/')) sent.push(method);
    const response = await fetch(input, init);
    if (cut?.(method)) {
      await response.text();
      throw new TypeError('fetch failed (the answer was cut after the server read the request)');
    }
    return response;
  }) as typeof fetch;
}

const fast: TaskFollowOptions['policy'] = { minPollMs: 20, retryDelayMs: 20, maxPollMs: 200 };

function connect(tasks: TaskFollowOptions, net = network()): Promise<Client> {
  return connectTasksClient(proxy.url(), net, tasks);
}

describe('continuityFetch follows task handles', () => {
  it('callTool gets the task’s result; the handle was journaled first; one charge', async () => {
    const handles: string[] = [];
    const client = await connect({ policy: fast, onTask: (h) => handles.push(h.taskId) });
    const result = (await client.callTool({ name: 'charge', arguments: { amount: 7 } })) as {
      content: { text: string }[];
    };
    expect(result.content[0]?.text).toBe('charged 7');
    expect(handles).toHaveLength(1);
    expect(sent.filter((m) => m === 'tasks/get').length).toBeGreaterThanOrEqual(1);
    expect(ledger.charges).toBe(1);
    await client.close();
  });

  it('a balancer outage during polling: tasks/get is retried and the SAME task’s result arrives, never "failed"', async () => {
    const client = await connect({ policy: fast });
    const call = client.callTool({ name: 'charge', arguments: { amount: 8 } });
    // Down while the task runs (its first poll went out: the handle arrived), open connections reset, new
    // ones answered 503. Waiting for the poll, not a guessed time: on a busy machine the handle may come late.
    await until('the first tasks/get', () => sent.includes('tasks/get'), 10_000);
    const before = sent.length;
    proxy.outage(700);
    const result = (await call) as { content: { text: string }[] };
    expect(result.content[0]?.text).toBe('charged 8');
    // Polls were sent into the outage (and failed) before the one that read the result.
    expect(sent.length - before).toBeGreaterThanOrEqual(2);
    expect(ledger.started).toBe(1);
    expect(ledger.charges).toBe(1);
    await client.close();
  });

  it('an input round whose tasks/update ack is cut: the answer is re-sent, the question asked once', async () => {
    let updates = 0;
    const net = network((m) => m === 'tasks/update' && ++updates === 1);
    const asked: string[][] = [];
    const client = await connect(
      {
        policy: fast,
        onInputRequired: async (requests) => {
          asked.push(Object.keys(requests));
          return Object.fromEntries(
            Object.keys(requests).map((k) => [k, { action: 'accept', content: { name: 'Luca' } }]),
          );
        },
      },
      net,
    );
    const result = (await client.callTool({ name: 'hello', arguments: {} })) as {
      content: { text: string }[];
    };
    expect(result.content[0]?.text).toBe('Hello, Luca!');
    expect(asked).toEqual([['r0.name']]);
    expect(updates).toBeGreaterThanOrEqual(2);
    await client.close();
  });

  it('a restarted client resumes the task from its journaled id (followTask): the same task, one charge', async () => {
    const journal: string[] = [];
    // The first process "dies" once the handle is journaled: nothing of it reaches the server any more
    // (no cancel either, as after a kill -9); its follow gives up as outcome unknown.
    let dead = false;
    const live = network();
    const net = ((input: string | URL | Request, init?: RequestInit) =>
      dead ? Promise.reject(new TypeError('fetch failed (dead)')) : live(input, init)) as typeof fetch;
    const first = await connect(
      { policy: { ...fast, giveUpAfterMs: 200 }, onTask: (h) => journal.push(h.taskId) },
      net,
    );
    const call = first.callTool({ name: 'charge', arguments: { amount: 9 } });
    for (let i = 0; i < 200 && journal.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(journal).toHaveLength(1);
    dead = true;
    await expect(call).rejects.toMatchObject({ code: -32050, data: { reason: 'task_unreachable' } });
    const outcome = await followTask(proxy.url(), String(journal[0]), {
      policy: fast,
      headers: { authorization: 'Bearer alice' },
    });
    expect(outcome).toMatchObject({
      kind: 'completed',
      result: { content: [{ type: 'text', text: 'charged 9' }] },
    });
    expect(ledger.started).toBe(1);
  });

  it('the SDK’s abort cancels the task (tasks/cancel), which then reads cancelled', async () => {
    const journal: string[] = [];
    const client = await connect({ policy: fast, onTask: (h) => journal.push(h.taskId) });
    const abort = new AbortController();
    const call = client.callTool({ name: 'charge', arguments: { amount: 2 } }, { signal: abort.signal });
    for (let i = 0; i < 200 && journal.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    abort.abort();
    await expect(call).rejects.toBeDefined();
    for (let i = 0; i < 200 && !sent.includes('tasks/cancel'); i++)
      await new Promise((r) => setTimeout(r, 10));
    const outcome = await followTask(proxy.url(), String(journal[0]), {
      policy: fast,
      headers: { authorization: 'Bearer alice' },
    });
    expect(outcome).toEqual({ kind: 'cancelled' });
    await client.close();
  });

  it('another principal resuming the id learns nothing: outcome unknown (not found), never "failed"', async () => {
    const journal: string[] = [];
    const client = await connect({ policy: fast, onTask: (h) => journal.push(h.taskId) });
    await client.callTool({ name: 'charge', arguments: { amount: 1 } });
    const outcome = await followTask(proxy.url(), String(journal[0]), {
      policy: fast,
      headers: { authorization: 'Bearer mallory' },
    });
    expect(outcome).toMatchObject({ kind: 'unknown', reason: 'task_not_found' });
    await client.close();
  });
});
