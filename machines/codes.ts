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
  /** The server is at one of its limits (sessions, sessions per principal, running requests): retry after `Retry-After`. */
  // In -32000..-32019, which MCP 2026-07-28 leaves to implementations (-32020..-32099 are the spec's).
  LIMIT_EXCEEDED: -32005,
  /** Invalid request shape (missing session id, bad headers). JSON-RPC's own code. */
  INVALID_REQUEST: -32600,
  /** The server failed to answer a request. JSON-RPC's own code. */
  INTERNAL_ERROR: -32603,
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
  /** The tool ran and answered, but the server's log refused the answer (a store outage): what it said is lost. */
  answerUnstored: 'answer_unstored',
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
  /** A 404 to a call's resume that cannot mean the session's end (no session id was sent): not-found.ts. */
  notFound: 'not_found',
} as const;
export type StopReason = (typeof StopReason)[keyof typeof StopReason];

/**
 * Errors this package reports through `Transport.onerror` (as a `ContinuityError`, src/errors.ts), each with
 * a stable code to match on (the message is for people).
 */
export const ErrorCode = {
  /** Events were lost (a 410, or a stream that could not be resumed); `detail` is the gap report. */
  eventsLost: 'MCPC_EVENTS_LOST',
  /** A replayed response to a request this process never sent, and no `onOrphanResult` was given. */
  orphanResult: 'MCPC_ORPHAN_RESULT',
  /** A stream failed in a way that belongs to no request. */
  transport: 'MCPC_TRANSPORT',
  /** An SSE event carried data that is not JSON-RPC. */
  malformedEvent: 'MCPC_MALFORMED_EVENT',
  /** The cursor store could not be written: continuity across a restart is at risk. */
  cursorStore: 'MCPC_CURSOR_STORE',
  /** The configuration breaks a condition of validity (see `transport.assessment()`). */
  condition: 'MCPC_CONDITION',
  /**
   * The session was lost (404) and could not be re-established: the new initialize failed, or sessions
   * kept being lost soon after each re-initialize, more often in a row than the reconnect policy retries.
   * The transport gave up and closed (`onclose` follows). Every pending call has ended.
   */
  reinitializeGivenUp: 'MCPC_REINITIALIZE_GIVEN_UP',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * JSON-RPC error codes of the extension. All in -32000..-32019, the range the 2026-07-28 error code
 * policy leaves implementation-defined (-32020..-32099 is reserved for the specification). -32000 and
 * -32001 are avoided: SDKs already use them (connection closed, request timeout / session not found).
 */
export const ContinuityErrorCode = {
  /** The key was used before with a different request (method, name or arguments). HTTP 409. */
  KEY_REUSED: -32010,
  /** The events after the re-issue's last event id were evicted; `data.lostCount` says how many. HTTP 410. */
  EVENTS_EVICTED: -32011,
  /** The server cannot tell whether the keyed request ran (its instance died, or the memo was lost). */
  OUTCOME_UNKNOWN: -32012,
  /** The keyed request was cancelled by an explicit `notifications/cancelled`; it will not run again. */
  CANCELLED: -32013,
} as const;
export type ContinuityErrorCode = (typeof ContinuityErrorCode)[keyof typeof ContinuityErrorCode];
