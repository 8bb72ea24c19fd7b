import { ReconnectReason } from '../codes.js';

/**
 * What happens when a POST fails: the connection was refused, reset, timed out or stalled, or the server
 * answered a status that `classifyClose` (machines/decide.ts) calls transient (5xx, 408, 429, a 409
 * conflict). Everything this decision needs is in `PostFailure`; the stream machine asks it whenever its
 * POST's exchange ends that way, with retries left (past the reconnect policy's `maxRetries` the call ends
 * as outcome unknown, `given_up`).
 *
 * A 401 (or 403 `insufficient_scope`) is here once the provider has a token (reason `unauthorized`):
 * resumed when the stream has a cursor, else sent again.
 *
 * Not here, because they are not failures of the POST: a 404 (the session is gone: the session machine
 * re-sends the call on a new session when that 404 answered the call's own POST, see `neverRan`), a
 * 409/410 with a gap, and any other status (the call fails with the status, -32053).
 *
 * @see docs/client.md, "Behaviour"; design note, "Decision Boundary"
 */
export interface PostFailure {
  /**
   * How the exchange ended (`classifyClose`'s reconnect reason), or `unauthorized`: the server answered
   * 401 (or 403 `insufficient_scope`) and the provider has since obtained a token (authorization.ts).
   */
  readonly reason: ReconnectReason | 'unauthorized';
  /** What was POSTed: a request (`request`), or a notification or response (`message`). */
  readonly kind: 'request' | 'message';
  /** The stream has an event id: its answer can be resumed (GET + Last-Event-ID) rather than re-sent. */
  readonly hasCursor: boolean;
  /** What the session knew when the POST was sent (`PostFacts`). */
  readonly facts: PostFacts;
}

/** What the session knows of a request when it POSTs it. */
export interface PostFacts {
  /** The request is `initialize`. */
  readonly initialize: boolean;
  /** The server advertises that it de-duplicates request ids (`dedupe=1`). */
  readonly serverDeduplicates: boolean;
  /**
   * The retry policy says running the call twice cannot duplicate a side effect: by default a read
   * (`tools/list`, `resources/read`, …) or a tool annotated `readOnlyHint` or `idempotentHint`.
   */
  readonly readOnly: boolean;
}

/**
 * `resume`: GET with Last-Event-ID, the call is not sent again. `resend`: POST it again, same id.
 * `outcome-unknown`: the stream ends; the call ends as outcome unknown (-32050, `stream_unresumable`).
 */
export type PostFailureDecision = 'resume' | 'resend' | 'outcome-unknown';

interface Row {
  readonly when: (failure: PostFailure) => boolean;
  readonly decision: PostFailureDecision;
}

/** The table, read top to bottom: the first row whose `when` holds decides (its `decision`). */
const POST_FAILURE_TABLE: readonly Row[] = [
  // The call's stream delivered an event id before it failed: the server has the call and logs its
  // events; resuming asks for the rest, re-sending could run it again.
  { when: (f) => f.kind === 'request' && f.hasCursor, decision: 'resume' },
  // The connection never opened: the request never left this process, so sending it again cannot
  // duplicate anything, whatever it is.
  { when: (f) => f.reason === ReconnectReason.refused, decision: 'resend' },
  // The server refused it for want of a token (401, or 403 insufficient_scope), before it reached the
  // session: it never ran, whatever it is, and the provider now has a token. Same id, sent again.
  { when: (f) => f.reason === 'unauthorized', decision: 'resend' },
  // A notification or a response may have arrived, and nothing lets the server recognize it twice: it is
  // not sent again (a lost one is reported; nothing waits on it).
  { when: (f) => f.kind === 'message', decision: 'outcome-unknown' },
  // An initialize runs no tool: sent twice, it at worst leaves a spare session that the server expires.
  { when: (f) => f.facts.initialize, decision: 'resend' },
  // The server answers a repeated request id with the first run's answer instead of running it again.
  { when: (f) => f.facts.serverDeduplicates, decision: 'resend' },
  // Running the call twice does no harm (the retry policy's judgement: reads, read-only or idempotent tools).
  { when: (f) => f.facts.readOnly, decision: 'resend' },
  // Anything else may be running on the server: sending it again could run a side effect twice.
  { when: () => true, decision: 'outcome-unknown' },
];

export function decidePostFailure(failure: PostFailure): PostFailureDecision {
  for (const row of POST_FAILURE_TABLE) if (row.when(failure)) return row.decision;
  return 'outcome-unknown';
}
