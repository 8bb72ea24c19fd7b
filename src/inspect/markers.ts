import { isRequestKey, type RequestId, requestKey } from '../../machines/jsonrpc.js';
import { isOutcomeUnknown } from '../client/outcome.js';
import { isForwardedEmit } from './modern-view.js';
import type { Marker } from './wire.js';

/**
 * Gaps and outcome-unknown calls, read from the client machine's own actions: `notifyGap` is exactly what
 * `onGap` receives, and `deliver` of an OUTCOME_UNKNOWN error is exactly what the caller receives. A feed
 * without actions (@statelyai/inspect's) still shows gaps from `stream.gap` events, and likely
 * outcome-unknown calls from how a request's stream ended.
 */
type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null ? (v as Obj) : {});

/**
 * The only actions a feed sends: the rest are internal steps the snapshots already show. Besides the
 * markers, the 2026 machines' emitted facts the page counts (a body started, an attempt's answer, a
 * listen gap: `isForwardedEmit`).
 */
export function isMarkerAction(action: { type: string; params?: unknown }): boolean {
  if (action.type === 'notifyGap' || action.type === 'reportGap') return true;
  if (isForwardedEmit(action)) return true;
  return action.type === 'deliver' && isOutcomeUnknown(obj(action.params).message);
}

export function markerFromAction(
  actorId: string,
  action: { type: string; params?: unknown },
  at: number,
): Marker | undefined {
  const p = obj(action.params);
  if (action.type === 'notifyGap') return gapMarker(actorId, String(p.streamKey ?? '?'), p, at);
  // A 2026 keyed call's events were evicted on the server (the extension's 410): an exact gap.
  if (action.type === 'reportGap') return gapMarker(actorId, 'call', obj(p.gap), at);
  const emitted = obj(p.event);
  if (action.type === 'xstate.emit' && emitted.type === 'listen.gap') {
    const gap = obj(emitted.gap);
    const missed = obj(gap.missed);
    return {
      kind: 'gap',
      actorId,
      key: `listen ${String(gap.subscriptionId ?? '?')}`,
      reason: 'listen_reopened',
      lostCount: missed.kind === 'exact' && typeof missed.count === 'number' ? missed.count : null,
      // Each re-open is its own gap: the attempts it took tell two apart.
      detail: `re-opened after ${String(gap.attempts ?? '?')} attempt(s)`,
      at,
    };
  }
  if (action.type === 'deliver' && isOutcomeUnknown(p.message)) {
    const message = obj(p.message);
    const reason = obj(obj(message.error).data).reason;
    return {
      kind: 'outcome-unknown',
      actorId,
      key: requestKey(message.id as RequestId),
      reason: typeof reason === 'string' ? reason : 'unknown',
      at,
    };
  }
  return undefined;
}

/** Stream endings that leave a pending call's outcome unknown (`outcomeReason` in the client machine). */
const UNKNOWN_ENDINGS = new Set([
  'given-up',
  'unresumable',
  'response-evicted',
  'epoch-changed',
  'closed-by-server',
]);

/** Markers from events sent to the client machine; outcome-unknown ones are flagged `inferred`. */
export function markerFromEvent(actorId: string, event: unknown, at: number): Marker | undefined {
  const e = obj(event);
  if (e.type === 'stream.gap') return gapMarker(actorId, String(e.key ?? '?'), obj(e.gap), at);
  const kind = obj(e.outcome).kind;
  if (
    e.type === 'stream.ended' &&
    isRequestKey(e.key) &&
    typeof kind === 'string' &&
    UNKNOWN_ENDINGS.has(kind)
  ) {
    return { kind: 'outcome-unknown', actorId, key: e.key, reason: kind, inferred: true, at };
  }
  return undefined;
}

function gapMarker(actorId: string, key: string, gap: Obj, at: number): Marker {
  const lostCount = typeof gap.lostCount === 'number' ? gap.lostCount : null;
  const range =
    gap.requestedId !== undefined
      ? `after ${gap.requestedId}${gap.oldestId ? `, before ${gap.oldestId}` : ''}`
      : '';
  return {
    kind: 'gap',
    actorId,
    key,
    reason: String(gap.reason ?? 'unknown'),
    lostCount,
    ...(range ? { detail: range } : {}),
    at,
  };
}

/** The same gap or call reported twice (its event and its action) is one marker. */
export function markerKey(m: Marker): string {
  // A listen gap is reported once (its action), and one stream may have several alike: each is its own.
  if (m.reason === 'listen_reopened') return `${m.actorId}|${m.kind}|${m.key}|${m.at}`;
  return `${m.actorId}|${m.kind}|${m.key}|${m.kind === 'gap' ? (m.detail ?? m.reason) : ''}`;
}

export function markerText(m: Marker): string {
  if (m.kind === 'gap') {
    const count = m.lostCount === null || m.lostCount === undefined ? 'an unknown number of' : m.lostCount;
    return `gap on ${m.key}: ${count} events lost (${m.reason})${m.detail ? `, ${m.detail}` : ''}`;
  }
  return `outcome unknown: call ${m.key} (${m.reason})${m.inferred ? ', inferred from its stream' : ''}`;
}
