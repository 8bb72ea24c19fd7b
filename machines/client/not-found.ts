import { StopReason } from '../codes.js';
import type { CloseDecision } from '../decide.js';

/**
 * What a 404 means for the client: the session's end, or only that one stream is not there.
 *
 * The spec's session-expired signal is a 404 to a request that carried the session id; the client then
 * starts a new session. But a server may answer a GET 404 while it serves the session's POSTs: the
 * official conformance suite's servers route only POST (`Cannot GET /mcp`), and some proxies pass only
 * POST. Taking that 404 as the session's end made the client re-initialize, open the GET again, get 404
 * again, and so on, with every call waiting behind the re-initializations (issue 22). The SDK's client
 * never re-initializes on a GET error.
 *
 * So a GET's 404 ends the session when the server has shown it knows this stream of this session (the
 * GET resumes from a cursor the server gave, Last-Event-ID, or the standalone stream had opened before
 * in this session), or when the 404 is the MCP server's own answer about the session: a JSON-RPC error
 * body, as every SDK's session-not-found reply carries. A standalone GET that never opened and is
 * answered 404 with no JSON-RPC body (a router's "Cannot GET", an empty 404) is "no standalone stream
 * here", as a 405 is: the stream stops, the session stays, and the next POST's 404, if any, ends it. A
 * GET without a session id cannot be told its session expired: there is none.
 *
 * Why the body matters: a client restored from its cursor store (or one whose first GET lost the race
 * with a server restart) has never had its standalone stream opened; were every such 404 "no stream
 * here", a session lost with the server would go unnoticed, with the notifications published to it,
 * until the application's next POST (the model found it: a durable client restart, then a server
 * restart that forgot the session).
 *
 * @spec transports#session-management, transports#listening-for-messages-from-the-server
 */
export interface NotFoundFacts {
  /** What was answered 404: a POST (a call, a notification, a response) or a GET (a stream). */
  readonly method: 'POST' | 'GET';
  /** For a GET: the session's standalone stream, or a call's stream resumed with Last-Event-ID. */
  readonly stream: 'standalone' | 'request';
  /** The request carried an `Mcp-Session-Id`. */
  readonly carriedSessionId: boolean;
  /**
   * The server served this stream in this session before: it opened, or the GET resumes from a cursor the
   * server gave.
   */
  readonly servedBefore: boolean;
  /** The 404 carried a JSON-RPC error body: the MCP server itself answered, about this session. */
  readonly jsonRpcBody: boolean;
}

/**
 * `session-lost`: the session has ended (the session machine re-initializes). `stream-not-offered`: the
 * server offers no standalone stream here; it stops, the session stays. `stream-lost`: a call's stream
 * cannot be resumed; the call ends as outcome unknown, the session stays.
 */
export type NotFoundDecision = 'session-lost' | 'stream-not-offered' | 'stream-lost';

interface Row {
  readonly when: (facts: NotFoundFacts) => boolean;
  readonly decision: NotFoundDecision;
}

/** The table, read top to bottom: the first row whose `when` holds decides. */
const NOT_FOUND_TABLE: readonly Row[] = [
  // The spec's signal: a POST of the session answered 404. (Its own outcome: `neverRan`, stream.machine.ts.)
  { when: (f) => f.method === 'POST', decision: 'session-lost' },
  // No session id was sent, so none can have expired: the server has no such stream (or no GET at all).
  { when: (f) => !f.carriedSessionId && f.stream === 'standalone', decision: 'stream-not-offered' },
  { when: (f) => !f.carriedSessionId, decision: 'stream-lost' },
  // The standalone stream never opened in this session and something other than the MCP server answered
  // (no JSON-RPC body): the server does not offer one (it may route only POST). Its POSTs, not this GET,
  // say whether the session lives.
  {
    when: (f) => f.stream === 'standalone' && !f.servedBefore && !f.jsonRpcBody,
    decision: 'stream-not-offered',
  },
  // The server served this stream of this session and now does not know it, or said in JSON-RPC that it
  // does not know the session: the session is gone.
  { when: () => true, decision: 'session-lost' },
];

export function decideNotFound(facts: NotFoundFacts): NotFoundDecision {
  for (const row of NOT_FOUND_TABLE) if (row.when(facts)) return row.decision;
  return 'session-lost';
}

/** The stream machine's reading of a 404 (`classifyClose` says `session-terminated` for every 404). */
export function notFoundClose(facts: NotFoundFacts): CloseDecision {
  switch (decideNotFound(facts)) {
    case 'session-lost':
      return { action: 'session-terminated' };
    case 'stream-not-offered':
      return { action: 'stop', reason: StopReason.notOffered };
    case 'stream-lost':
      return { action: 'stop', reason: StopReason.notFound };
  }
}

/** A 404's body is the MCP server's JSON-RPC error (any SDK's session-not-found reply), not a router's page. */
export function isJsonRpcErrorBody(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const error = (body as { error?: unknown }).error;
  return (
    (body as { jsonrpc?: unknown }).jsonrpc === '2.0' &&
    typeof error === 'object' &&
    error !== null &&
    typeof (error as { code?: unknown }).code === 'number'
  );
}
