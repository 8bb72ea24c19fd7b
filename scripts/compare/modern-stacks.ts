import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import {
  type ContinuityServer,
  continuityFetch,
  createContinuityServer,
  MemoryEventLog,
} from '../../src/index.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { FaultProxy } from '../../src/testing/index.js';

/**
 * The 2026-07-28 stacks of `npm run compare -- --era 2026`. Each is one client, through the `FaultProxy`,
 * to one server "process" that can be restarted on the same port. A stack is a `ModernStackFactory`:
 * adding one (ours, once its client and server exist) is one more entry in `MODERN_STACKS`.
 */
export const PROTOCOL_2026 = '2026-07-28';

/** What the servers did, counted outside them so a restart does not reset it. */
export interface ModernWorld {
  /** Side effects of `charge`, by key. */
  readonly charges: Map<string, number>;
}

export interface ModernStackConfig {
  /** The fault proxy cuts connections idle this long (a load balancer). */
  readonly idleTimeoutMs?: number;
}

export interface CallOptions {
  readonly onprogress?: (progress: number) => void;
}

export interface ModernStack {
  readonly label: string;
  readonly world: ModernWorld;
  readonly proxy: FaultProxy;
  /** One intended `tools/call`, as the application makes it: what this promise settles with is what it got. */
  call(name: string, args: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
  /** Errors the client reported outside any call (`onerror`). */
  readonly errors: string[];
  /** Extra lines for the notes: what the application layer did (re-issues, say). */
  notes(): string[];
  /** The server process dies and a new one starts on the same port; every connection is reset. */
  restart(): void;
  close(): Promise<void>;
}

export type ModernStackFactory = (config: ModernStackConfig) => Promise<ModernStack>;

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

const within = <T>(p: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([p, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms).unref())]);

/**
 * The tools, on the official v2 `McpServer`. `charge {key, ms, progress}` makes its side effect first (the
 * payment provider is called), optionally sends one progress notification, and answers after `ms`; it
 * does not stop when its abort signal fires, as a tool whose side effect is already made cannot.
 */
export function modernToolServer(world: ModernWorld): McpServer {
  const server = new McpServer({ name: 'compare-2026', version: '1.0.0' });
  server.registerTool(
    'charge',
    {
      description: 'charges a card; the provider answers after ms',
      inputSchema: z.object({ key: z.string(), ms: z.number(), progress: z.boolean().optional() }),
    },
    async ({ key, ms, progress }, ctx) => {
      world.charges.set(key, (world.charges.get(key) ?? 0) + 1);
      const token = ctx.mcpReq._meta?.progressToken;
      if (progress && token !== undefined) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken: token, progress: 1, total: 2 },
        });
      }
      await sleep(ms);
      return { content: [{ type: 'text', text: `charged ${key}` }] };
    },
  );
  server.registerTool(
    'echo',
    {
      description: 'echoes its text',
      inputSchema: z.object({ text: z.string() }),
      annotations: { readOnlyHint: true },
    },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  return server;
}

async function listen(handler: http.RequestListener): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

async function closeHttp(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await within(new Promise<void>((r) => server.close(() => r())), 1_000);
}

/**
 * The official v2 server: `createMcpHandler` (2026-07-28; SSE keep-alive off, so an idle balancer cuts a
 * quiet call as it would with the 15 s default and a shorter balancer timeout), on `node:http` through
 * `toNodeHandler`. A restart replaces the handler and resets every connection.
 */
async function officialServer(world: ModernWorld, config: ModernStackConfig) {
  const make = () =>
    createMcpHandler(() => modernToolServer(world), { keepAliveMs: 0, onerror: () => undefined });
  let handler = make();
  let node = toNodeHandler(handler);
  const retired: Array<ReturnType<typeof make>> = [];
  const { server, port } = await listen((req, res) => {
    void node(req, res);
  });
  const proxy = await FaultProxy.start({
    target: { host: '127.0.0.1', port },
    idleTimeoutMs: config.idleTimeoutMs,
  });
  return {
    proxy,
    restart() {
      retired.push(handler);
      handler = make();
      node = toNodeHandler(handler);
      proxy.reset();
      server.closeAllConnections();
    },
    async close() {
      await proxy.close();
      for (const h of [...retired, handler]) await within(h.close(), 1_000);
      await closeHttp(server);
    },
  };
}

/** The official v2 `Client`, pinned to 2026-07-28, with the default `fetch`. */
async function officialClient(url: URL, errors: string[], fetchImpl?: typeof fetch): Promise<Client> {
  const client = new Client(
    { name: 'compare-2026', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: PROTOCOL_2026 } } },
  );
  client.onerror = (e) => errors.push(e.message);
  const transport = new StreamableHTTPClientTransport(url, fetchImpl ? { fetch: fetchImpl } : undefined);
  const connected = await within(
    client.connect(transport).then(() => true),
    5_000,
  );
  if (!connected) throw new Error('connect: no answer within 5 s');
  return client;
}

function callWith(client: Client) {
  return (name: string, args: Record<string, unknown>, options?: CallOptions) =>
    client.callTool(
      { name, arguments: args },
      options?.onprogress ? { onprogress: (p) => options.onprogress?.(p.progress) } : undefined,
    );
}

/** (A) The official v2 client and server, the call made once: what the client returns is what the app gets. */
export const officialV2: ModernStackFactory = async (config) => {
  const world: ModernWorld = { charges: new Map() };
  const server = await officialServer(world, config);
  const errors: string[] = [];
  const client = await officialClient(server.proxy.url(), errors);
  return {
    label: 'official v2',
    world,
    proxy: server.proxy,
    call: callWith(client),
    errors,
    notes: () => [],
    restart: server.restart,
    async close() {
      await within(client.close(), 2_000);
      await server.close();
    },
  };
};

/**
 * (A'') Our client alone: the official v2 `Client` with `fetch: continuityFetch()` against the official v2
 * server (no extension). It cannot make a cut charge safe, so it must say so at once: outcome unknown.
 */
export const oursClientOfficialServer: ModernStackFactory = async (config) => {
  const world: ModernWorld = { charges: new Map() };
  const server = await officialServer(world, config);
  const errors: string[] = [];
  const client = await officialClient(server.proxy.url(), errors, continuityFetch());
  return {
    label: 'official v2 server, our client (continuityFetch)',
    world,
    proxy: server.proxy,
    call: callWith(client),
    errors,
    notes: () => [],
    restart: server.restart,
    async close() {
      await within(client.close(), 2_000);
      await server.close();
    },
  };
};

/** Attempts an application following the spec's "re-issue with a new id" makes in all. */
const REISSUE_ATTEMPTS = 3;

/**
 * (A') The same official v2 stack, with the application doing what 2026-07-28 tells a client whose
 * response stream broke: re-issue the request (the client gives each a new JSON-RPC id), here up to
 * three attempts in all. Only an error counts as a broken stream; a call that never settles is waited for.
 */
export const officialV2Reissuing: ModernStackFactory = async (config) => {
  const stack = await officialV2(config);
  let reissues = 0;
  return {
    ...stack,
    label: 'official v2, app re-issues (spec)',
    async call(name, args, options) {
      for (let attempt = 1; ; attempt++) {
        try {
          return await stack.call(name, args, options);
        } catch (error) {
          if (attempt >= REISSUE_ATTEMPTS) throw error;
          reissues++;
        }
      }
    },
    notes: () => [`the application re-issued ${reissues} time${reissues === 1 ? '' : 's'}`],
  };
};

/**
 * (B) mcp-continuity on 2026-07-28: the official v2 `Client` with `fetch: continuityFetch()`, against
 * `createContinuityServer` serving 2026-07-28 (`modern`) with the continuity extension
 * (`createKeyedRequests` on a `MemoryEventLog` and a `MemoryMemoStore`), the same tools
 * (`modernToolServer`) behind the same `FaultProxy`. `keepStore`: a restart keeps the log and the memo (what
 * a durable SQLite or Redis store gives); otherwise the new process starts with empty ones (memory only).
 */
const oursModernWith =
  (keepStore: boolean): ModernStackFactory =>
  async (config) => {
    const world: ModernWorld = { charges: new Map() };
    let log = new MemoryEventLog();
    let memo = new MemoryMemoStore({ memoWindowMs: 10 * 60_000 });
    const make = () =>
      createContinuityServer({
        createMcpServer: () => {
          throw new Error('no 2025 sessions here');
        },
        eventLog: log,
        heartbeatMs: 0,
        onError: () => undefined,
        modern: {
          createServer: () => modernToolServer(world),
          keepAliveMs: 0,
          keyed: createKeyedRequests({ log, memo }),
        },
      });
    let current = make();
    const retired: ContinuityServer[] = [];
    const { server, port } = await listen((req, res) => current.nodeHandler(req, res));
    const proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port },
      idleTimeoutMs: config.idleTimeoutMs,
    });
    const errors: string[] = [];
    const client = await officialClient(proxy.url(), errors, continuityFetch());
    return {
      label: keepStore ? 'mcp-continuity, store kept across restart' : 'mcp-continuity, memory only',
      world,
      proxy,
      call: callWith(client),
      errors,
      notes: () => [],
      restart() {
        retired.push(current);
        if (!keepStore) {
          log = new MemoryEventLog();
          memo = new MemoryMemoStore({ memoWindowMs: 10 * 60_000 });
        }
        current = make();
        proxy.reset();
        server.closeAllConnections();
      },
      async close() {
        await within(client.close(), 2_000);
        await proxy.close();
        for (const c of [...retired, current]) await within(c.close(), 1_000);
        await closeHttp(server);
      },
    };
  };

export const oursModern = oursModernWith(false);
export const oursModernKept = oursModernWith(true);

/** The stacks `--era 2026` runs, in this order. */
export const MODERN_STACKS: readonly ModernStackFactory[] = [
  officialV2,
  officialV2Reissuing,
  oursClientOfficialServer,
  oursModern,
  oursModernKept,
];
