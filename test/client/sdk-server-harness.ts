import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  type EventId,
  type EventStore,
  StreamableHTTPServerTransport,
  type StreamId,
} from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { createParser } from 'eventsource-parser';
import { z } from 'zod';
import type { FetchLike } from '../../src/index.js';
import { listenOnLoopback } from '../support/listen.js';
import { sdkSessionRouter } from '../support/sdk-session-router.js';

/**
 * The OFFICIAL SDK server, wired the way the SDK's own example (`simpleStreamableHttp`) does it: one
 * `StreamableHTTPServerTransport` + `McpServer` per session in a map keyed by session id, created on a POST
 * initialize without a session id, every other request routed by `mcp-session-id` (unknown id: 404), a
 * real node http server on 127.0.0.1. Resumability through `MemoryEventStore` below. Nothing is mocked.
 */

/** A small, correct `EventStore`: one ordered list per stream, ids `${streamId}_${counter}`. */
export class MemoryEventStore implements EventStore {
  private readonly streams = new Map<StreamId, Array<{ id: EventId; message: JSONRPCMessage }>>();
  private readonly index = new Map<EventId, { streamId: StreamId; position: number }>();
  private counter = 0;
  /** Every `replayEventsAfter` call: the cursor asked for and the ids sent. */
  readonly replays: Array<{ after: EventId; sent: EventId[] }> = [];

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    const id = `${streamId}_${++this.counter}`;
    let list = this.streams.get(streamId);
    if (!list) {
      list = [];
      this.streams.set(streamId, list);
    }
    this.index.set(id, { streamId, position: list.length });
    list.push({ id, message });
    return id;
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return this.index.get(eventId)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const at = this.index.get(lastEventId);
    if (!at) throw new Error(`unknown event id ${lastEventId}`);
    const list = this.streams.get(at.streamId) ?? [];
    const replay = { after: lastEventId, sent: [] as EventId[] };
    this.replays.push(replay);
    // Reads the live list: an event stored while the replay awaits `send` is replayed too.
    for (let i = at.position + 1; i < list.length; i++) {
      const event = list[i] as { id: EventId; message: JSONRPCMessage };
      replay.sent.push(event.id);
      await send(event.id, event.message);
    }
    return at.streamId;
  }

  /** The ids stored on a stream, in order. */
  idsOf(streamId: StreamId): EventId[] {
    return (this.streams.get(streamId) ?? []).map((e) => e.id);
  }
}

export interface SdkSession {
  readonly transport: StreamableHTTPServerTransport;
  readonly server: McpServer;
  readonly store: MemoryEventStore;
}

export interface SdkWorld {
  readonly url: string;
  readonly httpServer: http.Server;
  /** Live sessions by id: exactly what the router knows. */
  readonly sessions: Map<string, SdkSession>;
  /** Every session ever created, in order (closed ones included). */
  readonly created: SdkSession[];
  /** Side effects of `charge`, by key. */
  readonly charges: Map<string, number>;
  /** Tool invocations, by tool name. */
  readonly invocations: Map<string, number>;
  /** The server forgets the session as an idle-TTL expiry does: closes its transport (which unmaps it). */
  expire(sessionId: string): Promise<void>;
  close(): Promise<void>;
}

export interface SdkServerOptions {
  /** `retryInterval` of the SDK transport: sent as `retry:` in the priming event of POST streams. */
  readonly retryInterval?: number;
  /** SSE keep-alive comment interval; the SDK default is 15 s. */
  readonly keepAliveMs?: number;
  /**
   * Sees every request first (a bearer check, an authorization server on the same origin): true when it
   * answered the request itself. Given the server's URL once it listens.
   */
  readonly gate?: (req: http.IncomingMessage, res: http.ServerResponse, url: string) => boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function sdkServer(world: Pick<SdkWorld, 'charges' | 'invocations'>): McpServer {
  const server = new McpServer({ name: 'sdk-interop', version: '1.0.0' }, { capabilities: { logging: {} } });
  const count = (tool: string) => world.invocations.set(tool, (world.invocations.get(tool) ?? 0) + 1);
  server.registerTool(
    'echo',
    { inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } },
    async ({ text }) => {
      count('echo');
      return { content: [{ type: 'text', text }] };
    },
  );
  server.registerTool(
    'chatty',
    { inputSchema: { count: z.number(), intervalMs: z.number() } },
    async ({ count: n, intervalMs }, extra) => {
      count('chatty');
      const progressToken = extra._meta?.progressToken;
      for (let i = 1; i <= n; i++) {
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress: i, total: n },
          });
        }
        await sleep(intervalMs);
      }
      return { content: [{ type: 'text', text: `sent ${n}` }] };
    },
  );
  server.registerTool('slow', { inputSchema: { ms: z.number() } }, async ({ ms }) => {
    count('slow');
    await sleep(ms);
    return { content: [{ type: 'text', text: `slept ${ms}` }] };
  });
  server.registerTool(
    'charge',
    { inputSchema: { key: z.string(), delayMs: z.number().optional() } },
    async ({ key, delayMs }) => {
      count('charge');
      const n = (world.charges.get(key) ?? 0) + 1;
      world.charges.set(key, n);
      if (delayMs) await sleep(delayMs);
      return { content: [{ type: 'text', text: `charged ${key} (${n})` }] };
    },
  );
  return server;
}

export async function startSdkServer(options: SdkServerOptions = {}): Promise<SdkWorld> {
  const sessions = new Map<string, SdkSession>();
  const created: SdkSession[] = [];
  const charges = new Map<string, number>();
  const invocations = new Map<string, number>();

  let url = '';
  const router = sdkSessionRouter({
    lookup: (id) => sessions.get(id)?.transport,
    initialize: async () => {
      const store = new MemoryEventStore();
      const server = sdkServer({ charges, invocations });
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: store,
        retryInterval: options.retryInterval,
        keepAliveMs: options.keepAliveMs,
        onsessioninitialized: (id) => {
          sessions.set(id, session);
        },
      });
      const session: SdkSession = { transport, server, store };
      created.push(session);
      transport.onclose = () => {
        const id = transport.sessionId;
        if (id !== undefined && sessions.get(id) === session) sessions.delete(id);
      };
      await server.connect(transport);
      return transport;
    },
  });
  const httpServer = http.createServer((req, res) => {
    if (options.gate?.(req, res, url)) return;
    void router(req, res);
  });
  const port = await listenOnLoopback(httpServer);
  url = `http://127.0.0.1:${port}/mcp`;

  return {
    url,
    httpServer,
    sessions,
    created,
    charges,
    invocations,
    async expire(sessionId) {
      const session = sessions.get(sessionId);
      if (!session) throw new Error(`no session ${sessionId}`);
      await session.transport.close();
      sessions.delete(sessionId);
    },
    async close() {
      for (const session of created) {
        await session.transport.close().catch(() => undefined);
        await session.server.close().catch(() => undefined);
      }
      sessions.clear();
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}

/** One HTTP exchange as our client made it, and what came back (SSE events as they were handed over). */
export interface WireExchange {
  readonly seq: number;
  readonly method: string;
  readonly requestHeaders: Headers;
  readonly body: string | undefined;
  readonly startedAt: number;
  status?: number;
  responseHeaders?: Headers;
  /** SSE events passed to the client, in order. */
  readonly events: Array<{ id?: string; data: string }>;
  /** `retry:` values seen on this response. */
  readonly retries: number[];
  /** How the response body ended: cleanly, with an error (a cut), or not yet. */
  end?: { kind: 'closed' | 'errored' | 'cancelled'; at: number };
  /** Set when the test cut this response on the client's side. */
  cutAt?: number;
}

/**
 * The `fetch` our transport is given: records every exchange and can cut a response after its n-th SSE
 * event. A cut errors the client's body at once; `halfOpen` leaves the server's side of the connection
 * attached (a client-side network loss the server has not noticed), else the connection is closed.
 */
export class Wire {
  readonly exchanges: WireExchange[] = [];
  private plan: { match: (x: WireExchange) => boolean; afterEvents: number; halfOpen: boolean } | undefined;
  private readonly detached: Array<ReadableStreamDefaultReader<Uint8Array>> = [];

  cutNext(match: (x: WireExchange) => boolean, afterEvents: number, halfOpen = false): void {
    this.plan = { match, afterEvents, halfOpen };
  }

  filter(match: (x: WireExchange) => boolean): WireExchange[] {
    return this.exchanges.filter(match);
  }

  /** Releases half-open connections kept by `cutNext(…, true)`. */
  async dispose(): Promise<void> {
    for (const reader of this.detached.splice(0)) await reader.cancel().catch(() => undefined);
  }

  readonly fetch: FetchLike = async (url, init) => {
    const x: WireExchange = {
      seq: this.exchanges.length,
      method: (init?.method ?? 'GET').toUpperCase(),
      requestHeaders: new Headers(init?.headers),
      body: typeof init?.body === 'string' ? init.body : undefined,
      startedAt: performance.now(),
      events: [],
      retries: [],
    };
    this.exchanges.push(x);
    let plan: typeof this.plan;
    if (this.plan?.match(x)) {
      plan = this.plan;
      this.plan = undefined;
    }
    // Half-open: the client's abort must not reach the server either (the network is gone).
    const signal = init?.signal ?? undefined;
    const response = await fetch(url, plan?.halfOpen ? { ...init, signal: undefined } : init);
    x.status = response.status;
    x.responseHeaders = response.headers;
    if (!response.body || !response.headers.get('content-type')?.startsWith('text/event-stream'))
      return response;
    const source = response.body.getReader();
    const decoder = new TextDecoder();
    let cut = false;
    let out!: ReadableStreamDefaultController<Uint8Array>;
    const doCut = () => {
      cut = true;
      x.cutAt = performance.now();
      x.end = { kind: 'errored', at: x.cutAt };
      out.error(new TypeError('terminated: connection cut by the test'));
      if (plan?.halfOpen) {
        this.detached.push(source);
        // Keep draining, so the server's writes never block; nothing more reaches the client.
        void (async () => {
          for (;;) if ((await source.read().catch(() => ({ done: true }))).done) return;
        })();
      } else void source.cancel().catch(() => undefined);
    };
    // Frames are forwarded one complete event at a time, so a cut falls exactly between two events.
    let pending = '';
    const parser = createParser({
      onEvent: (e) => x.events.push({ id: e.id, data: e.data }),
      onRetry: (ms) => x.retries.push(ms),
    });
    const pump = async () => {
      try {
        for (;;) {
          const { done, value } = await source.read();
          if (cut) return;
          if (done) {
            x.end = { kind: 'closed', at: performance.now() };
            out.close();
            return;
          }
          pending += decoder.decode(value, { stream: true });
          for (let end = pending.indexOf('\n\n'); end >= 0 && !cut; end = pending.indexOf('\n\n')) {
            const frame = pending.slice(0, end + 2);
            pending = pending.slice(end + 2);
            parser.feed(frame);
            out.enqueue(new TextEncoder().encode(frame));
            const carried = x.events.filter((e) => e.data !== '').length;
            if (plan && frame.includes('data:') && carried >= plan.afterEvents) {
              // Let the client read what was handed over before the error lands.
              await new Promise((r) => setTimeout(r, 20));
              doCut();
            }
          }
        }
      } catch (error) {
        if (cut) return;
        x.end = { kind: 'errored', at: performance.now() };
        out.error(error);
      }
    };
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        out = controller;
      },
      cancel: (reason) => {
        if (cut) return;
        cut = true;
        x.end = { kind: 'cancelled', at: performance.now() };
        return source.cancel(reason);
      },
    });
    signal?.addEventListener('abort', () => {
      if (!cut && plan?.halfOpen) doCut();
    });
    if (plan?.afterEvents === 0) setTimeout(() => !cut && doCut(), 20);
    void pump();
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

export const isPost = (method: string) => (x: WireExchange) =>
  x.method === 'POST' && (x.body ?? '').includes(`"method":"${method}"`);
export const isToolCall = (tool: string) => (x: WireExchange) =>
  isPost('tools/call')(x) && (x.body ?? '').includes(`"name":"${tool}"`);
export const isResume = (x: WireExchange) => x.method === 'GET' && x.requestHeaders.has('last-event-id');
export const isPlainGet = (x: WireExchange) => x.method === 'GET' && !x.requestHeaders.has('last-event-id');
export const sessionOf = (x: WireExchange) => x.requestHeaders.get('mcp-session-id');

/** Polls `check` every 5 ms until it holds or `timeoutMs` passes (then throws with `what`). */
export async function until(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}
