import { type ErrorReply, errorBody, SESSION_NOT_FOUND } from '../../machines/server/replies.js';
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
  return { kind: 'json', status, headers, body: errorBody(code, message, data) };
}

/** An error decided in machines/server (replies.ts), with the session's `headers` unless it is anonymous. */
export function replyWith(error: ErrorReply, headers?: Record<string, string>): Reply {
  const retry =
    error.retryAfterSeconds === undefined ? undefined : { 'Retry-After': String(error.retryAfterSeconds) };
  const all = error.anonymous ? retry : headers || retry ? { ...headers, ...retry } : undefined;
  return errorReply(error.status, error.code, error.message, error.data, all);
}

/**
 * The answer to a session id this server does not hold, or holds for another principal: one body for
 * both, so a stranger learns nothing about which ids exist.
 */
export function sessionNotFound(): Reply {
  return replyWith(SESSION_NOT_FOUND);
}
