import type { AppendedMessage, Recorder } from './world/recorder.js';
import { TOOLS } from './world/tools.js';
import type { WorldOutcome } from './world/world.js';

/**
 * The invariants, judged from the outside on what the world recorded. Each returns the violations it
 * found (empty: holds), so a failing run prints what went wrong, not just `false`.
 */
export type Check = (outcome: WorldOutcome) => string[];

/** No tool handler with a non-idempotent side effect runs twice for one application call. */
export const atMostOnce: Check = ({ recorder }) =>
  [...recorder.sideEffects]
    .filter(([, n]) => n > 1)
    .map(([call, n]) => `${call} (${recorder.calls.get(call)?.tool}) ran ${n} times`);

/** Once faults stop, every call of the live process ends as a result, an error or outcome unknown. */
export const noHang: Check = ({ hung, recorder }) =>
  hung
    .filter((call) => !recorder.queuedAtEnd.has(call))
    .map((call) => `${call} (${recorder.calls.get(call)?.tool}) has no outcome after the settle bound`);

/**
 * An open finding, excused by `noHang` so it is counted rather than failing every CI run: a call the
 * application sent while the client re-initialized waits in the machine's queue, and both ways out
 * of re-initializing without a session (`app.close`, and `terminated` when the new initialize fails)
 * settle the ledger but not the queue, so the call is never answered. The fix belongs in machines/client.
 */
export const excusedQueuedAtEnd = ({ hung, recorder }: WorldOutcome): number =>
  hung.filter((call) => recorder.queuedAtEnd.has(call)).length;

/** The client leaves a session only when the server no longer has it. */
export const sessionSurvivesTransport: Check = ({ recorder }) =>
  recorder.droppedLiveSessions.map((s) => `session ${s} was dropped while the server still had it`);

/** No message, and no call outcome, reaches the application twice. */
export const noDuplicateDelivery: Check = ({ recorder }) => [
  ...[...recorder.delivered].filter(([, n]) => n > 1).map(([uid, n]) => `${uid} delivered ${n} times`),
  ...[...recorder.calls.values()]
    .filter((c) => c.outcomes > 1)
    .map((c) => `${c.callKey} settled ${c.outcomes} times`),
];

/**
 * Every message the server appended reaches the application once, in order per stream, or lies in a
 * loss the application was told about with the right count: a gap with the exact number, or a loss of
 * unknown size (session lost, outcome unknown, stream abandoned) that covers it.
 */
export const noUnflaggedLoss: Check = ({ recorder }) => {
  const violations: string[] = [];
  for (const [group, messages] of groupByStream(recorder)) {
    const first = messages[0] as AppendedMessage;
    const order = recorder.deliveryOrder.get(group) ?? [];
    for (let i = 1; i < order.length; i++) {
      if ((order[i] as number) <= (order[i - 1] as number)) {
        violations.push(`${group}: delivered out of order (${order.join(',')})`);
        break;
      }
    }
    const undelivered = messages.filter(
      (m) => !recorder.delivered.get(m.uid) && !skippedByHeadAttach(recorder, m),
    );
    if (undelivered.length === 0 || coveredBySizelessLoss(recorder, first)) continue;
    const flagged = recorder.gaps
      .filter((g) => g.sessionId === first.sessionId && g.streamKey === first.streamKey)
      .reduce((sum, g) => sum + (g.lostCount ?? 0), 0);
    if (flagged !== undelivered.length) {
      violations.push(
        `${group} (${first.streamKey}): ${undelivered.length} undelivered [${undelivered.map((m) => m.seq).join(',')}] ` +
          `but gaps flagged ${flagged}`,
      );
    }
  }
  return violations;
};

function groupByStream(recorder: Recorder): Map<string, AppendedMessage[]> {
  const groups = new Map<string, AppendedMessage[]>();
  for (const m of recorder.appended) {
    // Nobody can resume a session whose client forgot it (no durable cursor): the design note's condition 1.
    // Nor one whose id never reached a client (its initialize response was lost; the client re-sent it).
    if (recorder.abandonedSessions.has(m.sessionId) || !recorder.adoptedSessions.has(m.sessionId)) continue;
    // The answer to the transport's own re-initialize is consumed by the transport, not the application.
    if (m.streamKey.startsWith('s:')) continue;
    if (recorder.isSuperseded(m)) continue;
    if (recorder.forgottenStreams.has(`${m.sessionId} ${m.streamKey}`)) continue;
    const key = `${m.sessionId}/${m.stream}`;
    const list = groups.get(key) ?? [];
    list.push(m);
    groups.set(key, list);
  }
  return groups;
}

/**
 * An open finding, excused here so it is counted rather than failing every CI run: the server answers a
 * second GET without a cursor from the head of the standalone stream, on the theory that the client kept
 * a cursor from the first. When the first GET's priming event never reached the client (reset before its
 * first byte), the events in between are lost and nobody is told. `npm run verify` prints how many worlds
 * it excused; the fix belongs in the machines (the server's attach decision, or a gap from the client).
 */
export function skippedByHeadAttach(recorder: Recorder, m: AppendedMessage): boolean {
  return (
    m.streamKey === 'standalone' &&
    recorder.headAttaches.some((a) => a.sessionId === m.sessionId && m.seq <= a.head)
  );
}

/** Worlds in which `skippedByHeadAttach` excused an undelivered event (see there). */
export const excusedHeadAttachLosses = ({ recorder }: WorldOutcome): number =>
  recorder.appended.filter((m) => !recorder.delivered.get(m.uid) && skippedByHeadAttach(recorder, m)).length;

function coveredBySizelessLoss(recorder: Recorder, m: AppendedMessage): boolean {
  const call = m.callKey === undefined ? undefined : recorder.calls.get(m.callKey);
  if (call?.outcome === 'unknown') return true;
  return recorder.gaps.some(
    (g) =>
      g.sessionId === m.sessionId &&
      g.lostCount === null &&
      (g.streamKey === m.streamKey || g.reason === 'session_lost'),
  );
}

export const CHECKS = {
  'at most once': atMostOnce,
  'no unflagged loss': noUnflaggedLoss,
  'no hang': noHang,
  'session survives transport': sessionSurvivesTransport,
  'no duplicate delivery': noDuplicateDelivery,
} as const satisfies Record<string, Check>;

export type CheckName = keyof typeof CHECKS;

/** Tools whose side effect must not repeat: used by the arbitraries to make sure such calls occur. */
export const ONCE_TOOLS = Object.entries(TOOLS)
  .filter(([, t]) => t.sideEffect === 'once')
  .map(([n]) => n);
