import { randomBytes } from 'node:crypto';
import type { JsonRpcMessage, RequestId } from '../../machines/jsonrpc.js';

/**
 * Makes request ids unique on the wire for the whole life of a session, across client processes.
 * The server de-duplicates by request id, and a restarted SDK Client numbers its requests from 0 again:
 * without this, its first call would be answered with the replay of an old one. Each transport tags the
 * ids it sends and untags the answers; answers with another tag belong to another process (orphans).
 */
export class RequestIds {
  private readonly tag = `c${randomBytes(6).toString('hex')}`;

  /** The id on the wire for an application id. */
  wire(id: RequestId): string {
    return `${this.tag}.${typeof id === 'number' ? 'n' : 's'}${id}`;
  }

  /** The application id for a wire id of this process, or undefined (another process's, or the server's). */
  local(wire: RequestId | null): RequestId | undefined {
    if (typeof wire !== 'string' || !wire.startsWith(`${this.tag}.`)) return undefined;
    const rest = wire.slice(this.tag.length + 1);
    return rest.startsWith('n') ? Number(rest.slice(1)) : rest.slice(1);
  }

  /** Outgoing: requests get wire ids, and cancellations name the wire id. */
  outgoing(message: JsonRpcMessage): JsonRpcMessage {
    if ('method' in message && 'id' in message) return { ...message, id: this.wire(message.id) };
    if ('method' in message && message.method === 'notifications/cancelled') {
      const requestId = message.params?.requestId;
      if (typeof requestId === 'string' || typeof requestId === 'number') {
        return { ...message, params: { ...message.params, requestId: this.wire(requestId) } };
      }
    }
    return message;
  }

  /** Incoming responses to our requests get their application ids back; everything else passes. */
  incoming(message: JsonRpcMessage): JsonRpcMessage {
    if (!('id' in message) || 'method' in message) return message;
    const local = this.local(message.id);
    return local === undefined ? message : { ...message, id: local };
  }
}
