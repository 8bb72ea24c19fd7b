import { createServer } from 'node:http';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { followTask } from '../../src/client/modern/tasks-follow.js';
import { createContinuityServer } from '../../src/server/handler.js';
import { MemoryTaskStore } from '../../src/server/tasks/memory-task-store.js';
import { createTasks } from '../../src/server/tasks/runtime.js';
import { WakePort } from '../../src/server/wake-port.js';
import { listenOnLoopback } from '../support/listen.js';
import { until } from '../support/until.js';

/**
 * The tasks runtime holds no timer of its own: a run's lease renewals are wake-ups of the host's wake
 * port (`TasksOptions.wakes`), asked while the run runs and cancelled when it ends, so the port holds a
 * timer exactly while a task is working. Over real HTTP on 127.0.0.1.
 */
it('lease renewals are wake-ups of the host’s port: a timer while the task works, none after', async () => {
  const errors: unknown[] = [];
  const wakes = new WakePort((e) => errors.push(e));
  let renewed = 0;
  const store = new MemoryTaskStore();
  const replace = store.replace.bind(store);
  store.replace = async (next, expected) => {
    if (next.status === 'working') renewed++;
    return replace(next, expected);
  };
  let started = 0;
  const app = () => {
    const server = new McpServerV2({ name: 'wakes', version: '1.0.0' });
    server.registerTool('charge', { inputSchema: z.object({}) }, async () => {
      started++;
      await new Promise((r) => setTimeout(r, 600));
      return { content: [{ type: 'text', text: 'charged' }] };
    });
    return server;
  };
  const continuity = createContinuityServer({
    createMcpServer: () => new McpServerV1({ name: 'wakes', version: '1.0.0' }),
    modern: {
      createServer: app,
      keepAliveMs: 0,
      tasks: createTasks({
        store,
        taskTools: ['charge'],
        leaseMs: 150,
        wakes,
        onError: (e) => errors.push(e),
      }),
    },
    onError: (e) => errors.push(e),
  });
  const http = createServer(continuity.nodeHandler);
  const url = new URL(`http://127.0.0.1:${await listenOnLoopback(http)}/mcp`);
  try {
    expect(wakes.hasRef()).toBeUndefined();
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': 'charge',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'charge',
          arguments: {},
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {
              extensions: { 'io.modelcontextprotocol/tasks': {} },
            },
          },
        },
      }),
    });
    const handle = (await response.json()) as { result: { taskId: string } };
    await until('the run', () => started === 1, 5_000);
    // Working: the renewal is a wake-up of the port (its one timer, unref'd), and it fires.
    expect(wakes.hasRef()).toBe(false);
    await until('a lease renewal', () => renewed >= 1, 5_000);
    const outcome = await followTask(url, handle.result.taskId, { policy: { minPollMs: 20 } });
    expect(outcome).toMatchObject({ kind: 'completed' });
    // Ended: the renewal was cancelled, the port holds no timer.
    await until('no wake-up left', () => wakes.hasRef() === undefined, 2_000);
  } finally {
    await continuity.close();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  }
  expect(errors).toEqual([]);
});
