/**
 * The `RequestInit` of a 2026-07-28 `subscriptions/listen` POST for the tools list, as a v2 client sends
 * it: the standard headers and the `_meta` envelope (`meta` is added to it).
 */
export function listenRequestInit(
  id: string,
  meta: Record<string, unknown>,
  signal?: AbortSignal,
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
        notifications: { toolsListChanged: true },
        _meta: { 'io.modelcontextprotocol/protocolVersion': version, ...meta },
      },
    }),
  };
}
