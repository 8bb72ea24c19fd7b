import type { JsonRpcMessage } from '../../machines/jsonrpc.js';

/**
 * Writing SSE frames (the WHATWG event-stream format). Only writing lives here; clients parse with
 * eventsource-parser. Every frame ends with a blank line; data is one JSON line, so it never needs splitting.
 */
export function eventFrame(id: string, message: JsonRpcMessage): string {
  return `id: ${id}\ndata: ${messageData(message)}\n\n`;
}

/**
 * The JSON text of each message written so far, while the message lives. A memory log keeps the very
 * object that was written live, so a replay reuses its text: `JSON.stringify` was most of a 10,000-event
 * replay's server time (row 3 of docs/benchmarks.md). A message read back from a store is a new object,
 * stringified once. Messages are never changed after they are stored, so the text stays theirs.
 */
const written = new WeakMap<JsonRpcMessage, string>();

function messageData(message: JsonRpcMessage): string {
  let data = written.get(message);
  if (data === undefined) {
    data = JSON.stringify(message);
    written.set(message, data);
  }
  return data;
}

/** The priming event: an id and empty data, so a client can resume before the first real event. */
export function primingFrame(id: string, retryMs: number): string {
  return `id: ${id}\nretry: ${retryMs}\ndata: \n\n`;
}

export function closeFrame(reason: string): string {
  return `event: close\ndata: ${JSON.stringify({ reason })}\n\n`;
}

export const HEARTBEAT_FRAME = ': keepalive\n\n';

/** One open SSE response, whatever the HTTP stack under it. */
export interface SseSink {
  write(chunk: string): void;
  end(): void;
  readonly closed: boolean;
  /** Called once when the client goes away or `end()` is called. */
  onClose(listener: () => void): void;
  /**
   * Pacing: undefined while the reader keeps up; while it is more than {@link SSE_PACE_BYTES} behind, a
   * promise that settles when it has caught up or the sink closes. A producer that awaits it is slowed
   * to its reader's pace instead of having the reader cut (src/server/http.ts, `SSE_MAX_BUFFERED_BYTES`).
   */
  whenWritable?(): Promise<void> | undefined;
}

/** How far behind (bytes written, not yet taken by the reader) a response may fall before producers wait. */
export const SSE_PACE_BYTES = 1024 * 1024;
