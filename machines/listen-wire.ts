/**
 * The wire names of MCP 2026-07-28's `subscriptions/listen` (SEP-2575) that both the client's listen
 * machine and the server's listen log read.
 */

export const LISTEN_METHOD = 'subscriptions/listen';
export const ACKNOWLEDGED_METHOD = 'notifications/subscriptions/acknowledged';
/** The `_meta` key the server stamps the listen request's id under. */
export const SUBSCRIPTION_ID_META_KEY = 'io.modelcontextprotocol/subscriptionId';

/** Whether a posted body is a `subscriptions/listen` request (it opens a stream that stays open). */
export function isListenRequest(body: unknown): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const message = body as { method?: unknown; id?: unknown };
  return message.method === LISTEN_METHOD && message.id !== undefined;
}
