import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenOnLoopback } from '../support/listen.js';

/**
 * A small loopback server that speaks just enough MCP to get a client going (initialize answered as JSON
 * with a session id, notifications accepted) and hands everything else to `misbehave`. It records every
 * request it receives. Stands for a hostile or broken server; never for the client under test.
 */
export interface SeenByServer {
  readonly method: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: unknown;
  readonly at: number;
}

export interface HostileRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly body: { jsonrpc?: string; id?: string | number; method?: string; params?: unknown } | undefined;
  /** How many requests of this kind (same method and JSON-RPC method) came before this one. */
  readonly nth: number;
}

export type Misbehave = (request: HostileRequest) => void;

/** `sessionId` null: a stateless server, which names no session (the conformance suite's `tools_call`). */
export async function hostileServer(misbehave: Misbehave, sessionId: string | null = 'hostile-session') {
  const seen: SeenByServer[] = [];
  const kinds = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: HostileRequest['body'];
      try {
        body = text === '' ? undefined : JSON.parse(text);
      } catch {
        body = undefined;
      }
      seen.push({ method: req.method ?? '', headers: req.headers, body, at: Date.now() });
      const kind = `${req.method} ${body?.method ?? ''}`;
      const nth = kinds.get(kind) ?? 0;
      kinds.set(kind, nth + 1);
      if (req.method === 'POST' && body?.method === 'initialize') {
        res.writeHead(200, {
          'content-type': 'application/json',
          ...(sessionId === null ? {} : { 'mcp-session-id': sessionId }),
        });
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id: body.id,
            result: {
              protocolVersion: (body.params as { protocolVersion?: string })?.protocolVersion,
              capabilities: { tools: {} },
              serverInfo: { name: 'hostile', version: '1' },
            },
          }),
        );
        return;
      }
      if (req.method === 'POST' && body?.method?.startsWith('notifications/') && body.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      if (req.method === 'DELETE') {
        res.writeHead(200).end();
        return;
      }
      misbehave({ req, res, body, nth });
    });
  });
  const port = await listenOnLoopback(server);
  const url = new URL(`http://127.0.0.1:${port}/mcp`);
  return {
    url,
    seen,
    /** Requests other than DELETE whose JSON-RPC method (or HTTP method, for a GET) is `what`. */
    count: (what: string) =>
      seen.filter((s) => (s.body as { method?: string })?.method === what || s.method === what).length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Starts an event stream response. */
export function sse(res: ServerResponse, extra: Record<string, string> = {}): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...extra });
  res.flushHeaders();
}

/** One SSE event carrying `data` as JSON (or as given, when a string). */
export function event(data: unknown, id?: string): string {
  const text = typeof data === 'string' ? data : JSON.stringify(data);
  return `${id === undefined ? '' : `id: ${id}\n`}data: ${text}\n\n`;
}
