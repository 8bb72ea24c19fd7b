import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { Reply } from './reply.js';
import type { SseSink } from './sse.js';

/**
 * Writing a Reply as a Web `Response` (for `fetch` handlers) and as a Node response. The Node path goes
 * through the Web one so both stacks behave the same; the cost is one stream adapter.
 */
const encoder = new TextEncoder();

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache, no-transform',
  Connection: 'keep-alive',
};

export function toResponse(reply: Reply): Response {
  if (reply.kind === 'empty') return new Response(null, { status: reply.status, headers: reply.headers });
  if (reply.kind === 'json') {
    return new Response(JSON.stringify(reply.body), {
      status: reply.status,
      headers: { ...reply.headers, 'Content-Type': 'application/json' },
    });
  }
  let sink: WebSink | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      sink = new WebSink(controller);
      void Promise.resolve(reply.start(sink)).catch(() => sink?.end());
    },
    cancel() {
      sink?.gone();
    },
  });
  return new Response(body, { status: 200, headers: { ...reply.headers, ...SSE_HEADERS } });
}

class WebSink implements SseSink {
  closed = false;
  private readonly listeners: Array<() => void> = [];
  constructor(private readonly controller: ReadableStreamDefaultController<Uint8Array>) {}
  write(chunk: string): void {
    if (this.closed) return;
    this.controller.enqueue(encoder.encode(chunk));
  }
  end(): void {
    if (this.closed) return;
    this.controller.close();
    this.gone();
  }
  /** The reader went away (client disconnected) or we ended. */
  gone(): void {
    if (this.closed && this.listeners.length === 0) return;
    this.closed = true;
    for (const l of this.listeners.splice(0)) l();
  }
  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.listeners.push(listener);
  }
}

/** A Node request as a Web Request (the body streams; nothing is buffered here). */
export function toWebRequest(req: IncomingMessage, base: string): Request {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (Array.isArray(v)) for (const item of v) headers.append(k, item);
    else if (v !== undefined) headers.set(k, v);
  }
  const method = req.method ?? 'GET';
  const hasBody = method !== 'GET' && method !== 'HEAD';
  return new Request(new URL(req.url ?? '/', base), {
    method,
    headers,
    body: hasBody ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : undefined,
    duplex: 'half',
  } as RequestInit);
}

/** Writes a Web Response to a Node response; a client that goes away cancels the body (and its sink). */
export async function writeNodeResponse(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((v, k) => {
    headers[k] = v;
  });
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  res.on('close', () => void reader.cancel().catch(() => undefined));
  if (headers['content-type'] === 'text/event-stream') res.flushHeaders();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch {
    // The client went away mid-stream; nothing to tell it.
  }
  res.end();
}

/** Reads a body up to `limit` bytes; `undefined` when it is larger (the rest is not read). */
export async function readLimited(request: Request, limit: number): Promise<string | undefined> {
  if (!request.body) return '';
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
