/**
 * How the client reads the answer to its DELETE of a session (`terminateSession`, the SDK transport's
 * meaning): a 2xx ended it, and a 405 is the spec's "this server does not let clients end sessions",
 * which the SDK also takes as done (the session then ends on the server's own terms). Anything else is
 * a failure the application hears about.
 *
 * @spec transports#session-management
 */
export function terminateAccepted(status: number): boolean {
  return (status >= 200 && status < 300) || status === 405;
}
