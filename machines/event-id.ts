/**
 * Event ids of this project's server: `<epoch>-<stream>-<seq>`.
 *
 * - `epoch` is random per session log incarnation: a log that was reset gets a new one, so a cursor
 *   into the old log is recognised (410 epoch_changed), never mistaken for a position in the new one.
 *   It also tells a cursor of another session apart (400), since epochs are unguessable.
 * - `stream` numbers the session's streams (0 is the standalone GET stream), so an id names the stream
 *   it belongs to, as the spec asks (transports#resumability).
 * - `seq` is dense per stream, starting at 1; 0 is the priming event. Dense numbers make a lost count exact.
 *
 * Clients must treat ids of other servers as opaque; `parseEventId` returns undefined for those.
 */
export interface EventCursor {
  readonly epoch: string;
  readonly stream: number;
  readonly seq: number;
}

const EVENT_ID = /^([a-z0-9]{1,32})-(\d{1,9})-(\d{1,16})$/;

/** The stream number of the standalone GET stream in every session. */
export const STANDALONE_STREAM = 0;

export function formatEventId(cursor: EventCursor): string {
  return `${cursor.epoch}-${cursor.stream}-${cursor.seq}`;
}

export function parseEventId(id: string): EventCursor | undefined {
  const m = EVENT_ID.exec(id);
  if (!m) return undefined;
  const seq = Number(m[3]);
  if (!Number.isSafeInteger(seq)) return undefined;
  return { epoch: m[1] as string, stream: Number(m[2]), seq };
}
