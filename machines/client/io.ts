import type { JsonRpcMessage, RequestId } from '../jsonrpc.js';
import type { ServerAdvertisement } from '../validity.js';

/**
 * The boundary between the client machines and the world. The machines ask for HTTP exchanges; the
 * runtime (real fetch + SSE parser) or the simulated network performs them and answers with `IoEvent`s.
 */
export interface Exchange {
  readonly method: 'POST' | 'GET';
  /** Which stream asks (its `streamId`): for inspection and tests; never sent. */
  readonly streamId?: string;
  readonly sessionId?: string;
  readonly protocolVersion?: string;
  /** Set on every resume: GET + Last-Event-ID is the only way back onto a stream. */
  readonly lastEventId?: string;
  readonly body?: JsonRpcMessage;
}

export type NetworkFault = 'reset' | 'timeout' | 'refused';

/** One SSE event. `message` is the parsed JSON-RPC payload; absent for the priming event (empty data). */
export interface SseEvent {
  readonly type: 'sse.event';
  readonly id?: string;
  readonly event?: string;
  readonly message?: JsonRpcMessage;
  readonly data?: string;
  /** The data was not a JSON-RPC message (the runtime reported it); `id`: the request it claimed to answer. */
  readonly invalid?: { readonly id?: RequestId };
}

export type IoEvent =
  /** A 200 `text/event-stream` response began. */
  | { type: 'http.stream'; sessionId?: string; advertisement?: ServerAdvertisement }
  /** A complete response that is not an event stream (202, a JSON answer, an error status). */
  | {
      type: 'http.response';
      status: number;
      sessionId?: string;
      body?: unknown;
      /** The `Retry-After` header, as sent (read by the 2026 call's table: a 503 with it did not run). */
      retryAfter?: string;
      /** The `WWW-Authenticate` header of a 401 or 403, as sent (authorization.ts reads it). */
      wwwAuthenticate?: string;
      advertisement?: ServerAdvertisement;
    }
  | SseEvent
  /**
   * The SSE events parsed from one chunk of the body, in order, with the chunk's `retry:` if it had one.
   * The stream takes them as it would take them one by one, in one step: a busy stream costs one machine
   * event per chunk instead of one per message (docs/benchmarks.md, row 1).
   */
  | { type: 'sse.events'; events: readonly SseEvent[]; retryMs?: number }
  /** The `retry:` field. */
  | { type: 'sse.retry'; ms: number }
  /** Bytes arrived that were not an event (a heartbeat comment): the stream is alive. */
  | { type: 'sse.activity' }
  /** The response body ended cleanly. */
  | { type: 'net.ended' }
  /** The exchange failed at the socket. */
  | { type: 'net.failed'; fault: NetworkFault };
