import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../machines/jsonrpc.js';
import type { EventLog } from '../../src/server/event-log.js';
import { writeNodeResponse } from '../../src/server/http.js';
import { createKeyedRequests, type KeyedRequestsOptions } from '../../src/server/keyed/index.js';
import type { MemoStore } from '../../src/server/memo-store.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * A loopback HTTP server in front of a REAL official v2 server (`createMcpHandler`), whose handler hands
 * every request to `keyed.serve(call, run)` first, with `run` on the v2 handler detached from the client.
 * It stands in for createContinuityServer's modern endpoint until that is merged; nothing here decides.
 */
export const PROTOCOL = '2026-07-28';

/** What the tools did, for the tests to count. */
export interface Ledger {
  charges: number;
  /** Charges whose body saw its abort signal before the side effect. */
  aborted: number;
  started: number;
}

/** `charge`: 1.5 s, progress at 100, 500, 900 and 1300 ms (400 ms apart: longer than a 300 ms idle cut). */
export const CHARGE_PROGRESS_AT = [100, 500, 900, 1300];
export const CHARGE_MS = 1500;

export function toyServer(ledger: Ledger): McpServer {
  const server = new McpServer({ name: 'keyed-toy', version: '1.0.0' });
  server.registerTool(
    'charge',
    { description: 'charges once, in 1.5 s', inputSchema: z.object({ amount: z.number() }) },
    async ({ amount }, ctx) => {
      ledger.started += 1;
      const token = ctx.mcpReq._meta?.progressToken;
      const start = Date.now();
      for (const [i, at] of CHARGE_PROGRESS_AT.entries()) {
        await sleepUntil(start + at, ctx.mcpReq.signal);
        if (ctx.mcpReq.signal.aborted) break;
        if (token !== undefined) {
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken: token, progress: i + 1, total: CHARGE_PROGRESS_AT.length },
          });
        }
      }
      await sleepUntil(start + CHARGE_MS, ctx.mcpReq.signal);
      if (ctx.mcpReq.signal.aborted) {
        ledger.aborted += 1;
        return { content: [{ type: 'text', text: 'aborted' }], isError: true };
      }
      ledger.charges += 1;
      return { content: [{ type: 'text', text: `charged ${amount} (#${ledger.charges})` }] };
    },
  );
  server.registerTool(
    'chatty',
    {
      description: 'sends `count` progress notifications, then answers',
      inputSchema: z.object({ count: z.number() }),
    },
    async ({ count }, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      for (let i = 1; i <= count; i++) {
        if (token !== undefined) {
          await ctx.mcpReq.notify({
            method: 'notifications/progress',
            params: { progressToken: token, progress: i },
          });
        }
      }
      return { content: [{ type: 'text', text: `said ${count}` }] };
    },
  );
  return server;
}

function sleepUntil(at: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, Math.max(0, at - Date.now()));
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export interface KeyedServer {
  readonly url: string;
  readonly port: number;
  readonly ledger: Ledger;
  readonly keyed: ReturnType<typeof createKeyedRequests>;
  /** Stops accepting, closes open responses, the SDK handler and the keyed runtime (not the log or memo). */
  close(): Promise<void>;
}

export interface KeyedServerOptions extends Omit<KeyedRequestsOptions, 'log' | 'memo'> {
  readonly log: EventLog;
  readonly memo: MemoStore;
  /** Shared between instances of one test (two instances charging one account). */
  readonly ledger?: Ledger;
}

/** Headers the v2 handler checks on a 2026-07-28 request (SHTTP §Request Metadata). */
export function modernHeaders(message: JsonRpcMessage): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL,
  };
  if ('method' in message) {
    headers['mcp-method'] = message.method;
    const name = (message.params as { name?: unknown } | undefined)?.name;
    if (typeof name === 'string') headers['mcp-name'] = name;
  }
  return headers;
}

export async function startKeyedServer(options: KeyedServerOptions): Promise<KeyedServer> {
  const ledger = options.ledger ?? { charges: 0, aborted: 0, started: 0 };
  const handler = createMcpHandler(() => toyServer(ledger), { legacy: 'reject', responseMode: 'auto' });
  const keyed = createKeyedRequests(options);
  const run = (message: JsonRpcRequest, signal: AbortSignal): Promise<Response> =>
    handler.fetch(
      new Request('http://127.0.0.1/mcp', {
        method: 'POST',
        headers: modernHeaders(message),
        body: JSON.stringify(message),
        signal,
      }),
    );
  const open = new Set<ServerResponse>();
  const server: Server = createServer((req, res) => {
    open.add(res);
    res.on('close', () => open.delete(res));
    void serveOne(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  async function serveOne(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
    const request = new Request(`http://127.0.0.1${req.url ?? '/'}`, {
      method: req.method ?? 'POST',
      headers,
      body: req.method === 'POST' ? text : undefined,
      signal: abort.signal,
    });
    let message: JsonRpcMessage | undefined;
    try {
      message = JSON.parse(text) as JsonRpcMessage;
    } catch {
      message = undefined;
    }
    const keyedAnswer =
      message && typeof message === 'object' && 'method' in message
        ? keyed.serve({ message: message as JsonRpcRequest, principal: principalOf(req), request }, run)
        : undefined;
    const response = await (keyedAnswer ?? handler.fetch(request));
    // The runtime's own writer: the client going away cancels the body (a transport fact).
    await writeNodeResponse(response, res);
  }
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    ledger,
    keyed,
    async close() {
      await keyed.close();
      for (const res of open) res.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections?.();
      await handler.close();
    },
  };
}

/** Who is calling: the tests name principals in a header (a stand-in for `authenticate`). */
function principalOf(req: IncomingMessage): string | undefined {
  const p = req.headers['x-test-principal'];
  return typeof p === 'string' ? p : undefined;
}

/** A keyed `tools/call` as a 2026-07-28 client sends it. */
export function keyedCall(
  id: number | string,
  name: string,
  args: Record<string, unknown>,
  key: string,
  extra: { lastEventId?: string | null; progressToken?: string | number } = {},
): JsonRpcRequest {
  const meta: Record<string, unknown> = {
    'io.modelcontextprotocol/protocolVersion': PROTOCOL,
    'io.modelcontextprotocol/clientInfo': { name: 'keyed-test', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': {},
    [ContinuityMeta.idempotencyKey]: key,
  };
  if (extra.lastEventId !== undefined) meta[ContinuityMeta.lastEventId] = extra.lastEventId;
  if (extra.progressToken !== undefined) meta.progressToken = extra.progressToken;
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: meta } };
}

export function cancelFor(requestId: number | string, key: string): JsonRpcMessage {
  return {
    jsonrpc: '2.0',
    method: 'notifications/cancelled',
    params: {
      requestId,
      reason: 'user',
      _meta: {
        'io.modelcontextprotocol/protocolVersion': PROTOCOL,
        [ContinuityMeta.idempotencyKey]: key,
      },
    },
  };
}

export interface SseEvent {
  readonly id?: string;
  readonly message: JsonRpcMessage;
}

/** One attempt over plain fetch: the events it got (SSE or JSON), how it ended, and its status. */
export interface AttemptResult {
  readonly status: number;
  readonly events: SseEvent[];
  /** The JSON-RPC response, if the attempt got one. */
  readonly response?: JsonRpcMessage;
  readonly cut: boolean;
  readonly retryAfter?: string | null;
}

export async function post(
  url: string,
  message: JsonRpcMessage,
  timeoutMs = 20_000,
  headers: Record<string, string> = {},
): Promise<AttemptResult> {
  const events: SseEvent[] = [];
  let status = 0;
  let retryAfter: string | null = null;
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { ...modernHeaders(message), ...headers },
      body: JSON.stringify(message),
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = res.status;
    retryAfter = res.headers.get('retry-after');
    if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      const text = await res.text();
      const m = text ? (JSON.parse(text) as JsonRpcMessage) : undefined;
      return { status, events, response: m, cut: false, retryAfter };
    }
    const text = res.body ? await readAll(res.body, events) : '';
    void text;
  } catch {
    return { status, events, response: events.find(isAnswer)?.message, cut: true, retryAfter };
  }
  return { status, events, response: events.find(isAnswer)?.message, cut: false, retryAfter };
}

const isAnswer = (e: SseEvent): boolean => 'result' in e.message || 'error' in e.message;

async function readAll(body: ReadableStream<Uint8Array>, events: SseEvent[]): Promise<string> {
  const { createParser } = await import('eventsource-parser');
  const parser = createParser({
    onEvent: (e) => {
      if (e.data)
        events.push({ ...(e.id ? { id: e.id } : {}), message: JSON.parse(e.data) as JsonRpcMessage });
    },
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return '';
    parser.feed(decoder.decode(value, { stream: true }));
  }
}

/**
 * The client side of the extension over plain fetch: re-issues after every cut with the same key and the
 * last event id it saw, bounded in attempts. Returns every attempt and the events delivered overall.
 */
export async function callWithReissues(
  url: string,
  name: string,
  args: Record<string, unknown>,
  key: string,
  maxAttempts = 20,
): Promise<{ attempts: AttemptResult[]; events: SseEvent[]; response?: JsonRpcMessage; ids: Array<number> }> {
  const attempts: AttemptResult[] = [];
  const events: SseEvent[] = [];
  let lastEventId: string | null | undefined;
  const ids: number[] = [];
  for (let i = 1; i <= maxAttempts; i++) {
    ids.push(i);
    const extra = { progressToken: `p${i}`, ...(lastEventId === undefined ? {} : { lastEventId }) };
    const a = await post(url, keyedCall(i, name, args, key, extra));
    attempts.push(a);
    events.push(...a.events);
    const lastWithId = [...a.events].reverse().find((e) => e.id !== undefined);
    if (lastWithId?.id) lastEventId = lastWithId.id;
    else if (lastEventId === undefined) lastEventId = null;
    if (a.response) return { attempts, events, response: a.response, ids };
  }
  return { attempts, events, ids };
}
