import type { JsonRpcMessage } from '../../machines/jsonrpc.js';

/**
 * Writing SSE frames (the WHATWG event-stream format). Only writing lives here; clients parse with
 * eventsource-parser. Every frame ends with a blank line; data is one JSON line, so it never needs splitting.
 * `data` is the message's JSON text when the caller has it already (a log that keeps it: `StoredEvent.data`).
 */
export function eventFrame(id: string, message: JsonRpcMessage, data = JSON.stringify(message)): string {
  return `id: ${id}\ndata: ${data}\n\n`;
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
