import type http from 'node:http';
import { createParser } from 'eventsource-parser';
import { listen } from './stacks.js';
import { progressMessage } from './tools.js';

/**
 * Raw HTTP helpers: fetch + eventsource-parser, no client library. Used for the ceiling (row 1), for
 * timing our server's replay (row 3) and for opening many sessions cheaply (row 4).
 */

export const PROTOCOL_VERSION = '2025-11-25';

export interface SseResult {
  readonly status: number;
  readonly headers: Headers;
  /** Events with data (the priming event's data is empty and is not counted). */
  readonly messages: number;
  /** Id of the first event seen (the priming event, when the server sends one). */
  readonly firstId: string | undefined;
  /** Id of the last event seen (priming included). */
  readonly lastId: string | undefined;
  /** First event with data, parsed (an initialize result, say). */
  readonly first: unknown;
  /** Last event with data, parsed. */
  readonly last: unknown;
  /** Progress notifications whose `progress` was not one more than the previous one's. */
  readonly outOfOrder: number;
  /** performance.now() when the last message was parsed. */
  readonly lastMessageAt: number;
  /** Body text when the answer was not an SSE stream. */
  readonly text?: string;
}

export interface ExchangeOptions {
  /** The whole exchange is aborted (and rejects) after this long. Default 30 s. */
  readonly timeoutMs?: number;
  /** Stop reading (and abort) once this many messages arrived: for streams that stay open after a replay. */
  readonly stopAfter?: number;
  /** Stop reading (and abort) when no byte arrived for this long after the first message. */
  readonly idleEndMs?: number;
}

/**
 * Sends one request and reads the answer to its end. An SSE body is parsed event by event, and every data
 * line is parsed as JSON, as any client must. Bounded by `timeoutMs`.
 */
export async function exchange(
  url: string,
  init: RequestInit & { headers: Record<string, string> },
  options: ExchangeOptions = {},
): Promise<SseResult> {
  const { timeoutMs = 30_000, stopAfter = Number.POSITIVE_INFINITY, idleEndMs } = options;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error(`no end within ${timeoutMs} ms`)), timeoutMs);
  try {
    const response = await fetch(url, { ...init, signal: abort.signal });
    let messages = 0;
    let firstId: string | undefined;
    let lastId: string | undefined;
    let first: unknown;
    let last: unknown;
    let outOfOrder = 0;
    let lastProgress = 0;
    let lastMessageAt = performance.now();
    const result = (text?: string): SseResult => ({
      status: response.status,
      headers: response.headers,
      messages,
      firstId,
      lastId,
      first,
      last,
      outOfOrder,
      lastMessageAt,
      ...(text === undefined ? {} : { text }),
    });
    if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
      return result(await response.text());
    }
    const parser = createParser({
      onEvent: (e) => {
        if (e.id !== undefined) {
          firstId ??= e.id;
          lastId = e.id;
        }
        if (e.data === '') return;
        const parsed = JSON.parse(e.data) as { method?: string; params?: { progress?: number } };
        messages++;
        lastMessageAt = performance.now();
        if (messages === 1) first = parsed;
        last = parsed;
        if (parsed.method === 'notifications/progress') {
          const p = parsed.params?.progress ?? 0;
          if (p !== lastProgress + 1) outOfOrder++;
          lastProgress = p;
        }
      },
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    const idle = Symbol('idle');
    for (;;) {
      let idleTimer: NodeJS.Timeout | undefined;
      const next =
        idleEndMs === undefined || messages === 0
          ? reader.read()
          : Promise.race([
              reader.read(),
              new Promise<typeof idle>((r) => {
                idleTimer = setTimeout(() => r(idle), idleEndMs);
              }),
            ]);
      const chunk = await next;
      clearTimeout(idleTimer);
      if (chunk === idle) {
        abort.abort();
        break;
      }
      if (chunk.done) break;
      parser.feed(decoder.decode(chunk.value, { stream: true }));
      if (messages >= stopAfter) {
        abort.abort();
        break;
      }
    }
    return result();
  } finally {
    clearTimeout(timer);
  }
}

let nextId = 1;

/** A client that speaks the protocol by hand: one session. */
export class RawSession {
  sessionId: string | undefined;
  constructor(readonly url: string) {}

  headers(more: Record<string, string> = {}): Record<string, string> {
    return {
      Accept: 'application/json, text/event-stream',
      'Content-Type': 'application/json',
      'MCP-Protocol-Version': PROTOCOL_VERSION,
      ...(this.sessionId ? { 'Mcp-Session-Id': this.sessionId } : {}),
      ...more,
    };
  }

  /** initialize (answer read to its end), then notifications/initialized. */
  async initialize(): Promise<void> {
    const r = await exchange(this.url, {
      method: 'POST',
      headers: this.headers(),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: nextId++,
        method: 'initialize',
        params: {
          protocolVersion: PROTOCOL_VERSION,
          capabilities: {},
          clientInfo: { name: 'raw', version: '1' },
        },
      }),
    });
    const id = r.headers.get('mcp-session-id');
    if (r.status !== 200 || !id) throw new Error(`initialize: HTTP ${r.status} ${r.text ?? ''}`);
    this.sessionId = id;
    const n = await fetch(this.url, {
      method: 'POST',
      headers: this.headers(),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    await n.arrayBuffer();
    if (n.status !== 202) throw new Error(`notifications/initialized: HTTP ${n.status}`);
  }

  /** tools/call, answer read to its end. */
  call(name: string, args: Record<string, unknown>, timeoutMs = 60_000): Promise<SseResult> {
    const id = nextId++;
    return exchange(
      this.url,
      {
        method: 'POST',
        headers: this.headers(),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name, arguments: args, _meta: { progressToken: id } },
        }),
      },
      { timeoutMs },
    );
  }

  /**
   * GET with Last-Event-ID, read to its end (our server ends a finished request stream after its replay),
   * or as `options` say (the SDK server keeps a resumed stream open).
   */
  resume(lastEventId: string, options: ExchangeOptions = {}): Promise<SseResult> {
    const headers = this.headers({ Accept: 'text/event-stream', 'Last-Event-ID': lastEventId });
    delete headers['Content-Type'];
    return exchange(this.url, { method: 'GET', headers }, options);
  }

  /** DELETE: ends the session. */
  async terminate(): Promise<number> {
    const headers = this.headers();
    delete headers['Content-Type'];
    const r = await fetch(this.url, { method: 'DELETE', headers });
    await r.arrayBuffer();
    return r.status;
  }
}

/**
 * The ceiling: a bare Node http server writing the same SSE frames our server writes
 * (`id: <epoch>-<stream>-<seq>` + `data: <progress notification JSON>`), each built with JSON.stringify and
 * written with its own `res.write` (waiting for 'drain' when the socket buffer is full), then the result
 * frame. No session state, no log, no McpServer, no validation.
 *
 * - `POST /sse?count=N` (any body): the frames alone, for a reader that is not an MCP client.
 * - `/mcp`: just enough MCP for an SDK `Client` to be the reader: `initialize` is answered in JSON with a
 *   session id, notifications and responses get 202, a GET gets an event stream that stays silent, DELETE
 *   200, and `tools/call` of `stream {count}` gets the frames on its own SSE response.
 */
export async function startRawSse(): Promise<{ url: string; close(): Promise<void>; http: http.Server }> {
  let streams = 0;
  const { server, port } = await listen((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/sse') {
      req.resume();
      writeFrames(res, ++streams, Number(url.searchParams.get('count') ?? 0), 1, 1);
      return;
    }
    if (req.method === 'GET') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
      res.flushHeaders();
      return;
    }
    if (req.method !== 'POST') {
      req.resume();
      res.writeHead(200).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        id?: string | number;
        method?: string;
        params?: {
          protocolVersion?: string;
          arguments?: { count?: number };
          _meta?: { progressToken?: string | number };
        };
      };
      if (message.id === undefined || message.method === undefined) {
        res.writeHead(202).end();
        return;
      }
      if (message.method === 'initialize') {
        const result = {
          protocolVersion: message.params?.protocolVersion ?? PROTOCOL_VERSION,
          capabilities: { tools: {} },
          serverInfo: { name: 'raw', version: '1' },
        };
        res.writeHead(200, { 'Content-Type': 'application/json', 'Mcp-Session-Id': 'raw-session' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
        return;
      }
      const count = message.params?.arguments?.count ?? 0;
      writeFrames(res, ++streams, count, message.params?._meta?.progressToken ?? 0, message.id);
    });
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    http: server,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Priming event, `count` progress frames, the result frame: one `res.write` each, honouring backpressure. */
function writeFrames(
  res: http.ServerResponse,
  stream: number,
  count: number,
  progressToken: string | number,
  requestId: string | number,
): void {
  res.writeHead(200, {
    'Content-Type': 'text/event-stream',
    'Cache-Control': 'no-cache, no-transform',
    Connection: 'keep-alive',
  });
  res.write(`id: e-${stream}-0\nretry: 1000\ndata: \n\n`);
  let n = 1;
  const pump = () => {
    while (n <= count) {
      const ok = res.write(
        `id: e-${stream}-${n}\ndata: ${JSON.stringify(progressMessage(progressToken, n))}\n\n`,
      );
      n++;
      if (!ok) {
        res.once('drain', pump);
        return;
      }
    }
    const result = {
      jsonrpc: '2.0',
      id: requestId,
      result: { content: [{ type: 'text', text: `sent ${count}` }] },
    };
    res.end(`id: e-${stream}-${count + 1}\ndata: ${JSON.stringify(result)}\n\n`);
  };
  pump();
}
