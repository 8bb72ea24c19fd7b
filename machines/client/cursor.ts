import type { JsonRpcRequest } from '../jsonrpc.js';
import type { ServerAdvertisement } from '../validity.js';
import type { StreamKind } from './stream.machine.js';

/**
 * What the client writes to its cursor store once the events of a network chunk are delivered: enough for a new process to
 * resume the same session and streams (the design note's condition 1).
 */
export interface CursorRecord {
  readonly sessionId: string;
  readonly protocolVersion?: string;
  /** Kept so the client can re-initialize after a 404 even when it was restarted. */
  readonly initializeRequest?: JsonRpcRequest;
  readonly advertisement?: ServerAdvertisement;
  /** Last delivered event id per stream, by the client's stream key. */
  readonly streams: Readonly<Record<string, StreamCursor>>;
}

export interface StreamCursor {
  readonly kind: Exclude<StreamKind, 'message'>;
  readonly lastEventId?: string;
}
