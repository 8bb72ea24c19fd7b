/**
 * Every reason and error code of the project, tabled once. Codes are stable: users match on them.
 * `test/codes.test.ts` asserts that no two codes collide.
 */

/** JSON-RPC error codes this project puts in error responses (implementation-defined server range). */
export const JsonRpcCode = {
  /** The call may or may not have run on the server; the client cannot know. Never re-sent blindly. */
  OUTCOME_UNKNOWN: -32050,
  /** The server answered the session id with 404: the session is gone. Same value as the official SDK. */
  SESSION_NOT_FOUND: -32001,
  /** A resume (GET + Last-Event-ID) was refused: the cursor is evicted, from another epoch, or malformed. */
  RESUME_REJECTED: -32052,
  /** The server answered with a status the client refuses to interpret. */
  UNEXPECTED_STATUS: -32053,
  /** The request could not be delivered and was not re-sent (it was never on the wire, or was refused). */
  REQUEST_FAILED: -32054,
  /** The server answered the call with something that is not a JSON-RPC response. */
  MALFORMED_ANSWER: -32055,
  /** Invalid request shape (missing session id, bad headers). JSON-RPC's own code. */
  INVALID_REQUEST: -32600,
  /** Body is not JSON. JSON-RPC's own code. */
  PARSE_ERROR: -32700,
} as const;

/** Why a call ended as outcome unknown. Carried in `error.data.reason`. */
export const OutcomeUnknownReason = {
  sessionLost: 'session_lost',
  streamUnresumable: 'stream_unresumable',
  responseEvicted: 'response_evicted',
  epochChanged: 'epoch_changed',
  reconnectGivenUp: 'reconnect_given_up',
  serverRestarted: 'server_restarted',
  /** Several instances share the session; the one running the call stopped renewing its lease (it died). */
  instanceLost: 'instance_lost',
  transportClosed: 'transport_closed',
  serverClosedSession: 'server_closed_session',
} as const;
export type OutcomeUnknownReason = (typeof OutcomeUnknownReason)[keyof typeof OutcomeUnknownReason];

/** The server's answer to a cursor, as the `reason` of a 400/404/410 body. */
export const ResumeRejection = {
  windowExceeded: 'resume_window_exceeded',
  epochChanged: 'epoch_changed',
  malformedCursor: 'malformed_cursor',
  foreignCursor: 'foreign_cursor',
  unknownSession: 'unknown_session',
} as const;
export type ResumeRejection = (typeof ResumeRejection)[keyof typeof ResumeRejection];

/** Why a stream is reconnecting. Grouped by the state they lead to, as centrifuge-js does. */
export const ReconnectReason = {
  reset: 'reset',
  timeout: 'timeout',
  stall: 'stall',
  refused: 'refused',
  serverError: 'server_error',
  endOfStream: 'end_of_stream',
  throttled: 'throttled',
  /** 409 without a loss report: the server still holds the old connection (the SDK server's "Conflict"). */
  conflict: 'conflict',
} as const;
export type ReconnectReason = (typeof ReconnectReason)[keyof typeof ReconnectReason];

/** Why a stream stopped for good without the session being lost. */
export const StopReason = {
  closeEvent: 'close_event',
  noContent: 'no_content',
  notOffered: 'not_offered',
} as const;
export type StopReason = (typeof StopReason)[keyof typeof StopReason];
