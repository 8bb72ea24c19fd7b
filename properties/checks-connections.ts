import type { WorldOutcome } from './world/world.js';

/**
 * What the 2025 model's client does with its connections once the world is quiet, judged from the network
 * (properties/world/network.ts), not from the client's machines.
 */

/**
 * After the faults, once every call has settled, a client whose streams hear the server's keep-alive
 * comments cuts no live stream (one the server still serves, healthy): a quiet stream is alive. The grace
 * covers what the faults left behind; the world then waits 30 s more for the drain, where a stream cut for
 * want of proof of life shows, every stall timeout.
 */
export const QUIET_GRACE_MS = 15_000;

export function quietOnceSettled({ config, recorder, hung }: WorldOutcome): string[] {
  const from = recorder.quietFrom;
  if (!config.heartbeat || hung.length > 0 || from === undefined) return [];
  const late = recorder.liveCuts.filter((at) => at >= from + QUIET_GRACE_MS);
  return late.length === 0
    ? []
    : [
        `${late.length} live streams cut more than ${QUIET_GRACE_MS} ms after the world went quiet ` +
          `(at ${from}): ${late.slice(0, 5).join(', ')}`,
      ];
}

/** A connection the client stopped reading is let go (drained a while at most), not held open for good. */
export function stoppedConnectionsLetGo({ recorder }: WorldOutcome): string[] {
  return recorder.heldAfterStop === 0
    ? []
    : [`${recorder.heldAfterStop} connections the client stopped reading still open at the end`];
}

/**
 * Closing a client ends its session on the server: a DELETE for it reaches the server, unless a fault
 * (other than the close itself) was under way while it was on its way (`DELETE_FLIGHT_MS`).
 */
export const DELETE_FLIGHT_MS = 100;

export function closeEndsTheSession({ recorder }: WorldOutcome): string[] {
  const out: string[] = [];
  for (const { sessionId, at } of recorder.closedSessions) {
    if (recorder.deletesArrived.has(sessionId)) continue;
    const faulted = recorder.faultSpans.some(
      (f) => f.from <= at + DELETE_FLIGHT_MS && f.until >= at && !(f.from === at && f.until === at),
    );
    if (!faulted) out.push(`session ${sessionId} closed at ${at}: no DELETE reached the server`);
  }
  return out;
}

/**
 * A stream whose answer reached the client is over: no process resumes it from the answer's event id (a
 * restored stream that missed its answer would resume there until it gave up, reporting a false loss).
 */
export function answeredStreamsNotResumed({ recorder }: WorldOutcome): string[] {
  const resumes = recorder.resumesFromAnswer;
  return resumes.length === 0
    ? []
    : [
        `${resumes.length} GETs resumed a stream from its answer's event id: ${resumes.slice(0, 5).join(', ')}`,
      ];
}

/**
 * A restarted process resumes only calls still waiting: the record it reads names no stream of a call whose
 * outcome the application already has (resuming one costs GETs until it gives up, and may deliver its
 * answer twice).
 */
export function restoredRecordsHoldLiveCallsOnly({ recorder }: WorldOutcome): string[] {
  const settled = recorder.settledInRecord;
  return settled.length === 0
    ? []
    : [`a restored record named ${settled.length} settled calls' streams: ${settled.slice(0, 5).join(', ')}`];
}

/**
 * `close()` returns promptly even when its DELETE is held by the network: the application waits for it
 * to connect afresh or to exit. The runtime's default close deadline is 2 s; this bound leaves room.
 */
export const CLOSE_RETURNS_WITHIN_MS = 5_000;

export function closeReturnsPromptly({ recorder }: WorldOutcome): string[] {
  return recorder.closes
    .filter((c) => c.returnedAt === undefined || c.returnedAt - c.at > CLOSE_RETURNS_WITHIN_MS)
    .map((c) =>
      c.returnedAt === undefined
        ? `close() called at ${c.at} never returned`
        : `close() called at ${c.at} returned after ${c.returnedAt - c.at} ms`,
    );
}
