import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@modelcontextprotocol/client';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LISTEN_METHOD } from '../../machines/listen-wire.js';
import { MAX_LISTEN_BREAKS } from '../../machines/tasks/task-follow-listen.js';
import { followTask, type TaskFollowOptions } from '../../src/client/modern/tasks-follow.js';
import type { FaultProxy } from '../../src/testing/fault-proxy.js';
import { registerHello } from '../support/hello-tool.js';
import { connectTasksClient, registerCharge, startProxiedTasksServer } from '../support/tasks-server.js';
import { until } from '../support/until.js';

/**
 * `continuityFetch({ tasks: { listen: true } })` over real HTTP on 127.0.0.1 with the official v2 `Client`:
 * the task's states are read from a task listen (`notifications/tasks`) where the server offers one (no
 * `tasks/get` at all), a listen the balancer cuts is re-opened and the same task's result still arrives,
 * and a server that answers the listen with an error is polled instead (machines/tasks/task-follow-listen.ts).
 */

const ledger = { started: 0, charges: 0 };
let close: () => Promise<void>;
let proxy: FaultProxy;
let errors: unknown[];
/** `tasks/*` methods, and `listen` for each task listen, in the order the client sent them. */
let sent: string[];

function app(): McpServerV2 {
  const s = new McpServerV2({ name: 'tasks', version: '1.0.0' });
  registerCharge(s, ledger);
  registerHello(s);
  return s;
}

beforeEach(async () => {
  Object.assign(ledger, { started: 0, charges: 0 });
  errors = [];
  sent = [];
  ({ proxy, close } = await startProxiedTasksServer({ app, taskTools: ['charge', 'hello'], errors }));
});

afterEach(async () => {
  await close();
  expect(errors).toEqual([]);
});

/** Records what the client sends; `refuseListens` answers task listens as a server without them does. */
function network(refuseListens = false): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const body = typeof init?.body === 'string' ? JSON.parse(init.body) : {};
    const taskListen = body.method === 'subscriptions/listen' && body.params?.notifications?.taskIds;
    if (taskListen) sent.push('listen');
    else if (String(body.method).startsWith('tasks/')) sent.push(body.method);
    if (taskListen && refuseListens)
      return Response.json({
        jsonrpc: '2.0',
        id: body.id,
        error: { code: -32601, message: 'Method not found' },
      });
    return fetch(input, init);
  }) as typeof fetch;
}

const fast: TaskFollowOptions['policy'] = { minPollMs: 20, retryDelayMs: 20, maxPollMs: 200 };

function connect(tasks: TaskFollowOptions, net: typeof fetch): Promise<Client> {
  return connectTasksClient(proxy.url(), net, tasks);
}

const text = (r: unknown) => (r as { content: { text: string }[] }).content[0]?.text;

describe('following a task by its listen', () => {
  it('offered: the result comes from notifications/tasks, not one tasks/get; one charge', async () => {
    const client = await connect({ policy: fast, listen: true }, network());
    expect(text(await client.callTool({ name: 'charge', arguments: { amount: 1, ms: 500 } }))).toBe(
      'charged 1',
    );
    // Only listens (a listen silent for maxPollMs, 200 ms here, is re-opened): not one tasks/get.
    expect(sent.length).toBeGreaterThanOrEqual(1);
    expect(sent.every((m) => m === 'listen')).toBe(true);
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await client.close();
  });

  it('an input round over the listen: asked once, answered with tasks/update, the result from the listen', async () => {
    const asked: string[][] = [];
    const client = await connect(
      {
        policy: fast,
        listen: true,
        onInputRequired: async (requests) => {
          asked.push(Object.keys(requests));
          return Object.fromEntries(
            Object.keys(requests).map((k) => [k, { action: 'accept', content: { name: 'Luca' } }]),
          );
        },
      },
      network(),
    );
    expect(text(await client.callTool({ name: 'hello', arguments: {} }))).toBe('Hello, Luca!');
    expect(asked).toEqual([['r0.name']]);
    expect(sent.filter((m) => m === 'tasks/get')).toEqual([]);
    expect(sent).toContain('tasks/update');
    await client.close();
  });

  it('the listen is cut while the task runs: re-opened (its first notification the current state), the same task’s result', async () => {
    const client = await connect({ policy: fast, listen: true }, network());
    const call = client.callTool({ name: 'charge', arguments: { amount: 2, ms: 1_200 } });
    await until('the task listen', () => sent.includes('listen'), 10_000);
    // Let it be acknowledged, then reset every open connection (the listen among them).
    await new Promise((r) => setTimeout(r, 200));
    proxy.reset();
    expect(text(await call)).toBe('charged 2');
    expect(sent.filter((m) => m === 'listen').length).toBeGreaterThanOrEqual(2);
    expect(ledger).toEqual({ started: 1, charges: 1 });
    await client.close();
  });

  it('not offered (the listen answered with an error): polled with tasks/get instead, the result', async () => {
    const client = await connect({ policy: fast, listen: true }, network(true));
    expect(text(await client.callTool({ name: 'charge', arguments: { amount: 3, ms: 300 } }))).toBe(
      'charged 3',
    );
    expect(sent[0]).toBe('listen');
    expect(sent.filter((m) => m === 'listen')).toHaveLength(1);
    expect(sent).toContain('tasks/get');
    await client.close();
  });
});

describe('a listen the server takes and never answers (no headers, no acknowledgement)', () => {
  const held: ServerResponse[] = [];
  let server: Server | undefined;
  let sent: string[] = [];
  afterEach(async () => {
    for (const r of held.splice(0)) r.destroy();
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });
  /** Holds every listen; answers tasks/get and tasks/cancel with the task in `status`. */
  async function silentListens(status: string): Promise<string> {
    sent = [];
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        const m = JSON.parse(body) as { id: string; method: string };
        sent.push(m.method);
        if (m.method === LISTEN_METHOD) return void held.push(res);
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id: m.id,
            result: { taskId: 't', status, result: { content: [] } },
          }),
        );
      });
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  }

  it('each listen times out at the request timeout as a break; the follow ends by polling', async () => {
    const url = await silentListens('completed');
    const outcome = await followTask(url, 't', {
      listen: true,
      policy: { ...fast, requestTimeoutMs: 150 },
    });
    expect(outcome).toMatchObject({ kind: 'completed' });
    expect(sent.filter((m) => m === LISTEN_METHOD)).toHaveLength(MAX_LISTEN_BREAKS + 1);
    expect(sent).toContain('tasks/get');
  });

  it('the application’s abort ends the follow while the listen is still unanswered', async () => {
    const url = await silentListens('cancelled');
    const controller = new AbortController();
    const started = Date.now();
    const following = followTask(url, 't', { listen: true, policy: fast, signal: controller.signal });
    await until('the listen', () => sent.includes(LISTEN_METHOD), 5_000);
    controller.abort();
    expect(await following).toMatchObject({ kind: 'cancelled' });
    // Well before the default 30 s request timeout could have ended the wait.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(sent).toContain('tasks/cancel');
  });
});
