import { isRequest, type JsonRpcMessage, type RequestId } from '../jsonrpc.js';
import { timerMs } from './limits.js';

/** How long `close()` waits for the DELETE and the last cursor save when the application set nothing. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 2_000;

/**
 * The deadline of `close()`, in ms from now: the application's `closeTimeoutMs`, else the default, as a
 * timer can take it. The transport runs one timer of this length and stops waiting when it fires.
 */
export function closeDeadlineMs(closeTimeoutMs: number | undefined): number {
  return timerMs(closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS);
}

/**
 * Whether closing sends DELETE for the session: unless the application turned it off, or
 * `terminateSession` already ended the session on the server (a second DELETE would only earn a 404).
 */
export function deletesOnClose(deleteOnClose: boolean | undefined, terminatedAlready: boolean): boolean {
  return deleteOnClose !== false && !terminatedAlready;
}

/**
 * The request a message settles at once, before any answer: a `notifications/cancelled` settles the call
 * it cancels (the server will not answer it). Undefined for every other message.
 */
export function settledByMessage(message: JsonRpcMessage): RequestId | undefined {
  if (!('method' in message) || message.method !== 'notifications/cancelled' || isRequest(message))
    return undefined;
  const id = (message.params as { requestId?: unknown } | undefined)?.requestId;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}

/** The `resumptionToken` the SDK passed takes effect only on a request (a resume answers a request). */
export function resumesFrom(
  message: JsonRpcMessage,
  resumptionToken: string | undefined,
): string | undefined {
  return isRequest(message) ? resumptionToken : undefined;
}
