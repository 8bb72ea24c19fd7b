import { LISTEN_METHOD } from '../listen-wire.js';

/**
 * The bound on one `subscriptions/listen` filter's resource URIs. The v2 SDK looks every published
 * `resource_updated` up in each open stream's URI array, and the listen log counts a re-open's `missed`
 * over the filter: a filter as large as a body allows (over 100,000 URIs in 4 MiB) makes every change cost
 * that much per stream. Beyond the bound the request is refused before the SDK sees it. Pure.
 */

/** Resource URIs one listen filter may name. */
export const DEFAULT_MAX_RESOURCE_SUBSCRIPTIONS = 10_000;

/** JSON-RPC's invalid params: sending the same filter again cannot succeed. */
const INVALID_PARAMS = -32602;

/** The answer to a listen request whose filter is over the bound: HTTP 400 with a JSON-RPC error. */
export interface ListenFilterRefusal {
  readonly status: 400;
  readonly message: {
    readonly jsonrpc: '2.0';
    readonly id: string | number | null;
    readonly error: {
      readonly code: number;
      readonly message: string;
      readonly data: { readonly maxResourceSubscriptions: number; readonly resourceSubscriptions: number };
    };
  };
}

/**
 * The refusal of a `subscriptions/listen` request (already parsed) whose `params.notifications.
 * resourceSubscriptions` names more than `max` URIs; `undefined` for anything else (every other message,
 * and a listen within the bound: the SDK validates and serves it).
 */
export function refuseOversizeFilter(body: unknown, max: number): ListenFilterRefusal | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const message = body as { method?: unknown; id?: unknown; params?: unknown };
  if (message.method !== LISTEN_METHOD) return undefined;
  const notifications = (message.params as { notifications?: unknown } | undefined)?.notifications;
  const uris = (notifications as { resourceSubscriptions?: unknown } | undefined)?.resourceSubscriptions;
  if (!Array.isArray(uris) || uris.length <= max) return undefined;
  const id = typeof message.id === 'string' || typeof message.id === 'number' ? message.id : null;
  return {
    status: 400,
    message: {
      jsonrpc: '2.0',
      id,
      error: {
        code: INVALID_PARAMS,
        message: `Invalid params: resourceSubscriptions names ${uris.length} URIs; at most ${max} per listen`,
        data: { maxResourceSubscriptions: max, resourceSubscriptions: uris.length },
      },
    },
  };
}

/** The bound an application's setting gives: a whole number ≥ 1, or the default. */
export function maxResourceSubscriptions(setting: number | undefined): number {
  return typeof setting === 'number' && Number.isFinite(setting) && setting >= 1
    ? Math.floor(setting)
    : DEFAULT_MAX_RESOURCE_SUBSCRIPTIONS;
}
