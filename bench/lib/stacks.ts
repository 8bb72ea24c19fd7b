import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  ContinuityClientTransport,
  type ContinuityServer,
  type ContinuityServerOptions,
  createContinuityServer,
} from '../../src/index.js';
import { sdkSessionRouter } from '../../test/support/sdk-session-router.js';
import { benchMcpServer } from './tools.js';

/** A server on 127.0.0.1 (ephemeral port) serving MCP at `url`. */
export interface RunningServer {
  readonly url: string;
  readonly http: http.Server;
  /** Live sessions, as the server counts them. */
  sessionCount(): number;
  /** Errors the server reported (should stay empty). */
  readonly errors: string[];
  close(): Promise<void>;
}

export type ServerKind = 'ours' | 'sdk' | 'sdk-store';
export type ClientKind = 'ours' | 'sdk';

export const SERVER_LABEL: Record<ServerKind, string> = {
  ours: 'mcp-continuity server',
  sdk: 'SDK server (no event store)',
  'sdk-store': 'SDK server + example InMemoryEventStore',
};
export const CLIENT_LABEL: Record<ClientKind, string> = {
  ours: 'ContinuityClientTransport',
  sdk: 'SDK StreamableHTTPClientTransport',
};

const within = <T>(p: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([p, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms).unref())]);

export async function listen(handler: http.RequestListener): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  // Many idle sessions are opened in the memory row; keep-alive sockets must not pile up timers.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

export async function closeHttp(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await within(new Promise<void>((r) => server.close(() => r())), 2_000);
}

/**
 * createContinuityServer with library defaults (heartbeat 15 s, MemoryEventLog 1000 events/stream), except
 * the session limits: the memory row opens 10,000 sessions from one address, beyond the default share of
 * one principal (1,000).
 */
export async function startOurs(
  options: Partial<ContinuityServerOptions> = {},
): Promise<RunningServer & { continuity: ContinuityServer }> {
  const errors: string[] = [];
  const continuity = createContinuityServer({
    createMcpServer: () => benchMcpServer(),
    onError: (e) => errors.push(String(e)),
    limits: { maxSessions: 1_000_000, maxSessionsPerPrincipal: 1_000_000 },
    ...options,
  });
  const { server, port } = await listen(continuity.nodeHandler);
  return {
    continuity,
    url: `http://127.0.0.1:${port}/mcp`,
    http: server,
    errors,
    sessionCount: () => continuity.sessionCount(),
    async close() {
      await within(continuity.close(), 2_000);
      await closeHttp(server);
    },
  };
}

/**
 * The official SDK server wired as its `simpleStreamableHttp` example: stateful, one
 * `StreamableHTTPServerTransport` + `McpServer` per session in a map, unknown id → 404. `store`: the SDK's
 * example `InMemoryEventStore` (examples/shared/inMemoryEventStore.js), one per session; otherwise none.
 */
export async function startSdk(
  store: boolean,
  createMcpServer: () => McpServer = benchMcpServer,
): Promise<RunningServer> {
  const errors: string[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const created: Array<{ transport: StreamableHTTPServerTransport; server: McpServer }> = [];
  const { server: httpServer, port } = await listen(
    sdkSessionRouter({
      lookup: (id) => sessions.get(id),
      onError: (e) => errors.push(String(e)),
      initialize: async () => {
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          eventStore: store ? new InMemoryEventStore() : undefined,
          onsessioninitialized: (id) => {
            sessions.set(id, transport);
          },
          onsessionclosed: (id) => {
            sessions.delete(id);
          },
        });
        transport.onerror = (e) => errors.push(String(e));
        const server = createMcpServer();
        created.push({ transport, server });
        await server.connect(transport);
        return transport;
      },
    }),
  );
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    http: httpServer,
    errors,
    sessionCount: () => sessions.size,
    async close() {
      for (const c of created) {
        await within(c.transport.close(), 1_000);
        await within(c.server.close(), 1_000);
      }
      await closeHttp(httpServer);
    },
  };
}

export function startServer(kind: ServerKind): Promise<RunningServer> {
  if (kind === 'ours') return startOurs();
  return startSdk(kind === 'sdk-store');
}

export interface RunningClient {
  readonly client: Client;
  readonly errors: string[];
  close(): Promise<void>;
}

/** An SDK `Client` over our transport or the SDK's, connected (initialize done). */
export async function connectClient(kind: ClientKind, url: string): Promise<RunningClient> {
  const errors: string[] = [];
  const transport =
    kind === 'ours'
      ? new ContinuityClientTransport(new URL(url))
      : new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: 'bench', version: '1.0.0' });
  client.onerror = (e) => errors.push(e.message);
  const ok = await within(
    client.connect(transport).then(() => true),
    10_000,
  );
  if (!ok) throw new Error(`${kind} client: connect got no answer within 10 s`);
  return {
    client,
    errors,
    async close() {
      await within(client.close(), 3_000);
    },
  };
}
