import { isNotification, isResponse, type JsonRpcMessage, type RequestId, requestKey } from '../jsonrpc.js';
import { untagRequestId } from '../request-tag.js';

/**
 * Several instances share a session; a client message POSTed to one of them may belong to another.
 * An answer to a server-to-client request (sampling, elicitation, roots) belongs to the instance that
 * sent the request, and a cancellation to the instance running the call. These functions decide where
 * such a message goes; the runtime carries it there through the shared store.
 *
 * Each instance's SDK server numbers its requests from 0, so two instances of one session would send
 * the client the same ids. An instance therefore tags the ids of the requests it sends with its name
 * (the one scheme of both sides, machines/request-tag.ts); the answer carries the tag back, and the
 * instance restores the original id before its SDK server sees it.
 */
export { tagRequestId, untagRequestId } from '../request-tag.js';

export type InboundRoute =
  /** Hand it to this instance's SDK server (the id restored, if it was tagged). */
  | { kind: 'here'; message: JsonRpcMessage }
  /** Carry it to `instance`, which hands it to its SDK server as `message`. */
  | { kind: 'forward'; instance: string; message: JsonRpcMessage };

/**
 * Where a POSTed notification or response goes. `ownerOf` names the instance running a client request
 * (from the session machine's streams); undefined when unknown or this instance.
 */
export function routeInbound(
  message: JsonRpcMessage,
  self: string,
  ownerOf: (requestKey: string) => string | undefined,
): InboundRoute {
  if (isResponse(message)) {
    const tagged = untagRequestId(message.id);
    if (!tagged) return { kind: 'here', message };
    const restored = { ...message, id: tagged.id } as JsonRpcMessage;
    return tagged.instance === self
      ? { kind: 'here', message: restored }
      : { kind: 'forward', instance: tagged.instance, message: restored };
  }
  const cancelled = cancelledRequest(message);
  if (cancelled !== undefined) {
    const owner = ownerOf(requestKey(cancelled));
    if (owner !== undefined && owner !== self) return { kind: 'forward', instance: owner, message };
  }
  return { kind: 'here', message };
}

/** The id of the request a `notifications/cancelled` names; undefined for any other message. */
export function cancelledRequest(message: JsonRpcMessage): RequestId | undefined {
  if (!isNotification(message) || message.method !== 'notifications/cancelled') return undefined;
  const requestId = message.params?.requestId;
  return typeof requestId === 'string' || typeof requestId === 'number' ? requestId : undefined;
}
