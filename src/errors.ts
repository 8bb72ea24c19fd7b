/**
 * Errors this package reports through `Transport.onerror`, each with a stable code to match on (the
 * message is for people). Branded with `Symbol.for` so `isContinuityError` works across package copies.
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

const BRAND = Symbol.for('mcp-continuity.error');

export class ContinuityError extends Error {
  readonly [BRAND] = true;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly detail?: unknown,
  ) {
    super(message);
    this.name = 'ContinuityError';
  }
}

export function isContinuityError(error: unknown): error is ContinuityError {
  return typeof error === 'object' && error !== null && (error as { [BRAND]?: unknown })[BRAND] === true;
}
