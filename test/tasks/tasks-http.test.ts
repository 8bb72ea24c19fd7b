import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ContinuityErrorCode, ContinuityMeta } from '../../machines/continuity-extension.js';
import { MemoryTaskStore } from '../../src/server/tasks/memory-task-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { registerHello } from '../support/hello-tool.js';
import { startTasksServer, type TasksServer } from '../support/tasks-server.js';
import { until } from '../support/until.js';

/** Polls an async probe every 20 ms until it is true, for at most `ms` (bounded). */
async function poll(what: string, probe: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (let i = 0; Date.now() < deadline && i < 1000; i++) {
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * The tasks extension (`io.modelcontextprotocol/tasks`) of `createContinuityServer` over real HTTP on
 * 127.0.0.1, with the wire format sent by raw fetch (`@modelcontextprotocol/ext-tasks` is not installed):
 * a task handle for a task-capable tool, tasks/get until completed, tasks/update answering an input round
 * once, tasks/cancel, and a keyed creation whose answer is cut by a proxy: the re-issue gets the SAME task
 * (one charge), where an unkeyed re-issue makes a second task (a second charge).
 */

const MODERN = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const declared = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
};
const ledger = { charges: 0, started: 0, aborted: 0, asked: 0 };
let server: TasksServer;
let url: URL;
let store: MemoryTaskStore;
let errors: unknown[];

function app(): McpServerV2 {
  const server = new McpServerV2({ name: 'tasks', version: '1.0.0' });
  server.registerTool(
    'charge',
    { inputSchema: z.object({ amount: z.number() }) },
    async ({ amount }, ctx) => {
      ledger.started++;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 400);
        const stop = () => {
          clearTimeout(t);
          resolve();
        };
        ctx.mcpReq.signal.addEventListener('abort', stop, { once: true });
      });
      if (ctx.mcpReq.signal.aborted) {
        ledger.aborted++;
        return { content: [{ type: 'text', text: 'aborted' }], isError: true };
      }
      ledger.charges++;
      return { content: [{ type: 'text', text: `charged ${amount}` }] };
    },
  );
  registerHello(server, () => {
    ledger.asked++;
  });
  return server;
}

beforeEach(async () => {
  Object.assign(ledger, { charges: 0, started: 0, aborted: 0, asked: 0 });
  errors = [];
  store = new MemoryTaskStore();
  server = await startTasksServer({ app, taskTools: ['charge', 'hello'], store, errors });
  url = server.url;
});

afterEach(async () => {
  await server.close();
  expect(errors).toEqual([]);
});

let ids = 0;
/** One JSON-RPC request on the wire, with the headers 2026-07-28 requires; the parsed answer. */
async function rpc(
  method: string,
  params: Record<string, unknown>,
  opts: { to?: URL; who?: string; meta?: Record<string, unknown> } = {},
): Promise<{
  status: number;
  body: { result?: Record<string, unknown>; error?: { code: number; message: string } };
}> {
  const name =
    typeof params.name === 'string'
      ? params.name
      : typeof params.taskId === 'string'
        ? params.taskId
        : undefined;
  const response = await fetch(opts.to ?? url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
      ...(name !== undefined ? { 'mcp-name': name } : {}),
      authorization: `Bearer ${opts.who ?? 'alice'}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: ++ids,
      method,
      params: { ...params, _meta: opts.meta ?? declared },
    }),
  });
  const text = await response.text();
  const json = text.startsWith('{') ? JSON.parse(text) : JSON.parse(/data: (.*)/.exec(text)?.[1] ?? '{}');
  return { status: response.status, body: json };
}

/** Polls tasks/get until the task is terminal (bounded). */
async function settle(taskId: string, who = 'alice'): Promise<Record<string, unknown>> {
  let last: Record<string, unknown> = {};
  await poll(
    'the task',
    async () => {
      last = (await rpc('tasks/get', { taskId }, { who })).body.result ?? {};
      return ['completed', 'failed', 'cancelled'].includes(String(last.status));
    },
    10_000,
  );
  return last;
}

describe('tasks extension over HTTP', () => {
  it('server/discover advertises io.modelcontextprotocol/tasks', async () => {
    const { body } = await rpc('server/discover', {});
    expect(
      (body.result?.capabilities as { extensions?: Record<string, unknown> } | undefined)?.extensions?.[
        TASKS
      ],
    ).toEqual({});
  });

  it('a task-capable call gets a task handle; tasks/get gives its result; one charge', async () => {
    const created = await rpc('tools/call', { name: 'charge', arguments: { amount: 7 } });
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working', pollIntervalMs: 50 });
    const taskId = String(created.body.result?.taskId);
    expect(taskId.length).toBeGreaterThanOrEqual(24);
    const done = await settle(taskId);
    expect(done).toMatchObject({
      resultType: 'complete',
      status: 'completed',
      result: { content: [{ text: 'charged 7' }] },
    });
    expect(ledger.charges).toBe(1);
  });

  it('a call that does not declare the extension is answered as before (no task)', async () => {
    const plain = await rpc(
      'tools/call',
      { name: 'charge', arguments: { amount: 1 } },
      {
        meta: { ...declared, 'io.modelcontextprotocol/clientCapabilities': {} },
      },
    );
    expect(plain.body.result).toMatchObject({ content: [{ text: 'charged 1' }] });
    expect(plain.body.result).not.toHaveProperty('taskId');
  });

  it('tasks/* is refused without the capability (-32021); another principal’s task is not found (-32602)', async () => {
    const created = await rpc('tools/call', { name: 'charge', arguments: { amount: 2 } });
    const taskId = String(created.body.result?.taskId);
    const undeclared = await rpc(
      'tasks/get',
      { taskId },
      { meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } },
    );
    expect(undeclared.body.error?.code).toBe(-32021);
    const foreign = await rpc('tasks/get', { taskId }, { who: 'mallory' });
    expect(foreign.body.error).toMatchObject({
      code: -32602,
      message: 'Failed to retrieve task: Task not found',
    });
    const unknown = await rpc('tasks/get', { taskId: 'nope' });
    expect(unknown.body.error).toEqual(foreign.body.error);
    await settle(taskId);
  });

  it('an input round: inputRequests under a task-unique key, answered once by tasks/update, then the result', async () => {
    // The run asks through MRTR, so the creating call declares elicitation as well (the SDK checks it).
    const meta = {
      ...declared,
      'io.modelcontextprotocol/clientCapabilities': {
        extensions: { [TASKS]: {} },
        elicitation: { form: {} },
      },
    };
    const taskId = String(
      (await rpc('tools/call', { name: 'hello', arguments: {} }, { meta })).body.result?.taskId,
    );
    let asking: Record<string, unknown> = {};
    await poll(
      'the task',
      async () => {
        asking = (await rpc('tasks/get', { taskId })).body.result ?? {};
        return asking.status === 'input_required';
      },
      10_000,
    );
    expect(Object.keys(asking.inputRequests as object)).toEqual(['r0.name']);
    const answer = { 'r0.name': { action: 'accept', content: { name: 'Luca' } } };
    expect((await rpc('tasks/update', { taskId, inputResponses: answer })).body.result).toEqual({
      resultType: 'complete',
    });
    // A retried update (its ack was lost) answers nothing twice.
    const other = { 'r0.name': { action: 'accept', content: { name: 'Eve' } } };
    expect((await rpc('tasks/update', { taskId, inputResponses: other })).body.result).toEqual({
      resultType: 'complete',
    });
    const done = await settle(taskId);
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ text: 'Hello, Luca!' }] } });
    expect(ledger.asked).toBe(1);
  });

  it('tasks/cancel: acked, the task reads cancelled, the run saw its abort, nothing charged', async () => {
    const taskId = String(
      (await rpc('tools/call', { name: 'charge', arguments: { amount: 3 } })).body.result?.taskId,
    );
    await until('the ledger', () => ledger.started === 1, 5_000);
    expect((await rpc('tasks/cancel', { taskId })).body.result).toEqual({ resultType: 'complete' });
    expect(await settle(taskId)).toMatchObject({ status: 'cancelled' });
    await until('the ledger', () => ledger.aborted === 1, 5_000);
    expect(ledger.charges).toBe(0);
  });
});

describe('a cut before the handle arrives', () => {
  let proxy: FaultProxy;
  beforeEach(async () => {
    proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: Number(url.port) } });
  });
  afterEach(async () => {
    await proxy.close();
  });

  /** Sends a creation through the proxy and cuts it once the server has started the task's run. */
  async function cutCreation(meta: Record<string, unknown>): Promise<void> {
    proxy.setLatency(300);
    const before = ledger.started;
    const lost = rpc(
      'tools/call',
      { name: 'charge', arguments: { amount: 9 } },
      { to: proxy.url(), meta },
    ).then(
      () => 'answered',
      () => 'cut',
    );
    await until('the ledger', () => ledger.started > before, 5_000);
    proxy.reset();
    expect(await lost).toBe('cut');
    proxy.setLatency(0);
  }

  it('a keyed re-issue gets the SAME task handle: one task, one charge', async () => {
    const meta = { ...declared, [ContinuityMeta.idempotencyKey]: 'order-42' };
    await cutCreation(meta);
    const again = await rpc(
      'tools/call',
      { name: 'charge', arguments: { amount: 9 } },
      { to: proxy.url(), meta },
    );
    expect(again.body.result).toMatchObject({ resultType: 'task' });
    const taskId = String(again.body.result?.taskId);
    expect(await settle(taskId)).toMatchObject({
      status: 'completed',
      result: { content: [{ text: 'charged 9' }] },
    });
    // Re-issued after completion: still the same task, now completed; nothing ran again.
    const late = await rpc('tools/call', { name: 'charge', arguments: { amount: 9 } }, { meta });
    expect(late.body.result).toMatchObject({ taskId, status: 'completed' });
    expect(ledger.started).toBe(1);
    expect(ledger.charges).toBe(1);
  });

  it('the same key with other arguments is refused (409, KEY_REUSED), no second task', async () => {
    const meta = { ...declared, [ContinuityMeta.idempotencyKey]: 'order-43' };
    const first = await rpc('tools/call', { name: 'charge', arguments: { amount: 1 } }, { meta });
    const reused = await rpc('tools/call', { name: 'charge', arguments: { amount: 2 } }, { meta });
    expect(reused.status).toBe(409);
    expect(reused.body.error?.code).toBe(ContinuityErrorCode.KEY_REUSED);
    await settle(String(first.body.result?.taskId));
    expect(ledger.started).toBe(1);
  });

  it('without a key the re-issue makes a second task: the cost the key removes (two charges)', async () => {
    await cutCreation(declared);
    const again = await rpc('tools/call', { name: 'charge', arguments: { amount: 9 } }, { to: proxy.url() });
    await settle(String(again.body.result?.taskId));
    await until('the ledger', () => ledger.charges === 2, 5_000);
    expect(ledger.started).toBe(2);
  });
});
