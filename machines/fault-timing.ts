/**
 * The timing of the faults `FaultProxy` (src/testing/fault-proxy.ts) injects on real sockets, decided
 * here so the proxy chooses no delay of its own: how often its load balancer looks for idle connections,
 * which ones it cuts, when a delayed chunk is due, and whether a new connection meets an outage. The
 * proxy holds one timer port (src/server/wake-port.ts) and its clock; it asks these functions what to do
 * when it wakes. The simulated worlds' load balancer cuts by the same rule (`idleCut`).
 */

/**
 * How often idle connections are looked for: a quarter of the idle timeout, between 5 and 50 ms. A cut is
 * then late by a quarter of the timeout at most, and a long timeout costs no more than 20 looks a second.
 */
export const idleSweepPeriodMs = (idleTimeoutMs: number): number =>
  Math.max(5, Math.min(50, Math.floor(idleTimeoutMs / 4)));

/** A connection with no traffic for `idleTimeoutMs` is cut (as a load balancer's idle timeout does). */
export const idleCut = (now: number, lastTraffic: number, idleTimeoutMs: number): boolean =>
  now - lastTraffic >= idleTimeoutMs;

/** When a chunk forwarded at `now` under `latencyMs` of added latency is written on. */
export const chunkDueAt = (now: number, latencyMs: number): number => now + latencyMs;

/**
 * How many of a line's queued chunks (in order) are written at `now`. Bytes on one TCP connection never
 * overtake each other, so a chunk waits for those before it even if it is due sooner.
 */
export function chunksDue(queue: readonly { readonly due: number }[], now: number): number {
  let n = 0;
  while (n < queue.length && (queue[n] as { due: number }).due <= now) n++;
  return n;
}

/**
 * What a new connection meets: the outage's status while one lasts, else the next of the failures asked
 * for (`failNext`), else nothing (it is forwarded).
 */
export function refusalOf(
  now: number,
  outage: { readonly until: number; readonly status: number },
  queued: readonly number[],
): { readonly status: number; readonly fromQueue: boolean } | undefined {
  if (now < outage.until) return { status: outage.status, fromQueue: false };
  const status = queued[0];
  return status === undefined ? undefined : { status, fromQueue: true };
}
