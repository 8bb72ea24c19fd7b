import { JsonRpcCode } from '../../machines/codes.js';
import type { SseSink } from './sse.js';

/** What a handler answers, independent of the HTTP stack that writes it (Node `http` or fetch). */
export type Reply =
  | { readonly kind: 'empty'; readonly status: number; readonly headers?: Record<string, string> }
  | {
      readonly kind: 'json';
      readonly status: number;
      readonly body: unknown;
      readonly headers?: Record<string, string>;
    }
  | {
      readonly kind: 'sse';
      readonly headers?: Record<string, string>;
      /** Called once the response is open; writes events to the sink until it ends. */
      readonly start: (sink: SseSink) => void | Promise<void>;
    };

/** A JSON-RPC error body with no id, as the spec allows for HTTP-level errors. */
export function errorReply(
  status: number,
  code: number,
  message: string,
  data?: unknown,
  headers?: Record<string, string>,
): Reply {
  return {
    kind: 'json',
    status,
    headers,
    body: { jsonrpc: '2.0', id: null, error: { code, message, ...(data === undefined ? {} : { data }) } },
  };
}

/**
 * The answer to a session id this server does not hold, or holds for another principal: one body for
 * both, so a stranger learns nothing about which ids exist.
 */
export function sessionNotFound(): Reply {
  return errorReply(404, JsonRpcCode.SESSION_NOT_FOUND, 'Session not found');
}
