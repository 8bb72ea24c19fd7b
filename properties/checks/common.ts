import type { CallTrace, ExcuseRules, Trace } from './trace.js';

/**
 * The invariants both eras share, judged on the neutral `Trace` (trace.ts), so the model and the real
 * stack run the same code. Each returns its violations (empty: holds). The era modules
 * (properties/checks.ts, properties/checks-modern.ts) add what only one era has.
 */
export type TraceCheck = (trace: Trace, rules: ExcuseRules) => string[];

/** No non-idempotent side effect lands twice for one application call (dead processes' calls included). */
export const atMostOnce: TraceCheck = (t) =>
  [...t.sideEffects]
    .filter(([, n]) => n > 1)
    .map(
      ([key, n]) =>
        `${key} (${t.calls.get(key)?.tool}) ran ${n} times; outcome ${describe(t.calls.get(key))}`,
    );

/**
 * A call the application was told definitely failed never ran (it may only be a result or unknown); a
 * result is the real one: what the tool produced, and, for a tool with a side effect, that effect landed
 * exactly once.
 */
export const honestErrors: TraceCheck = (t) => [
  ...[...t.calls.values()]
    .filter((c) => c.outcome === 'error' && !c.abandoned && (t.executions.get(c.key) ?? 0) > 0)
    .map(
      (c) =>
        `${c.key} (${c.tool}) ran ${t.executions.get(c.key)} time(s) but was reported failed (${c.reason})`,
    ),
  ...[...t.calls.values()]
    .filter((c) => c.outcome === 'result' && c.resultMismatch !== undefined)
    .map((c) => `${c.key} (${c.tool}) answered ${c.resultMismatch}`),
  ...[...t.calls.values()]
    .filter(
      (c) =>
        c.outcome === 'result' &&
        (c.sideEffecting ?? t.sideEffects.has(c.key)) &&
        (t.sideEffects.get(c.key) ?? 0) !== 1,
    )
    .map((c) => `${c.key} (${c.tool}) answered with a result but ran ${t.sideEffects.get(c.key) ?? 0} times`),
];

/** Once faults stop, every live call ends (result, error or outcome unknown) within the settle bound. */
export const noHang: TraceCheck = (t) =>
  t.hung.map((key) => `${key} (${t.calls.get(key)?.tool}) has no outcome after the settle bound`);

/** No call's outcome reaches the application twice. */
export const settledOnce: TraceCheck = (t) =>
  [...t.calls.values()].filter((c) => c.outcomes > 1).map((c) => `${c.key} settled ${c.outcomes} times`);

/**
 * "Outcome unknown because re-sending could run it twice" excuses only a call whose annotations forbid a
 * re-send. A read-only or idempotent call (annotations known to the client) is re-sent instead.
 */
export const resendWhenSafe: TraceCheck = (t, rules) =>
  [...t.calls.values()]
    .filter((c) => isUnknownFor(c, rules.unsafeToResend) && c.resendable)
    .map(
      (c) =>
        `${c.key} (${c.tool}) ended outcome unknown (${c.reason}) though its annotations allow a re-send`,
    );

/**
 * "Outcome unknown because an instance died" excuses only the calls that instance owned: one of the
 * instances that took a run of the call died after the call was made (and before it ended).
 */
export const deathsExcuseOwnCalls: TraceCheck = (t, rules) =>
  [...t.calls.values()]
    .filter((c) => isUnknownFor(c, rules.instanceDied) && !ownerDied(t, c))
    .map(
      (c) =>
        `${c.key} (${c.tool}) ended outcome unknown (${c.reason}) but no instance that ran it died ` +
        `(ran on ${c.owners.join(',') || 'none'}; died: ${t.deaths.map((d) => `${d.instance}@${d.at}`).join(',') || 'none'})`,
    );

/** One of the call's owners died while the call was open. */
export function ownerDied(t: Trace, c: CallTrace): boolean {
  return t.deaths.some(
    (d) =>
      c.owners.includes(d.instance) && d.at >= c.at && (c.settledAt === undefined || d.at <= c.settledAt),
  );
}

/**
 * A server ends a session only for a reason it had (expiry while idle, DELETE, shutdown), and never expires
 * one while a stream is attached to it or a call runs in it.
 */
export const sessionsEndForAReason: TraceCheck = (t, rules) => {
  const out: string[] = [];
  for (const e of t.sessionEnds) {
    if (!rules.sessionEndCauses.has(e.cause))
      out.push(`session ${e.sessionId} ended at ${e.at} for no reason a server has (${e.cause})`);
    else if (rules.onlyWhileIdle.has(e.cause) && e.inUse > 0)
      out.push(`session ${e.sessionId} ${e.cause} at ${e.at} while in use (${e.inUse} streams or calls)`);
  }
  return out;
};

/**
 * A session expires only once it has gone unused for its whole idle TTL: not a moment sooner, whatever the
 * machine was told while it slept or waited (a sleeping session woken with the wrong idle time, an idle
 * timer armed too short).
 */
export const expiryAfterTheTtl: TraceCheck = (t, rules) =>
  t.sessionEnds
    .filter(
      (e) =>
        rules.onlyWhileIdle.has(e.cause) &&
        e.unusedForMs !== undefined &&
        e.idleTtlMs !== undefined &&
        e.unusedForMs < e.idleTtlMs,
    )
    .map(
      (e) =>
        `session ${e.sessionId} ${e.cause} at ${e.at} after ${e.unusedForMs} ms unused (idle TTL ${e.idleTtlMs} ms)`,
    );

/**
 * A 410 says where to resume (`resumeAfter`): the call's next attempt carries that cursor. A re-issue that
 * sends the cursor the server just refused gets the same 410 again, and repeated 410s are then the
 * client's doing, not the world's: they excuse nothing.
 */
export const evictionsAdvanceTheCursor: TraceCheck = (t) =>
  t.evictions
    .filter((e) => e.offered !== undefined && e.next !== undefined && e.next !== e.offered)
    .map(
      (e) =>
        `${e.callKey}: after a 410 at ${e.at} offering ${e.offered}, the re-issue carried ${e.next} ` +
        `(the refused attempt carried ${e.sent})`,
    );

function isUnknownFor(c: CallTrace, reasons: ReadonlySet<string>): boolean {
  return c.outcome === 'unknown' && !c.abandoned && reasons.has(c.reason ?? '');
}

function describe(c: CallTrace | undefined): string {
  return c?.outcome === undefined ? 'none' : `${c.outcome}${c.reason ? ` (${c.reason})` : ''}`;
}

/** The shared checks, by the name every era's verdicts use. */
export const COMMON_CHECKS = {
  'at most once': atMostOnce,
  'honest errors': honestErrors,
  'no hang': noHang,
  'settled once': settledOnce,
  're-sent when safe': resendWhenSafe,
  'deaths excuse only their own calls': deathsExcuseOwnCalls,
  'sessions end for a reason': sessionsEndForAReason,
  'expiry after the idle TTL': expiryAfterTheTtl,
  'evictions advance the cursor': evictionsAdvanceTheCursor,
} as const satisfies Record<string, TraceCheck>;

export type CommonCheckName = keyof typeof COMMON_CHECKS;
