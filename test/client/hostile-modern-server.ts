import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { continuityCapability, DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * A loopback server that speaks just enough MCP 2026-07-28 to be reached through `continuityFetch` and
 * hands every POST to `misbehave` with its parsed body. It records every request. Stands for a hostile or
 * broken 2026 server; never for the client under test. `discoverAnswer` answers `server/discover` with
 * the continuity extension advertised (so `tools/call` is keyed).
 */
export interface ModernRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly body: {
    jsonrpc?: string;
    id?: string | number;
    method?: string;
    params?: Record<string, unknown>;
  };
  /** How many requests with this JSON-RPC method came before this one. */
  readonly nth: number;
}

export type ModernMisbehave = (request: ModernRequest) => void;

export const VERSION = '2026-07-28';

export async function hostileModernServer(misbehave: ModernMisbehave) {
  const seen: ModernRequest['body'][] = [];
  const kinds = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: ModernRequest['body'] = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        // Not JSON: handed on as an empty body.
      }
      seen.push(body);
      const kind = body.method ?? '';
      const nth = kinds.get(kind) ?? 0;
      kinds.set(kind, nth + 1);
      misbehave({ req, res, body, nth });
    });
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    count: (method: string) => seen.filter((b) => b.method === method).length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A `server/discover` result advertising the continuity extension (JSON). */
export function discoverAnswer(id: string | number | undefined, memoWindowMs = 600_000) {
  return {
    jsonrpc: '2.0',
    id,
    result: {
      resultType: 'complete',
      supportedVersions: [VERSION],
      capabilities: { tools: {}, ...continuityCapability({ ...DEFAULT_CONTINUITY_SETTINGS, memoWindowMs }) },
      serverInfo: { name: 'hostile-2026', version: '1' },
    },
  };
}

/** The `RequestInit` of a 2026-07-28 POST as the v2 client sends it. */
export function modernInit(
  id: string | number,
  method: string,
  params: Record<string, unknown> = {},
  signal?: AbortSignal,
): RequestInit {
  return {
    method: 'POST',
    ...(signal ? { signal } : {}),
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': VERSION,
      'mcp-method': method,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method,
      params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': VERSION } },
    }),
  };
}

/** Starts an event stream response. */
export function sse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
}

/** One SSE event carrying `data` as JSON. */
export function event(data: unknown, id?: string): string {
  return `${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`;
}

/** Answers with a JSON body. */
export function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A full GC before each heap reading, so the figure is what is retained. */
export async function retainedHeap(): Promise<number> {
  const v8 = await import('node:v8');
  const vm = await import('node:vm');
  if (!globalThis.gc) v8.setFlagsFromString('--expose-gc');
  const gc = (globalThis.gc ?? vm.runInNewContext('gc')) as () => void;
  gc();
  return process.memoryUsage().heapUsed;
}
