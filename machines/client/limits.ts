/**
 * The client's bounds on what a server can make it do: how long it waits, how much it keeps. A server
 * is not trusted to pick a sane value for anything that becomes a timer or a buffer. Pure: the stream
 * and session machines read these, and the runtime applies the byte limits while it reads.
 */

/** The longest delay `setTimeout` takes as given: Node turns anything longer into 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The server's `retry:` is a floor on the reconnect delay (the spec says the client must respect it), but
 * no server may make the client wait longer than this: a `retry: 99999999` would otherwise be a 27.8 h
 * wait, and one above 2^31-1 would become 1 ms.
 */
export const MAX_SERVER_RETRY_MS = 60_000;

/**
 * The stall timeout when neither the application nor the server says otherwise (no advertised
 * heartbeat): five minutes, what Node's own fetch allows for headers and for silence in a body. A
 * server that says nothing for that long, before its headers, within a JSON body or on an event stream,
 * counts as a dead connection.
 */
export const DEFAULT_STALL_TIMEOUT_MS = 300_000;

/** A stall timeout derived from an advertised heartbeat never drops below this (a 1 ms heartbeat)… */
export const MIN_DERIVED_STALL_MS = 1_000;
/** …nor rises above this (a heartbeat of days). */
export const MAX_DERIVED_STALL_MS = 600_000;

/**
 * The longest event id the client keeps. A longer one is a protocol error: it is never stored, written to
 * the cursor file or sent back as `Last-Event-ID` (a 100 KB id would get a 431 on every resume).
 */
export const MAX_EVENT_ID_LENGTH = 256;

/**
 * The longest session id the client adopts. The spec asks for visible ASCII; a longer or other id is
 * refused, never stored or sent back.
 */
export const MAX_SESSION_ID_LENGTH = 1_024;

/**
 * Default bound on one message: an SSE event's data accumulated before it is dispatched, or a JSON body.
 * Beyond it the exchange is cut and the server is reported; nothing that large is kept.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * Bytes that restart the stall timer without completing anything: an event still arriving, a JSON body.
 * Complete units (an event, a heartbeat comment, a `retry:`) restart it whatever their size. So a large
 * message arriving steadily is not stalled, while a trickle of a few bytes per interval is; a message
 * takes at most `maxMessageBytes / STALL_PROGRESS_BYTES` stall intervals to arrive.
 */
export const STALL_PROGRESS_BYTES = 64 * 1024;

/** Clamps a delay to what a timer can take: a number in [0, MAX_TIMER_MS]; not a number is 0. */
export function timerMs(ms: number): number {
  if (Number.isNaN(ms) || ms <= 0) return 0;
  return Math.min(Math.floor(ms), MAX_TIMER_MS);
}

/** The server's `retry:` as the client honours it: within [0, MAX_SERVER_RETRY_MS]. */
export function serverRetryFloor(ms: number | undefined): number | undefined {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return undefined;
  return Math.min(Math.floor(ms), MAX_SERVER_RETRY_MS);
}

/** An event id the client may keep: short enough, and present. */
export function acceptableEventId(id: string | undefined): id is string {
  return id !== undefined && id.length <= MAX_EVENT_ID_LENGTH;
}

/** A session id the client may adopt: 1..MAX_SESSION_ID_LENGTH visible ASCII characters. */
export function acceptableSessionId(id: string): boolean {
  return id.length > 0 && id.length <= MAX_SESSION_ID_LENGTH && /^[\x21-\x7e]+$/.test(id);
}

/**
 * How many SSE event ids one 2026-07-28 call remembers, to drop an event a re-issue replays (the newest
 * ones: a server resumes after the last id the client sent back, so only recent ids come again). With
 * ids of at most `MAX_EVENT_ID_LENGTH` characters a call keeps at most ~0.5 MiB of them, however long
 * its stream.
 */
export const MAX_REMEMBERED_CALL_IDS = 1_024;

/**
 * Remembers a delivered event id of a 2026 call, in place (one call owns the set: copying it per message
 * made a call of n events cost n²), forgetting the oldest once more than `MAX_REMEMBERED_CALL_IDS` are
 * kept (a `Set` iterates in insertion order).
 */
export function rememberCallId(seen: Set<string>, id: string): Set<string> {
  seen.add(id);
  if (seen.size > MAX_REMEMBERED_CALL_IDS) {
    const oldest = seen.values().next().value;
    if (oldest !== undefined) seen.delete(oldest);
  }
  return seen;
}

/** A body of `bytes` so far is over a cap of `limit` bytes: the reader stops there. */
export function overByteCap(bytes: number, limit: number): boolean {
  return bytes > limit;
}

/**
 * How long the 2026 client waits for the server to answer an explicit cancel (docs/continuity-extension.md
 * §13) before it lets go: the cancel is best effort, and a server that never answers must not hold one
 * request open per cancelled call.
 */
export const CANCEL_DEADLINE_MS = 10_000;
