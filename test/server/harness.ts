import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { z } from 'zod';
import { type ContinuityServerOptions, createContinuityServer } from '../../src/index.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * A real HTTP server on 127.0.0.1 (ephemeral port) running createContinuityServer with a demo SDK
 * McpServer, and a raw SSE client built on fetch + eventsource-parser. Nothing here mocks the server.
 */
export interface DemoWorld {
  /** Non-idempotent side effects per `charge` key, counted outside the server. */
  readonly effects: Map<string, number>;
  /** Lets a test push server-initiated messages (standalone stream) into a session's SDK server. */
  readonly servers: McpServer[];
}

export function demoMcpServer(world: DemoWorld): McpServer {
  const server = new McpServer({ name: 'demo', version: '1.0.0' }, { capabilities: { logging: {} } });
  world.servers.push(server);
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  server.registerTool(
    'charge',
    { inputSchema: { key: z.string(), ms: z.number().optional() } },
    async ({ key, ms }) => {
      world.effects.set(key, (world.effects.get(key) ?? 0) + 1);
      // The payment provider answers slowly: the charge is made, the result takes `ms` to come back.
      if (ms) await new Promise((r) => setTimeout(r, ms));
      return { content: [{ type: 'text', text: `charged ${key}` }] };
    },
  );
  server.registerTool(
    'chatty',
    { inputSchema: { count: z.number(), intervalMs: z.number() }, annotations: { readOnlyHint: true } },
    async ({ count, intervalMs }, extra) => {
      for (let n = 1; n <= count; n++) {
        if (intervalMs > 0) await new Promise((r) => setTimeout(r, intervalMs));
        await extra.sendNotification({
          method: 'notifications/progress',
          params: {
            progressToken: (extra._meta?.progressToken as string | number | undefined) ?? 'chatty',
            progress: n,
          },
        });
      }
      return { content: [{ type: 'text', text: `sent ${count}` }] };
    },
  );
  // Asks the client something (a ping: the smallest server-to-client request) and waits for its answer.
  server.registerTool('ask-client', { inputSchema: {} }, async (_args, extra) => {
    await extra.sendRequest({ method: 'ping' }, EmptyResultSchema, { timeout: 10_000 });
    return { content: [{ type: 'text', text: 'the client answered' }] };
  });
  server.registerTool('slow', { inputSchema: { ms: z.number() } }, async ({ ms }, extra) => {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      // Cancelled by the client: counted under `cancelled`, so a test sees which SDK server heard it.
      extra.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        world.effects.set('cancelled', (world.effects.get('cancelled') ?? 0) + 1);
        resolve();
      });
    });
    return { content: [{ type: 'text', text: `slept ${ms}` }] };
  });
  return server;
}

export async function startServer(options: Partial<ContinuityServerOptions> = {}) {
  const world: DemoWorld = { effects: new Map(), servers: [] };
  const continuity = createContinuityServer({
    createMcpServer: () => demoMcpServer(world),
    heartbeatMs: 0,
    onError: () => undefined,
    ...options,
  });
  const server = http.createServer(continuity.nodeHandler);
  const port = await listenOnLoopback(server);
  return {
    ...world,
    continuity,
    server,
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      await continuity.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export const JSON_AND_SSE = 'application/json, text/event-stream';

export interface SseEvent {
  readonly id?: string;
  readonly event?: string;
  readonly data: string;
}

/** Reads one SSE response: events, retry, comments; waits for what a test expects, with a deadline. */
export class SseReader {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  retry: number | undefined;
  ended = false;
  failed: unknown;
  private waiters: Array<() => void> = [];

  constructor(
    public response: Response,
    private readonly abort: AbortController,
  ) {
    const parser = createParser({
      onEvent: (e: EventSourceMessage) => this.push({ id: e.id, event: e.event, data: e.data }),
      onRetry: (ms: number) => {
        this.retry = ms;
      },
      onComment: (c: string) => {
        this.comments.push(c);
        this.wake();
      },
    });
    void (async () => {
      const reader = response.body?.getReader();
      const decoder = new TextDecoder();
      try {
        for (;;) {
          const r = await reader?.read();
          if (!r || r.done) break;
          parser.feed(decoder.decode(r.value, { stream: true }));
        }
      } catch (error) {
        this.failed = error;
      }
      this.ended = true;
      this.wake();
    })();
  }

  private push(e: SseEvent): void {
    this.events.push(e);
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Messages (events with data), parsed. */
  get messages(): Array<Record<string, unknown>> {
    return this.events.filter((e) => e.data !== '' && e.event === undefined).map((e) => JSON.parse(e.data));
  }

  /** Waits until `done()` holds, or fails after `ms`. */
  async until(done: () => boolean, ms = 5_000, what = 'condition'): Promise<void> {
    const deadline = Date.now() + ms;
    while (!done()) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.events)}`);
      if (this.ended) throw new Error(`stream ended before ${what}; got ${JSON.stringify(this.events)}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  async untilEnd(ms = 5_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!this.ended) {
      if (Date.now() > deadline) throw new Error('timed out waiting for the stream to end');
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  /** Drops the connection from the client side, like a reset. */
  cut(): void {
    this.abort.abort();
  }
}

export async function open(
  url: string,
  init: RequestInit & { headers?: Record<string, string> },
): Promise<SseReader> {
  const abort = new AbortController();
  const response = await fetch(url, { ...init, signal: abort.signal });
  if (response.headers.get('content-type') === 'text/event-stream') return new SseReader(response, abort);
  // Not a stream (an error, or a JSON answer): keep the body readable for the test.
  const text = await response.text();
  const copy = new Response(text, { status: response.status, headers: response.headers });
  const reader = new SseReader(new Response(''), abort);
  return Object.assign(reader, { response: copy });
}

let nextId = 1000;

/** A raw client that speaks the protocol by hand, to test the server without any client library. */
export class RawClient {
  sessionId: string | undefined;
  constructor(
    readonly url: string,
    private readonly extraHeaders: Record<string, string> = {},
  ) {}

  headers(more: Record<string, string> = {}): Record<string, string> {
    return {
      Accept: JSON_AND_SSE,
      'Content-Type': 'application/json',
      'MCP-Protocol-Version': '2025-11-25',
      ...(this.sessionId ? { 'Mcp-Session-Id': this.sessionId } : {}),
      ...this.extraHeaders,
      ...more,
    };
  }

  async initialize(): Promise<SseReader> {
    const r = await open(this.url, {
      method: 'POST',
      headers: this.headers(),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: nextId++,
        method: 'initialize',
        params: {
          protocolVersion: '2025-11-25',
          capabilities: {},
          clientInfo: { name: 'raw', version: '1' },
        },
      }),
    });
    this.sessionId = r.response.headers.get('mcp-session-id') ?? undefined;
    await r.untilEnd();
    await this.notify({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return r;
  }

  notify(message: unknown, more: Record<string, string> = {}): Promise<Response> {
    return fetch(this.url, { method: 'POST', headers: this.headers(more), body: JSON.stringify(message) });
  }

  call(name: string, args: Record<string, unknown>, id: number | string = nextId++): Promise<SseReader> {
    return open(this.url, {
      method: 'POST',
      headers: this.headers(),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name, arguments: args, _meta: { progressToken: id } },
      }),
    });
  }

  get(lastEventId?: string): Promise<SseReader> {
    const headers = this.headers({ Accept: 'text/event-stream' });
    delete headers['Content-Type'];
    return open(this.url, {
      method: 'GET',
      headers: lastEventId ? { ...headers, 'Last-Event-ID': lastEventId } : headers,
    });
  }
}
