import type { JsonRpcNotification, RequestId } from '../../machines/jsonrpc.js';
import { ACKNOWLEDGED_METHOD, SUBSCRIPTION_ID_META_KEY } from '../../machines/listen-wire.js';
import type { ListenFilter, PublishedEvent } from '../../machines/server/listen-log.js';

/**
 * The official v2 SDK's listen router as the world's server runs it: its documented, measured behaviour
 * (node_modules/@modelcontextprotocol/server, `createListenRouter`), not its code. Serving a request it
 * writes the acknowledgement first (the honoured filter, stamped with the request's id), then subscribes
 * to the bus synchronously; each accepted event becomes a notification carrying the event's params (so the
 * position the bus put in `_meta` reaches the client), stamped with the subscription id. The simulated
 * server advertises every capability, so the honoured filter is the requested one without its `false`s.
 */

export function honoredFilter(requested: ListenFilter): ListenFilter {
  return {
    ...(requested.toolsListChanged === true ? { toolsListChanged: true } : {}),
    ...(requested.promptsListChanged === true ? { promptsListChanged: true } : {}),
    ...(requested.resourcesListChanged === true ? { resourcesListChanged: true } : {}),
    ...(requested.resourceSubscriptions !== undefined && requested.resourceSubscriptions.length > 0
      ? { resourceSubscriptions: [...requested.resourceSubscriptions] }
      : {}),
  };
}

/** The router's own filter (it filters what the bus delivers; the log's `missed` is ours). */
export function routerAccepts(filter: ListenFilter, event: PublishedEvent): boolean {
  switch (event.kind) {
    case 'tools_list_changed':
      return filter.toolsListChanged === true;
    case 'prompts_list_changed':
      return filter.promptsListChanged === true;
    case 'resources_list_changed':
      return filter.resourcesListChanged === true;
    case 'resource_updated':
      return filter.resourceSubscriptions?.includes(event.uri ?? '') === true;
  }
}

const METHODS: Record<PublishedEvent['kind'], string> = {
  tools_list_changed: 'notifications/tools/list_changed',
  prompts_list_changed: 'notifications/prompts/list_changed',
  resources_list_changed: 'notifications/resources/list_changed',
  resource_updated: 'notifications/resources/updated',
};

function stamped(method: string, params: Record<string, unknown>, id: RequestId): JsonRpcNotification {
  const meta = (params._meta ?? {}) as Record<string, unknown>;
  return {
    jsonrpc: '2.0',
    method,
    params: { ...params, _meta: { ...meta, [SUBSCRIPTION_ID_META_KEY]: id } },
  };
}

/** The acknowledgement the router writes first. */
export function acknowledgement(honored: ListenFilter, id: RequestId): JsonRpcNotification {
  return stamped(ACKNOWLEDGED_METHOD, { notifications: honored }, id);
}

/** The notification the router writes for an accepted event (its params as the bus gave them). */
export function notificationOf(
  event: PublishedEvent,
  params: Record<string, unknown> | undefined,
  id: RequestId,
): JsonRpcNotification {
  const base = event.kind === 'resource_updated' ? { ...params, uri: event.uri } : { ...params };
  return stamped(METHODS[event.kind], base, id);
}
