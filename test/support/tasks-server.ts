import { createServer, type Server } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import type { TaskFollowOptions } from '../../src/client/modern/tasks-follow.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { MemoryTaskStore } from '../../src/server/tasks/memory-task-store.js';
import { createTasks } from '../../src/server/tasks/runtime.js';
import type { TaskStore } from '../../src/server/tasks/task-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { listenOnLoopback } from './listen.js';

/** How the tasks tests' server is made; everything but the app has the tests' common value. */
export interface TasksServerOptions {
  /** The 2026-07-28 application (a fresh v2 `McpServer` per request). */
  readonly app: () => McpServerV2;
  /** Tool names answered with a task. */
  readonly taskTools: readonly string[];
  /** Errors the server reports land here (the tests expect none). */
  readonly errors: unknown[];
  /** Default a fresh `MemoryTaskStore`. */
  readonly store?: TaskStore;
  /** Advertise the continuity extension (memory log and memo), so `continuityFetch` keys calls. Default false. */
  readonly keyed?: boolean;
  /** The memo window when `keyed` (default the extension's default). */
  readonly memoWindowMs?: number;
  /** Default 50 ms. */
  readonly pollIntervalMs?: number;
  /** The task runs' lease (default the runtime's). */
  readonly leaseMs?: number;
  /** The 2025 stream heartbeat (default the server's). */
  readonly heartbeatMs?: number;
}

/** A running tasks server on 127.0.0.1. */
export interface TasksServer {
  readonly continuity: ContinuityServer;
  readonly http: Server;
  readonly store: TaskStore;
  readonly port: number;
  readonly url: URL;
  /** Closes the server, its connections and (when `closeStore`) its store. */
  readonly close: (closeStore?: boolean) => Promise<void>;
}

/**
 * `createContinuityServer` with the tasks extension (and, when asked, the continuity extension) over
 * node:http on an ephemeral 127.0.0.1 port, with a bearer token as the principal: the server every
 * tasks test over real HTTP starts.
 */
export async function startTasksServer(options: TasksServerOptions): Promise<TasksServer> {
  const { errors } = options;
  const store = options.store ?? new MemoryTaskStore();
  const continuity = createContinuityServer({
    createMcpServer: () => new McpServerV1({ name: 'tasks', version: '1.0.0' }),
    ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
    modern: {
      createServer: options.app,
      keepAliveMs: 0,
      ...(options.keyed
        ? {
            keyed: createKeyedRequests({
              log: new MemoryEventLog(),
              memo: new MemoryMemoStore({
                memoWindowMs: options.memoWindowMs ?? DEFAULT_CONTINUITY_SETTINGS.memoWindowMs,
              }),
            }),
          }
        : {}),
      tasks: createTasks({
        store,
        taskTools: [...options.taskTools],
        pollIntervalMs: options.pollIntervalMs ?? 50,
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
        onError: (e) => errors.push(e),
      }),
    },
    authenticate: (r) => {
      const token = r.headers.get('authorization')?.replace('Bearer ', '');
      return token ? { principal: token } : null;
    },
    onError: (e) => errors.push(e),
  });
  const http = createServer(continuity.nodeHandler);
  const port = await listenOnLoopback(http);
  return {
    continuity,
    http,
    store,
    port,
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    close: async (closeStore = false) => {
      await continuity.close();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
      if (closeStore) await store.close();
    },
  };
}

/**
 * The official v2 `Client` pinned to 2026-07-28 (form elicitation declared, for input rounds) on
 * `continuityFetch({ fetch: net, tasks })` to `url`, as principal alice.
 */
export async function connectTasksClient(
  url: URL,
  net: typeof fetch,
  tasks: TaskFollowOptions,
): Promise<Client> {
  const client = new Client(
    { name: 'tasks-client', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { form: {} } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(url, {
      fetch: continuityFetch({ fetch: net, tasks }),
      requestInit: { headers: { authorization: 'Bearer alice' } },
    }),
  );
  return client;
}

/** `startTasksServer` behind a `FaultProxy` (the tests' balancer); `close` closes both. */
export async function startProxiedTasksServer(options: TasksServerOptions): Promise<{
  readonly server: TasksServer;
  readonly proxy: FaultProxy;
  readonly close: () => Promise<void>;
}> {
  const server = await startTasksServer(options);
  const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: server.port } });
  return {
    server,
    proxy,
    close: async () => {
      await proxy.close();
      await server.close();
    },
  };
}

/**
 * The tasks tests' `charge` tool on `server`: counts its start and its charge in `ledger`, after
 * `arguments.ms` (or `defaultMs`) of work, and answers `charged <amount>`.
 */
export function registerCharge(
  server: McpServerV2,
  ledger: { started: number; charges: number },
  defaultMs = 0,
): void {
  server.registerTool(
    'charge',
    { inputSchema: z.object({ amount: z.number(), ms: z.number().optional() }) },
    async ({ amount, ms }) => {
      ledger.started++;
      await new Promise((r) => setTimeout(r, ms ?? defaultMs));
      ledger.charges++;
      return { content: [{ type: 'text' as const, text: `charged ${amount}` }] };
    },
  );
}
