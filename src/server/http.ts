import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { BodyRead } from './incoming.js';
import { NodeCut } from './node-cut.js';
import type { Reply } from './reply.js';
import { SSE_PACE_BYTES } from './sse.js';
import { processWakes, type WakePort } from './wake-port.js';
import { type FrameQueue, WebSink } from './web-sink.js';

/**
 * Writing a Reply as a Web `Response` (for `fetch` handlers) and straight to a Node response. The Node
 * path (`writeNodeReply`) builds no Web stream; a Web `Response` (the modern endpoint's) is written to
 * Node by `writeNodeResponse`.
 */

/**
 * No `Connection` header: the HTTP stack decides. Forcing `keep-alive` made Node keep a connection open
 * after the stream even when the client sent `Connection: close` (or spoke HTTP/1.0), and HTTP/2
 * forbids the header altogether.
 */
export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache, no-transform',
};

/**
 * Backpressure. An SSE response holds at most this many bytes its reader has not taken. A reader that
 * falls further behind has its response ended (cleanly, after what is queued): it resumes with
 * Last-Event-ID, and everything it missed is replayed from the event log, where every event is stored
 * before it is written (or, if the log has evicted it meanwhile, the client is told exactly what it lost).
 * Without a bound, one slow reader made the server buffer its whole stream. A single frame larger than
 * this is still written whole, so every response makes progress.
 *
 * 16 MiB: well above a full replay of the default log (1,000 events per stream) and above the backlog of
 * a tool that outruns a healthy reader (benchmark row 1: 100,000 notifications, ~13 MB in all). A producer
 * that awaits its sends never gets here: it waits while its reader is `SSE_PACE_BYTES` behind (see
 * `SseSink.whenWritable`). One that does not await can outrun its reader until the reader is cut.
 */
export const SSE_MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/**
 * A response whose reader takes nothing for this long while output waits is ended: a Node socket is
 * destroyed, a Web stream closed. Either way a producer waiting for it (pacing) is released.
 */
export const SSE_WRITE_STALL_MS = 60_000;

export interface SseLimits {
  /** Default {@link SSE_MAX_BUFFERED_BYTES}. */
  readonly maxBufferedBytes?: number;
  /** Default {@link SSE_PACE_BYTES}. */
  readonly paceBytes?: number;
  /** Default {@link SSE_WRITE_STALL_MS}. */
  readonly stallMs?: number;
}

/** `wakes`: the host's timer port (the stall check of a paced reader is a wake-up of it). */
export function toResponse(reply: Reply, limits: SseLimits = {}, wakes: WakePort = processWakes): Response {
  if (reply.kind === 'empty') return new Response(null, { status: reply.status, headers: reply.headers });
  if (reply.kind === 'json') {
    return new Response(JSON.stringify(reply.body), {
      status: reply.status,
      headers: { ...reply.headers, 'Content-Type': 'application/json' },
    });
  }
  let sink: WebSink | undefined;
  const maxBufferedBytes = limits.maxBufferedBytes ?? SSE_MAX_BUFFERED_BYTES;
  const body = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        sink = new WebSink(
          controller,
          {
            maxBufferedBytes,
            paceBytes: limits.paceBytes ?? SSE_PACE_BYTES,
            stallMs: limits.stallMs ?? SSE_WRITE_STALL_MS,
          },
          wakes,
        );
        // A start that fails, at once or later, ends the response (the executor settles its request).
        try {
          void Promise.resolve(reply.start(sink)).catch(() => sink?.end());
        } catch {
          sink.end();
        }
      },
      // The reader took a chunk: producers waiting for it may go on.
      pull() {
        sink?.taken();
      },
      cancel() {
        sink?.gone();
      },
    },
    // Counted in bytes: `desiredSize` is then what may still be queued before the reader is too slow.
    { highWaterMark: maxBufferedBytes, size: (chunk) => chunk.byteLength },
  );
  const response = new Response(body, { status: 200, headers: { ...reply.headers, ...SSE_HEADERS } });
  if (sink) sinks.set(response, sink);
  return response;
}

/** The sink behind each SSE Response: the Node writer tells it about its socket. */
const sinks = new WeakMap<Response, WebSink>();

/** A Node request as a Web Request at `url` (the body streams; nothing is buffered here). */
export function toWebRequest(req: IncomingMessage, url: URL): Request {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (Array.isArray(v)) for (const item of v) headers.append(k, item);
    else if (v !== undefined) headers.set(k, v);
  }
  const method = req.method ?? 'GET';
  const hasBody = method !== 'GET' && method !== 'HEAD';
  return new Request(url, {
    method,
    headers,
    body: hasBody ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : undefined,
    duplex: 'half',
  } as RequestInit);
}

/**
 * Writes a Web Response to a Node response; a client that goes away cancels the body (and its sink).
 *
 * Backpressure: the body is always read at once (so nothing piles up in the web stream's queue, whose
 * dequeue is an `Array.shift`), and what the socket has not taken waits in Node's own buffer. When that
 * holds more than `maxBufferedBytes` the reader is too slow: the body is cancelled and the response ends
 * after what is queued; the client resumes with Last-Event-ID (every event is in the log). A socket that
 * then takes nothing for `stallMs` is destroyed. Both decisions are machines/server/slow-reader.ts's,
 * asked through `NodeCut` (as `writeNodeReply` does).
 */
export async function writeNodeResponse(
  response: Response,
  res: ServerResponse,
  stallMs = SSE_WRITE_STALL_MS,
  maxBufferedBytes = SSE_MAX_BUFFERED_BYTES,
  wakes: WakePort = processWakes,
): Promise<void> {
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
  let gone = false;
  const onGone = () => {
    gone = true;
    void reader.cancel().catch(() => undefined);
  };
  res.on('close', onGone);
  // The client may have left while the response was being made: its 'close' has already fired.
  if (res.destroyed) onGone();
  if (headers['content-type'] === 'text/event-stream') res.flushHeaders();
  // Pacing: the sink reads how far behind the socket is, and ends a stalled one by destroying it.
  const sink = sinks.get(response);
  const onDrain = () => sink?.taken();
  if (sink) {
    sink.attachSocket(
      () => res.writableLength,
      () => res.destroy(),
      stallMs,
    );
    res.on('drain', onDrain);
  }
  const cut = new NodeCut(res, maxBufferedBytes);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || gone) break;
      if (cut.write(value)) {
        void reader.cancel().catch(() => undefined);
        break;
      }
    }
  } catch {
    // The client went away mid-stream; nothing to tell it.
  }
  res.off('drain', onDrain);
  await cut.end(stallMs, wakes);
}

/**
 * Writes a Reply straight to a Node response: no Web `Response` or stream in between (a profile of 2025
 * calls showed building one and reading it back out as a tenth of the server's time). Behaves as
 * `toResponse` + `writeNodeResponse`: the same status and headers, and for SSE the same sink, pacing,
 * backpressure bound, stall cut and client-close handling, with the socket's buffer as the only queue.
 */
export async function writeNodeReply(
  reply: Reply,
  res: ServerResponse,
  limits: SseLimits = {},
  wakes: WakePort = processWakes,
): Promise<void> {
  if (reply.kind === 'empty') {
    res.writeHead(reply.status, reply.headers);
    res.end();
    return;
  }
  if (reply.kind === 'json') {
    // Serialized before the head is written: a body that cannot be (a cycle, a BigInt) throws while the
    // caller can still answer 500, not after a 200 went out with nothing behind it.
    const body = JSON.stringify(reply.body);
    res.writeHead(reply.status, { ...reply.headers, 'Content-Type': 'application/json' });
    res.end(body);
    return;
  }
  const stallMs = limits.stallMs ?? SSE_WRITE_STALL_MS;
  const maxBufferedBytes = limits.maxBufferedBytes ?? SSE_MAX_BUFFERED_BYTES;
  res.writeHead(200, { ...reply.headers, ...SSE_HEADERS });
  res.flushHeaders();
  const cut = new NodeCut(res, maxBufferedBytes);
  // The socket's buffer is the queue: `desiredSize` stays at capacity so the sink never cuts on it; the
  // same `NodeCut` as `writeNodeResponse`'s cuts a reader that leaves too much unsent.
  const queue: FrameQueue = {
    desiredSize: maxBufferedBytes,
    enqueue(chunk) {
      if (cut.cut || res.destroyed) return;
      if (cut.write(chunk)) sink.gone();
    },
    close() {},
  };
  const sink = new WebSink(
    queue,
    { maxBufferedBytes, paceBytes: limits.paceBytes ?? SSE_PACE_BYTES, stallMs },
    wakes,
  );
  sink.attachSocket(
    () => res.writableLength,
    () => res.destroy(),
    stallMs,
  );
  const onDrain = () => sink.taken();
  res.on('drain', onDrain);
  const ended = new Promise<void>((resolve) => sink.onClose(resolve));
  res.on('close', () => sink.gone());
  // A client that left while the request was being decided closed the response before the listener
  // existed: its reader is gone now, or a standalone stream would stay attached to nobody.
  if (res.destroyed) sink.gone();
  // A start that fails, at once or later, ends the response (the executor settles its request).
  try {
    void Promise.resolve(reply.start(sink)).catch(() => sink.end());
  } catch {
    sink.end();
  }
  await ended;
  res.off('drain', onDrain);
  await cut.end(stallMs, wakes);
}

/** Reads a body up to `limit` bytes; past it the rest is not read. A body that breaks off is `aborted`. */
export async function readLimited(request: Request, limit: number): Promise<BodyRead> {
  if (!request.body) return { kind: 'text', text: '' };
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel().catch(() => undefined);
        return { kind: 'too-large' };
      }
      chunks.push(value);
    }
  } catch {
    return { kind: 'aborted' };
  }
  return { kind: 'text', text: Buffer.concat(chunks).toString('utf8') };
}
