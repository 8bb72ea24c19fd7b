import { JsonRpcCode } from '../codes.js';
import type { LimitRefusal } from './limits.js';
import { RESUME_STATUS, type ResumeAnswer } from './retention.js';

/**
 * An HTTP-level error answer, as data: the runtime writes it as a response, the simulated world sends it
 * over its network. Every error a session or the handler answers with is built here, once.
 */
export interface ErrorReply {
  readonly status: number;
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
  /** Sent as `Retry-After` (limits). */
  readonly retryAfterSeconds?: number;
  /** Sent without the session's headers, so it reads exactly as the answer to an id never issued. */
  readonly anonymous?: boolean;
}

/** A JSON-RPC error body with no id, as the spec allows for HTTP-level errors. */
export function errorBody(code: number, message: string, data?: unknown): unknown {
  return { jsonrpc: '2.0', id: null, error: { code, message, ...(data === undefined ? {} : { data }) } };
}

/**
 * The answer to a session id this server does not hold, or holds for another principal: one body for
 * both, so a stranger learns nothing about which ids exist.
 */
export const SESSION_NOT_FOUND: ErrorReply = {
  status: 404,
  code: JsonRpcCode.SESSION_NOT_FOUND,
  message: 'Session not found',
  anonymous: true,
};

/**
 * Something failed that the client did not cause (an SDK server threw, a store broke): 500 with a
 * JSON-RPC internal error, saying nothing more. The one body for every such failure.
 */
export const INTERNAL_ERROR: ErrorReply = {
  status: 500,
  code: JsonRpcCode.INTERNAL_ERROR,
  message: 'Internal error',
  anonymous: true,
};

/** What a session answers without an error: a status and no body. */
export interface EmptyAnswer {
  readonly kind: 'empty';
  readonly status: number;
}

/**
 * DELETE, after the machine's `decision.delete`: 200 when it ended the session, else the answer to an
 * unknown session (the id ended already, or belongs to another principal).
 */
export function deleteAnswer(accepted: boolean): EmptyAnswer | ErrorReply {
  return accepted ? { kind: 'empty', status: 200 } : SESSION_NOT_FOUND;
}

/** A refused cursor: 400, 404 or 410 with the machine's answer as `data`. */
export function resumeRejected(answer: Exclude<ResumeAnswer, { kind: 'replay' }>): ErrorReply {
  if (answer.kind === 'unknown-session') return SESSION_NOT_FOUND;
  const message =
    answer.kind === 'gone'
      ? `Cannot resume: ${answer.reason} (${answer.lostCount ?? 'unknown'} events lost)`
      : `Cannot resume: ${answer.reason}`;
  return { status: RESUME_STATUS[answer.kind], code: JsonRpcCode.RESUME_REJECTED, message, data: answer };
}

/** A limit refused the request: 429 or 503 with `Retry-After`. */
export function limitReached(refusal: LimitRefusal): ErrorReply {
  return {
    status: refusal.status,
    code: refusal.code,
    message: refusal.message,
    retryAfterSeconds: refusal.retryAfterSeconds,
  };
}
