import type http from 'node:http';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

/**
 * The official SDK's stateful Streamable HTTP server, routed the way its examples do it: one
 * `StreamableHTTPServerTransport` per session, found by `Mcp-Session-Id`. An unknown id gets 404, and
 * an initialize without an id creates a session. The interop tests, `npm run compare` and `npm run bench`
 * all use it, so the baseline they measure against is one and the same.
 */
export interface SdkSessionRouterOptions {
  /** The transport of a live session, or undefined (404). */
  readonly lookup: (sessionId: string) => StreamableHTTPServerTransport | undefined;
  /** Creates the transport for a new session, already connected to its McpServer. */
  readonly initialize: () => Promise<StreamableHTTPServerTransport>;
  /** A request failed inside the SDK. */
  readonly onError?: (error: unknown) => void;
}

export function sdkSessionRouter(options: SdkSessionRouterOptions) {
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    try {
      let body: unknown;
      if (req.method === 'POST') {
        try {
          body = JSON.parse(await readBody(req));
        } catch {
          jsonError(res, 400, -32700, 'Parse error');
          return;
        }
      }
      const sessionId = req.headers['mcp-session-id'];
      if (typeof sessionId === 'string') {
        const transport = options.lookup(sessionId);
        if (!transport) {
          jsonError(res, 404, -32001, 'Session not found');
          return;
        }
        await transport.handleRequest(req, res, body);
        return;
      }
      if (req.method === 'POST' && isInitializeRequest(body)) {
        const transport = await options.initialize();
        await transport.handleRequest(req, res, body);
        return;
      }
      jsonError(res, 400, -32000, 'Bad Request: No valid session ID provided');
    } catch (error) {
      options.onError?.(error);
      if (!res.headersSent) jsonError(res, 500, -32603, `Internal server error: ${String(error)}`);
      else res.end();
    }
  };
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function jsonError(res: http.ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}
