import type { JsonRpcMessage } from '../jsonrpc.js';
import type { ServerAdvertisement } from '../validity.js';

/**
 * The boundary between the client machines and the world. The machines ask for HTTP exchanges; the
 * runtime (real fetch + SSE parser) or the simulated network performs them and answers with `IoEvent`s.
 */
export interface Exchange {
  readonly method: 'POST' | 'GET';
  readonly sessionId?: string;
  readonly protocolVersion?: string;
  /** Set on every resume: GET + Last-Event-ID is the only way back onto a stream. */
  readonly lastEventId?: string;
  readonly body?: JsonRpcMessage;
}

export type NetworkFault = 'reset' | 'timeout' | 'refused';

export type IoEvent =
  /** A 200 `text/event-stream` response began. */
  | { type: 'http.stream'; sessionId?: string; advertisement?: ServerAdvertisement }
  /** A complete response that is not an event stream (202, a JSON answer, an error status). */
  | {
      type: 'http.response';
      status: number;
      sessionId?: string;
      body?: unknown;
      advertisement?: ServerAdvertisement;
    }
  /** One SSE event. `message` is the parsed JSON-RPC payload; absent for the priming event (empty data). */
  | { type: 'sse.event'; id?: string; event?: string; message?: JsonRpcMessage; data?: string }
  /** The `retry:` field. */
  | { type: 'sse.retry'; ms: number }
  /** Bytes arrived that were not an event (a heartbeat comment): the stream is alive. */
  | { type: 'sse.activity' }
  /** The response body ended cleanly. */
  | { type: 'net.ended' }
  /** The exchange failed at the socket. */
  | { type: 'net.failed'; fault: NetworkFault };
