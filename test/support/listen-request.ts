/**
 * The `RequestInit` of a 2026-07-28 `subscriptions/listen` POST, as a v2 client sends it: the standard
 * headers and the `_meta` envelope (`meta` is added to it). It listens for the tools list unless
 * `notifications` says what else.
 */
export function listenRequestInit(
  id: string,
  meta: Record<string, unknown>,
  signal?: AbortSignal,
  notifications: Record<string, unknown> = { toolsListChanged: true },
): RequestInit {
  const version = '2026-07-28';
  return {
    method: 'POST',
    ...(signal ? { signal } : {}),
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': version,
      'mcp-method': 'subscriptions/listen',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'subscriptions/listen',
      params: {
        notifications,
        _meta: { 'io.modelcontextprotocol/protocolVersion': version, ...meta },
      },
    }),
  };
}
