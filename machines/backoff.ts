import { serverRetryFloor, timerMs } from './client/limits.js';

/**
 * Reconnect timing: exponential backoff with full jitter, honouring the server's `retry:` field.
 * Pure: the jitter comes from a seed, so the same inputs give the same delay (replayable tests).
 */
export interface ReconnectPolicy {
  /** First delay ceiling. */
  readonly initialDelayMs: number;
  /** No ceiling grows past this. */
  readonly maxDelayMs: number;
  /** Growth of the ceiling per failed attempt. */
  readonly factor: number;
  /** Failed attempts in a row before a stream gives up. */
  readonly maxRetries: number;
  /** `full`: uniform in [0, ceiling] (spreads a reconnect storm); `none`: the ceiling itself. */
  readonly jitter: 'full' | 'none';
}

export const DEFAULT_RECONNECT_POLICY: ReconnectPolicy = {
  initialDelayMs: 500,
  maxDelayMs: 30_000,
  factor: 2,
  maxRetries: 8,
  jitter: 'full',
};

export function backoffCeiling(attempt: number, policy: ReconnectPolicy): number {
  const exponent = Math.min(attempt, 64);
  return Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** exponent);
}

/**
 * The wait before reconnect attempt `attempt` (0-based). The spec says the client MUST respect the
 * server's `retry`, so it is a floor, never shortened by jitter; but a floor the server chose is capped at
 * `MAX_SERVER_RETRY_MS`, and the result always fits a timer (`MAX_TIMER_MS`).
 * @spec transports#sending-messages-to-the-server (retry field)
 */
export function reconnectDelay(
  attempt: number,
  policy: ReconnectPolicy,
  serverRetryMs: number | undefined,
  jitterSeed: number,
): number {
  const ceiling = backoffCeiling(attempt, policy);
  const jittered = policy.jitter === 'full' ? Math.floor(unitRandom(jitterSeed, attempt) * ceiling) : ceiling;
  return timerMs(Math.max(serverRetryFloor(serverRetryMs) ?? 0, jittered));
}

/** The longest a stream can spend reconnecting before it gives up: every ceiling, summed. */
export function worstCaseReconnectMs(policy: ReconnectPolicy, serverRetryMs: number | undefined): number {
  let total = 0;
  for (let attempt = 0; attempt < policy.maxRetries; attempt++) {
    total += timerMs(Math.max(serverRetryFloor(serverRetryMs) ?? 0, backoffCeiling(attempt, policy)));
  }
  return total;
}

/** A deterministic value in [0, 1) from (seed, attempt): mulberry32 over a mixed seed. */
export function unitRandom(seed: number, attempt: number): number {
  let t = (seed ^ Math.imul(attempt + 1, 0x9e3779b9)) >>> 0;
  t = (t + 0x6d2b79f5) >>> 0;
  let r = Math.imul(t ^ (t >>> 15), 1 | t);
  r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
  return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
}
