import type { JsonRpcRequest } from '../jsonrpc.js';
import type { ServerAdvertisement } from '../validity.js';
import type { StreamKind } from './stream.machine.js';

/**
 * What the client writes to its cursor store once the events of a network chunk are delivered: enough for a new process to
 * resume the same session and streams (the design note's condition 1).
 */
export interface CursorRecord {
  /**
   * The server the session belongs to (its URL). A record is only ever used against that server: the
   * same store handed to a client of another URL must not send it this session id or these cursors.
   */
  readonly serverUrl?: string;
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

/**
 * True when a restored record may be used by a client of `serverUrl`: it names that server. A client that
 * names no server (a simulation) takes any record; a record that names none (written before records named
 * their server) is not used by a client that does.
 */
export function recordBelongsTo(record: CursorRecord, serverUrl: string | undefined): boolean {
  return serverUrl === undefined || record.serverUrl === serverUrl;
}
