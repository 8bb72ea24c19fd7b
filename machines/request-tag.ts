import type { JsonRpcMessage, RequestId } from './jsonrpc.js';

/**
 * The one way request ids are tagged on the wire, by both sides. Several senders share one id space and
 * each numbers its requests from 0: a restarted SDK Client within one session, or the SDK servers of
 * several instances sharing a session. A sender therefore puts its owner's name on the ids it sends
 * (`mcpc~<owner>~<the original id as JSON>`); an answer carries the tag back, so it reaches the owner that
 * asked with its original id, and never another owner whose counter happens to be at the same number.
 *
 * Owners: a client transport (`c` and random hex, new per process) or a server instance (its instance id).
 * An owner's name never contains `~`. Pure functions, no I/O.
 */
const TAG = 'mcpc~';

/** A client transport's owner name: new for every process, so two processes never share one. */
export function clientOwner(randomHex: string): string {
  return `c${randomHex}`;
}

export function tagRequestId(owner: string, id: RequestId): string {
  return `${TAG}${owner}~${JSON.stringify(id)}`;
}

/**
 * The owner and original id of a tagged id; undefined for an id this scheme did not make. The original's
 * type is kept: `7` and `"7"` stay apart.
 */
export function untagRequestId(id: RequestId | null): { instance: string; id: RequestId } | undefined {
  if (typeof id !== 'string' || !id.startsWith(TAG)) return undefined;
  const rest = id.slice(TAG.length);
  const cut = rest.indexOf('~');
  if (cut <= 0) return undefined;
  try {
    const original = JSON.parse(rest.slice(cut + 1)) as unknown;
    if (typeof original !== 'string' && typeof original !== 'number') return undefined;
    return { instance: rest.slice(0, cut), id: original };
  } catch {
    return undefined;
  }
}

/** Another owner's tag: tagged by this scheme, but not by `owner`. */
export function taggedByAnother(owner: string | undefined, id: RequestId | null): boolean {
  const tagged = untagRequestId(id);
  return tagged !== undefined && tagged.instance !== owner;
}

/** The original id of an id `owner` tagged; undefined for any other id. */
function ownId(owner: string, id: RequestId | null): RequestId | undefined {
  const tagged = untagRequestId(id);
  return tagged?.instance === owner ? tagged.id : undefined;
}

/**
 * A message a client sends: a request gets a tagged id, and so does its progress token (the SDK uses the
 * request id as the token, so a restarted process would reuse tokens too); a cancellation names the
 * tagged id. Anything else is unchanged.
 */
export function tagOutgoing(owner: string, message: JsonRpcMessage): JsonRpcMessage {
  if ('method' in message && 'id' in message) {
    const meta = message.params?._meta as Record<string, unknown> | undefined;
    const token = meta?.progressToken;
    const params =
      meta && (typeof token === 'string' || typeof token === 'number')
        ? { ...message.params, _meta: { ...meta, progressToken: tagRequestId(owner, token) } }
        : message.params;
    return { ...message, id: tagRequestId(owner, message.id), ...(params ? { params } : {}) };
  }
  if ('method' in message && message.method === 'notifications/cancelled') {
    const requestId = message.params?.requestId;
    if (typeof requestId === 'string' || typeof requestId === 'number') {
      return { ...message, params: { ...message.params, requestId: tagRequestId(owner, requestId) } };
    }
  }
  return message;
}

/**
 * A message a client receives, as its application must see it: answers and progress of `owner`'s requests
 * get their original ids and tokens back. Anything else is unchanged (whether it is an orphan is the
 * ledger's question, `inboundOf` in machines/client/ledger.ts).
 */
export function untagIncoming(owner: string, message: JsonRpcMessage): JsonRpcMessage {
  if ('method' in message) {
    const token = message.params?.progressToken;
    if (
      message.method !== 'notifications/progress' ||
      (typeof token !== 'string' && typeof token !== 'number')
    )
      return message;
    const local = ownId(owner, token);
    return local === undefined
      ? message
      : { ...message, params: { ...message.params, progressToken: local } };
  }
  if (!('id' in message)) return message;
  const local = ownId(owner, message.id);
  return local === undefined ? message : { ...message, id: local };
}

/**
 * A message for an application that resumed a stream itself (`resumeStream`), as the SDK transport would
 * hand it over: answers and progress get their original ids and tokens back whichever client owner tagged
 * them (a previous process of the application, say). Server-initiated requests keep their ids.
 */
export function withOriginalIds(message: JsonRpcMessage): JsonRpcMessage {
  if ('method' in message) {
    const token = message.params?.progressToken;
    if (
      message.method !== 'notifications/progress' ||
      (typeof token !== 'string' && typeof token !== 'number')
    )
      return message;
    const original = untagRequestId(token);
    return original === undefined
      ? message
      : { ...message, params: { ...message.params, progressToken: original.id } };
  }
  if (!('id' in message)) return message;
  const original = untagRequestId(message.id);
  return original === undefined ? message : { ...message, id: original.id };
}
