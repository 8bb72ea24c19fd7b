import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import { followTask } from '../../src/client/modern/tasks-follow.js';
import { RedisTaskStore } from '../../src/server/tasks/redis-task-store.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { startTasksServer, type TasksServer } from '../support/tasks-server.js';
import { until } from '../support/until.js';

/**
 * Two instances of the server on one Redis (each its own task store client, the same key prefix), on
 * 127.0.0.1 ephemeral ports: a task created on A is followed, re-issued and cancelled on B; and when A dies
 * mid-run (its runs stop and write nothing), B answers the task failed with its outcome unknown once the
 * run's lease lapses, instead of `working` until the TTL.
 */

const MODERN = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const declared = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
};
// Long enough that a busy machine reads the task before the lease lapses, short enough for seconds-long tests.
const LEASE_MS = 1_000;
const ledger = { started: 0, charges: 0, aborted: 0 };
let redis: RedisServer;
let prefix = 0;
let errors: unknown[];

let a: TasksServer;
let b: TasksServer;

function app(): McpServerV2 {
  const server = new McpServerV2({ name: 'fleet', version: '1.0.0' });
  server.registerTool(
    'charge',
    { inputSchema: z.object({ amount: z.number(), ms: z.number() }) },
    async ({ amount, ms }, ctx) => {
      ledger.started++;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, ms);
        ctx.mcpReq.signal.addEventListener(
          'abort',
          () => {
            clearTimeout(t);
            resolve();
          },
          { once: true },
        );
      });
      if (ctx.mcpReq.signal.aborted) {
        ledger.aborted++;
        return { content: [{ type: 'text', text: 'aborted' }], isError: true };
      }
      ledger.charges++;
      return { content: [{ type: 'text', text: `charged ${amount}` }] };
    },
  );
  return server;
}

/** One instance on the shared Redis (its own store client, the same key prefix). */
function instance(keyPrefix: string): Promise<TasksServer> {
  const store = new RedisTaskStore({ url: redis.url, keyPrefix, onError: (e) => errors.push(e) });
  return startTasksServer({ app, taskTools: ['charge'], errors, store, leaseMs: LEASE_MS });
}

beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis.dispose();
});

beforeEach(async () => {
  Object.assign(ledger, { started: 0, charges: 0, aborted: 0 });
  errors = [];
  const keyPrefix = `fleet${++prefix}:`;
  a = await instance(keyPrefix);
  b = await instance(keyPrefix);
});

afterEach(async () => {
  await a.close(true);
  await b.close(true);
  expect(errors).toEqual([]);
});

let ids = 0;
async function rpc(
  to: URL,
  method: string,
  params: Record<string, unknown>,
  meta: Record<string, unknown> = declared,
): Promise<{ result?: Record<string, unknown>; error?: { code: number; message: string; data?: unknown } }> {
  const name: Record<string, string> = typeof params.name === 'string' ? { 'mcp-name': params.name } : {};
  const response = await fetch(to, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
      ...name,
      authorization: 'Bearer alice',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++ids, method, params: { ...params, _meta: meta } }),
  });
  const text = await response.text();
  return text.startsWith('{') ? JSON.parse(text) : JSON.parse(/data: (.*)/.exec(text)?.[1] ?? '{}');
}

const follow = {
  policy: { minPollMs: 20, retryDelayMs: 20, maxPollMs: 200 },
  headers: { authorization: 'Bearer alice' },
};

describe('tasks on two instances sharing Redis', () => {
  it('created on A, followed on B past several lease renewals: the result, one charge', async () => {
    const created = await rpc(a.url, 'tools/call', { name: 'charge', arguments: { amount: 5, ms: 1_500 } });
    const taskId = String(created.result?.taskId);
    const outcome = await followTask(b.url, taskId, follow);
    expect(outcome).toMatchObject({ kind: 'completed', result: { content: [{ text: 'charged 5' }] } });
    expect(ledger).toMatchObject({ started: 1, charges: 1 });
  });

  it('a keyed creation re-issued on B gets A’s task: one task, one charge', async () => {
    const meta = { ...declared, [ContinuityMeta.idempotencyKey]: 'fleet-order-1' };
    const params = { name: 'charge', arguments: { amount: 6, ms: 200 } };
    const onA = await rpc(a.url, 'tools/call', params, meta);
    const onB = await rpc(b.url, 'tools/call', params, meta);
    expect(onB.result?.taskId).toBe(onA.result?.taskId);
    expect(await followTask(b.url, String(onB.result?.taskId), follow)).toMatchObject({ kind: 'completed' });
    expect(ledger).toMatchObject({ started: 1, charges: 1 });
  });

  it('cancelled on B: acked, cancelled on A too, and A’s run stops at its next lease renewal (no charge)', async () => {
    const created = await rpc(a.url, 'tools/call', { name: 'charge', arguments: { amount: 7, ms: 3_000 } });
    const taskId = String(created.result?.taskId);
    await until('the run', () => ledger.started === 1, 5_000);
    expect((await rpc(b.url, 'tasks/cancel', { taskId })).result).toEqual({ resultType: 'complete' });
    expect((await rpc(a.url, 'tasks/get', { taskId })).result).toMatchObject({ status: 'cancelled' });
    await until('the run on A to stop', () => ledger.aborted === 1, 2_000);
    expect(ledger.charges).toBe(0);
  });

  it('A dies mid-run: B answers working until the lease lapses, then failed (outcome unknown), not working until the TTL', async () => {
    const created = await rpc(a.url, 'tools/call', { name: 'charge', arguments: { amount: 8, ms: 10_000 } });
    const taskId = String(created.result?.taskId);
    await until('the run', () => ledger.started === 1, 5_000);
    // A stops: its runs end and write nothing, as after a kill -9 (the HTTP server stays to keep teardown simple).
    await a.continuity.close();
    expect((await rpc(b.url, 'tasks/get', { taskId })).result).toMatchObject({ status: 'working' });
    const outcome = await followTask(b.url, taskId, follow);
    expect(outcome).toMatchObject({
      kind: 'failed',
      error: { code: -32603, data: { reason: 'lease_lapsed' } },
    });
    expect(ledger.charges).toBe(0);
  });
});

/** Opens a task listen on `to` and reads its messages until `stop` says so (bounded by `ms`). */
async function listenFor(
  to: URL,
  taskIds: unknown[],
  stop: (messages: Record<string, unknown>[]) => boolean,
  meta: Record<string, unknown> = declared,
  who = 'alice',
  ms = 5_000,
): Promise<Record<string, unknown>[]> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), ms);
  const messages: Record<string, unknown>[] = [];
  try {
    const response = await fetch(to, {
      method: 'POST',
      signal: abort.signal,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'subscriptions/listen',
        authorization: `Bearer ${who}`,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: ++ids,
        method: 'subscriptions/listen',
        params: { notifications: { taskIds }, _meta: meta },
      }),
    });
    if (!response.headers.get('content-type')?.includes('text/event-stream')) return [await response.json()];
    const reader = response.body?.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (let i = 0; i < 1_000 && reader; i++) {
      const chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      const frames = buffer.split('\n\n');
      buffer = frames.pop() ?? '';
      for (const f of frames) {
        const data = /^data: (.*)$/m.exec(f)?.[1];
        if (data) messages.push(JSON.parse(data));
      }
      if (stop(messages)) break;
    }
    return messages;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

const statusOf = (m: Record<string, unknown>) => (m.params as { status?: string } | undefined)?.status;

describe('notifications/tasks over subscriptions/listen', () => {
  it('a listen on B for a task created on A: the ack names it, then working … completed with the result', async () => {
    const created = await rpc(a.url, 'tools/call', { name: 'charge', arguments: { amount: 3, ms: 400 } });
    const taskId = String(created.result?.taskId);
    const messages = await listenFor(b.url, [taskId, 'not-a-task'], (ms) =>
      ms.some((m) => statusOf(m) === 'completed'),
    );
    expect(messages[0]).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { taskIds: [taskId] } },
    });
    expect(messages.slice(1).every((m) => m.method === 'notifications/tasks')).toBe(true);
    expect(statusOf(messages[1] as Record<string, unknown>)).toBe('working');
    expect(messages.at(-1)?.params).toMatchObject({
      taskId,
      status: 'completed',
      result: { content: [{ text: 'charged 3' }] },
    });
    // One notification per change, never the same state twice.
    expect(messages.filter((m) => statusOf(m) === 'completed')).toHaveLength(1);
  });

  it('another principal’s task is not acknowledged; a client without the capability gets -32021', async () => {
    const created = await rpc(a.url, 'tools/call', { name: 'charge', arguments: { amount: 4, ms: 50 } });
    const taskId = String(created.result?.taskId);
    const foreign = await listenFor(b.url, [taskId], (ms) => ms.length >= 1, declared, 'mallory');
    expect(foreign[0]?.params).toEqual({ notifications: { taskIds: [] } });
    const undeclared = await listenFor(b.url, [taskId], () => true, {
      'io.modelcontextprotocol/protocolVersion': MODERN,
    });
    expect(undeclared[0]).toMatchObject({ error: { code: -32021 } });
    await followTask(b.url, taskId, follow);
  });
});
