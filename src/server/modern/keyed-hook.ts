import type { ContinuitySettings } from '../../../machines/continuity-extension.js';
import type { JsonRpcRequest } from '../../../machines/jsonrpc.js';
import type { WakePort } from '../wake-port.js';

/**
 * The seam between the 2026-07-28 endpoint (`modern/endpoint.ts`: era routing, the official v2 SDK
 * handler) and the continuity extension's keyed requests (`keyed/`: the memo, attach, replay). The
 * endpoint hands every modern `tools/call` and `notifications/cancelled` here first; a request that is
 * not keyed is left to the endpoint, which serves it as the spec says (closing the stream cancels it).
 */
export interface ModernCall {
  /** The parsed JSON-RPC request or notification, as the client sent it. */
  readonly message: JsonRpcRequest;
  /** Who is calling (`authenticate`), or `undefined` when the server has no authentication. */
  readonly principal: string | undefined;
  /** The client's HTTP request (headers; its `signal` fires when the client goes away). */
  readonly request: Request;
  /** The caller's remote address: without `authenticate`, keys are bounded per address as well. */
  readonly address?: string;
  /** Counts a request refused at a bound (the server's `server.limited_requests` metric). */
  readonly limited?: (reason: string, status: number) => void;
}

/**
 * Runs one JSON-RPC request on the application's v2 SDK server, detached from the client's connection:
 * closing the client's stream does not abort it. The SDK answers as it would on the wire (an SSE stream
 * or a JSON body). `signal` aborts the run (explicit cancellation only).
 */
export type RunOnSdk = (message: JsonRpcRequest, signal: AbortSignal) => Promise<Response>;

export interface KeyedRequests {
  /** What `server/discover` advertises in `capabilities.extensions` (docs/continuity-extension.md §2). */
  readonly settings: ContinuitySettings;
  /**
   * Serves `call` if it is keyed (or malformed as a keyed request: -32602); returns `undefined` when it is
   * not keyed, so the endpoint serves it unchanged.
   */
  serve(call: ModernCall, run: RunOnSdk): Promise<Response> | undefined;
  /**
   * The server mounting it gives its timer port: every deadline of the keyed path is then a wake-up asked
   * of the server's one timer (until then, the runtime's own port holds it).
   */
  useWakes?(wakes: WakePort): void;
  /** Stops timers and leases; running work is left to finish or be reported by the next process. */
  close(): Promise<void>;
}
