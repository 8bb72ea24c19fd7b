import { STANDALONE_STREAM } from '../event-id.js';

/**
 * A session's request-id memory, bounded (issue 29). The machine remembers the request ids of its
 * `capacity` most recently numbered request streams; an older one is forgotten with its stream entry,
 * so a session's record (and a shared store's copy of it) does not grow with the session's age.
 *
 * The forgetting rule, which the at-most-once guarantee allows:
 *
 * - **Where the forget point is.** Stream numbers below `forgottenBelow` are forgotten. It follows
 *   `nextStream` alone (`capacity` behind it), so every instance sharing the session computes the same
 *   point from the same committed numbering, and it never moves back.
 * - **What a re-send before it gets.** A request id re-sent while its stream is remembered is never run
 *   again: it gets its original stream (`duplicate`).
 * - **What a re-send after it gets.** Its id is no longer known, so it is a new request: it runs again,
 *   on a new stream. A client that re-sends an id after `capacity` newer requests is not retrying.
 * - **What a cursor into a forgotten stream gets.** The stream is still this session's (its number is
 *   below the point): the log answers it (a replay while its events are retained, `gone` after).
 */

/** Request streams a session remembers by default: far more than a client retries across. */
export const DEFAULT_REQUEST_MEMORY = 10_000;

/** The forget point once streams up to `nextStream - 1` are numbered: it only moves forward. */
export function forgetPoint(nextStream: number, forgottenBelow: number, capacity: number): number {
  return Math.max(forgottenBelow, nextStream - Math.max(1, capacity));
}

/** A stream number this session gave and has since forgotten (never the standalone stream). */
export const forgotten = (stream: number, forgottenBelow: number): boolean =>
  stream > STANDALONE_STREAM && stream < forgottenBelow;
