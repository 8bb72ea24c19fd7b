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

  /**
   * Outgoing: requests get wire ids, and so do their progress tokens (the SDK uses the request id as the
   * token, so a restarted process would reuse them too); cancellations name the wire id.
   */
  outgoing(message: JsonRpcMessage): JsonRpcMessage {
    if ('method' in message && 'id' in message) {
      const meta = message.params?._meta as Record<string, unknown> | undefined;
      const token = meta?.progressToken;
      const params =
        meta && (typeof token === 'string' || typeof token === 'number')
          ? { ...message.params, _meta: { ...meta, progressToken: this.wire(token) } }
          : message.params;
      return { ...message, id: this.wire(message.id), ...(params ? { params } : {}) };
    }
    if ('method' in message && message.method === 'notifications/cancelled') {
      const requestId = message.params?.requestId;
      if (typeof requestId === 'string' || typeof requestId === 'number') {
        return { ...message, params: { ...message.params, requestId: this.wire(requestId) } };
      }
    }
    return message;
  }

  /**
   * Incoming: answers and progress of our requests get their application ids and tokens back. Those of
   * another process (tagged, but not with our tag) come back as `orphan`: they belong to nobody here.
   */
  incoming(message: JsonRpcMessage): { message: JsonRpcMessage; orphan: boolean } {
    if ('method' in message) {
      const token = message.params?.progressToken;
      if (
        message.method !== 'notifications/progress' ||
        (typeof token !== 'string' && typeof token !== 'number')
      ) {
        return { message, orphan: false };
      }
      const local = this.local(token);
      if (local !== undefined)
        return {
          message: { ...message, params: { ...message.params, progressToken: local } },
          orphan: false,
        };
      return { message, orphan: this.isForeign(token) };
    }
    if (!('id' in message)) return { message, orphan: false };
    const local = this.local(message.id);
    return local === undefined
      ? { message, orphan: false }
      : { message: { ...message, id: local }, orphan: false };
  }

  /** Tagged by some mcp-continuity transport, but not this one. */
  private isForeign(token: RequestId): boolean {
    return typeof token === 'string' && /^c[0-9a-f]{12}\./.test(token) && !token.startsWith(`${this.tag}.`);
  }
}
