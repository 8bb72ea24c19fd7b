import { type ReconnectPolicy, worstCaseReconnectMs } from './backoff.js';

/**
 * The design note's "Condition of Validity", computed. Disconnect ≠ termination holds only when the
 * cursor survives the client, the server keeps events longer than the client can take to come back,
 * and the server says when it cannot resume instead of resuming at head.
 */
export type ContinuityLevel = 'guaranteed' | 'best-effort' | 'none';

/** What a server tells clients about its retention (see the `MCP-Continuity` header). */
export interface ServerAdvertisement {
  /** Events are kept at least this long after being appended. */
  readonly retentionMs?: number;
  /** At most this many events are kept per stream; older ones are evicted first. */
  readonly maxEventsPerStream?: number;
  /** A session idle for this long expires. */
  readonly idleTtlMs?: number;
  /** A comment is written on every open stream this often; silence longer than that means a stall. */
  readonly heartbeatMs?: number;
  /** An evicted or foreign cursor is answered with 410/400 and details, never a silent resume at head. */
  readonly gapSignalling: boolean;
  /** A request id the session has seen is never executed again (a re-sent POST is safe). */
  readonly duplicateRequestProtection: boolean;
}

export type CursorDurability = 'durable' | 'memory' | 'none';

export interface ContinuityInput {
  readonly policy: ReconnectPolicy;
  readonly serverRetryMs?: number;
  /** How long a silent stream takes to be noticed (0 or undefined: only resets are noticed). */
  readonly stallTimeoutMs?: number;
  readonly cursor: CursorDurability;
  readonly server?: ServerAdvertisement;
}

export interface ContinuityAssessment {
  readonly level: ContinuityLevel;
  /** Worst case from the last delivered event to a successful resume: stall detection plus all backoff. */
  readonly worstCaseReconnectMs: number;
  /** Retention window minus the worst case; negative breaks condition 2. Undefined if not advertised. */
  readonly retentionMarginMs?: number;
  /** Why the level is not higher; empty when guaranteed. */
  readonly reasons: readonly string[];
  /** True when the configuration itself breaks a condition (worth a warning at start-up). */
  readonly misconfigured: boolean;
}

export function assessContinuity(input: ContinuityInput): ContinuityAssessment {
  const worst = (input.stallTimeoutMs ?? 0) + worstCaseReconnectMs(input.policy, input.serverRetryMs);
  const server = input.server;
  const reasons: string[] = [];
  let misconfigured = false;

  if (input.cursor === 'none') {
    return {
      level: 'none',
      worstCaseReconnectMs: worst,
      reasons: ['condition 1: Last-Event-ID is not kept, so no stream can be resumed'],
      misconfigured: true,
    };
  }
  if (input.cursor === 'memory')
    reasons.push('condition 1: the cursor is in memory and dies with the process');
  if (!server?.gapSignalling)
    reasons.push('condition 3: the server does not promise to reject an evicted cursor');

  const margin = server?.retentionMs === undefined ? undefined : server.retentionMs - worst;
  if (margin === undefined) reasons.push('condition 2: the server advertises no retention window');
  else if (margin <= 0) {
    reasons.push(
      `condition 2: retention ${server?.retentionMs} ms does not exceed worst-case reconnect ${worst} ms`,
    );
    misconfigured = true;
  }
  if (server?.idleTtlMs !== undefined && server.idleTtlMs <= worst) {
    reasons.push(
      `condition 2: session idle TTL ${server.idleTtlMs} ms does not exceed worst-case reconnect ${worst} ms`,
    );
    misconfigured = true;
  }
  return {
    level: reasons.length === 0 ? 'guaranteed' : 'best-effort',
    worstCaseReconnectMs: worst,
    retentionMarginMs: margin,
    reasons,
    misconfigured,
  };
}
