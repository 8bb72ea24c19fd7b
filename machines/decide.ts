import { ReconnectReason, ResumeRejection, StopReason } from './codes.js';

/**
 * The design note's decision procedure: what a closed SSE stream means. Pure and total: every close
 * maps to exactly one decision, and an unexpected status is refused rather than guessed.
 *
 * @see ../shared/seed design note, "Decision Boundary"
 * @spec transports#resumability-and-redelivery, transports#session-management
 */
export type StreamClose =
  /** The socket failed. `refused`: the connection was never made, so the request never left. */
  | { readonly kind: 'network'; readonly fault: 'reset' | 'timeout' | 'stall' | 'refused' }
  /** The response ended cleanly without an `event: close`: the server is polling us, or a proxy cut. */
  | { readonly kind: 'end-of-stream' }
  /** The server sent `event: close`: the session is ending, stop reconnecting. */
  | { readonly kind: 'close-event'; readonly reason?: string }
  /** The server answered with a status other than a 200 event stream. */
  | { readonly kind: 'http-status'; readonly status: number; readonly body?: unknown };

/** What the server told us about lost events (the 409/410 body), as delivered to `onGap`. */
export interface GapDetails {
  readonly reason: string;
  /** The cursor we asked to resume after. */
  readonly requestedId?: string;
  readonly oldestId?: string;
  readonly headId?: string;
  /** Exactly how many events were lost, when the server knows (dense sequence numbers). */
  readonly lostCount: number | null;
  /** A cursor that resumes at the oldest retained event, so nothing still retained is thrown away. */
  readonly resumeAfter?: string;
  /** The stream had ended on the server (its response was written), so nothing more will be appended. */
  readonly streamComplete: boolean;
}

export type CloseDecision =
  | { readonly action: 'reconnect'; readonly reason: ReconnectReason }
  | { readonly action: 'session-terminated' }
  | { readonly action: 'events-lost'; readonly gap: GapDetails }
  | { readonly action: 'stop'; readonly reason: StopReason }
  | { readonly action: 'refuse'; readonly status: number; readonly body?: unknown };

/** Statuses that describe the path to the server, not the session: retry them like a reset. */
const TRANSIENT_STATUSES: ReadonlySet<number> = new Set([408, 425, 429, 500, 502, 503, 504]);

export function classifyClose(close: StreamClose): CloseDecision {
  switch (close.kind) {
    case 'network':
      return { action: 'reconnect', reason: close.fault };
    case 'end-of-stream':
      return { action: 'reconnect', reason: ReconnectReason.endOfStream };
    case 'close-event':
      return { action: 'stop', reason: StopReason.closeEvent };
    case 'http-status':
      return classifyStatus(close.status, close.body);
  }
}

function classifyStatus(status: number, body: unknown): CloseDecision {
  if (status >= 500 && status < 600) return { action: 'reconnect', reason: ReconnectReason.serverError };
  if (TRANSIENT_STATUSES.has(status)) return { action: 'reconnect', reason: ReconnectReason.throttled };
  if (status === 404) return { action: 'session-terminated' };
  if (status === 410) return { action: 'events-lost', gap: gapFromBody(body) };
  // 409 means events were lost only when the server says so; the official SDK server also answers 409
  // while it still holds the previous connection of the stream, which is a transport fact.
  if (status === 409) {
    return saysEventsLost(body)
      ? { action: 'events-lost', gap: gapFromBody(body) }
      : { action: 'reconnect', reason: ReconnectReason.conflict };
  }
  // WHATWG EventSource: 204 means "stop reconnecting"; 405 on GET means "no standalone stream here".
  if (status === 204) return { action: 'stop', reason: StopReason.noContent };
  if (status === 405) return { action: 'stop', reason: StopReason.notOffered };
  return { action: 'refuse', status, body };
}

/** Reads a 409/410 body; a server that gives no details still yields a gap, of unknown size. */
export function gapFromBody(body: unknown): GapDetails {
  const data = errorData(body);
  const str = (k: string) => (typeof data[k] === 'string' ? (data[k] as string) : undefined);
  const lost = data.lostCount;
  return {
    reason: str('reason') ?? ResumeRejection.windowExceeded,
    requestedId: str('requestedId'),
    oldestId: str('oldestId'),
    headId: str('headId'),
    lostCount: typeof lost === 'number' && Number.isSafeInteger(lost) && lost >= 0 ? lost : null,
    resumeAfter: str('resumeAfter'),
    streamComplete: data.streamComplete === true,
  };
}

const LOSS_REASONS: ReadonlySet<unknown> = new Set([
  ResumeRejection.windowExceeded,
  ResumeRejection.epochChanged,
]);

function saysEventsLost(body: unknown): boolean {
  const data = errorData(body);
  return LOSS_REASONS.has(data.reason) || typeof data.lostCount === 'number';
}

function errorData(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null) return {};
  const error = (body as { error?: unknown }).error;
  if (typeof error !== 'object' || error === null) return {};
  const data = (error as { data?: unknown }).data;
  return typeof data === 'object' && data !== null ? (data as Record<string, unknown>) : {};
}
