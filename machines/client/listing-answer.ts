import { JsonRpcCode } from '../codes.js';
import { isResponse, type JsonRpcError, type JsonRpcMessage, type RequestId } from '../jsonrpc.js';
import { DEFAULT_MAX_MESSAGE_BYTES, overByteCap } from './limits.js';

/**
 * How the 2026-07-28 client reads a `server/discover` or `tools/list` answer while it passes it on to the
 * application (src/client/modern/pass-listing.ts): the answer is handed on as it arrives, the exchange
 * ends with the request's own response (a server may keep an event stream open with keep-alives after
 * it, issue 22 item 8), and no answer is taken beyond a byte cap (a 100 MiB body was buffered whole).
 * Pure: the runtime reads, these decide.
 */

/** Default cap on one discover or list answer's body: the bound on one message. */
export const DEFAULT_MAX_LISTING_BYTES = DEFAULT_MAX_MESSAGE_BYTES;

/** The error reason an answer over the cap is delivered with (`error.data.reason`). */
export const LISTING_TOO_LARGE = 'answer_too_large';

/** What the runtime does after reading `bytes` of the answer so far (the cap every body has). */
export const listingOverCap = overByteCap;

/** The request's own response: it ends the exchange, whatever the server keeps sending after it. */
export function endsListing(message: JsonRpcMessage, requestId: RequestId): boolean {
  return isResponse(message) && message.id === requestId;
}

/**
 * What an answer over the cap becomes. A 2xx: the JSON-RPC error for the request (`listingTooLargeError`).
 * Any other status goes on as that status, without its body: the status is the answer (a 401 starts the
 * SDK's authorization flow, a 404 its session handling), and a 100 MiB error page must not hide it.
 */
export function overCapAnswer(status: number): 'error-for-request' | 'status-without-body' {
  return status >= 200 && status < 300 ? 'error-for-request' : 'status-without-body';
}

/**
 * What the application gets for an answer over the cap: a JSON-RPC error for its request, so its call
 * fails now and says why (rather than at its own timeout, or with a parse error of a truncated body).
 */
export function listingTooLargeError(requestId: RequestId, method: string, limit: number): JsonRpcError {
  return {
    jsonrpc: '2.0',
    id: requestId,
    error: {
      code: JsonRpcCode.MALFORMED_ANSWER,
      message: `The server's ${method} answer exceeded ${limit} bytes; not read further`,
      data: { reason: LISTING_TOO_LARGE, limit },
    },
  };
}
