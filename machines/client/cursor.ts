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

/**
 * The record a client starts from when its store holds none and the application named a session to join
 * (the SDK's `sessionId` option): that session, no streams, no initialize request (so it is not
 * re-initialized after a 404). Nothing to join: undefined, and the client initializes.
 */
export function joinedRecord(serverUrl: string, sessionId: string | undefined): CursorRecord | undefined {
  return sessionId === undefined ? undefined : { serverUrl, sessionId, streams: {} };
}

/**
 * What a watched stream's resumption token does when the cursor record is written: `forget` (the stream
 * left the record: it ended), `report` a new event id, or nothing (`stay`: no id yet, or the one last
 * reported). `last`: the token last reported (or resumed from).
 */
export type TokenMove =
  | { readonly kind: 'forget' }
  | { readonly kind: 'report'; readonly token: string }
  | { readonly kind: 'stay' };

export function tokenMove(record: CursorRecord | null, key: string, last: string | undefined): TokenMove {
  const cursor = record?.streams[key];
  if (cursor === undefined) return { kind: 'forget' };
  return newToken(cursor.lastEventId, last);
}

/** A token is reported once: only an event id other than the last one reported is new. */
export function newToken(eventId: string | undefined, last: string | undefined): TokenMove {
  return eventId === undefined || eventId === last ? { kind: 'stay' } : { kind: 'report', token: eventId };
}

/**
 * The largest cursor file a file store reads. A record holds a session id, the initialize request and one
 * bounded event id per open stream (`MAX_EVENT_ID_LENGTH`), so a larger file is not one of ours.
 */
export const MAX_CURSOR_FILE_BYTES = 4 * 1024 * 1024;

/** Why a cursor file is not read, or undefined when its size is one a record can have. */
export function cursorFileSizeRefusal(size: number): string | undefined {
  return size > MAX_CURSOR_FILE_BYTES
    ? `${size} bytes, more than a cursor record may hold (${MAX_CURSOR_FILE_BYTES})`
    : undefined;
}

/** A parsed cursor file's record, or why it is not one of ours (only version 1 is). */
export function recordOfCursorFile(
  parsed: unknown,
): { readonly record: CursorRecord | null } | { readonly refusal: string } {
  const file = parsed as { version?: unknown; record?: CursorRecord | null } | null;
  if (file?.version !== 1)
    return { refusal: `not an mcp-continuity cursor file (version ${String(file?.version)})` };
  return { record: file.record ?? null };
}
