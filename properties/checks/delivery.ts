/**
 * The delivery invariants, written once on a neutral record of what reached the application, and judged
 * on the 2025 model (properties/checks.ts) and on both real stacks (test/stack/stack-world.ts,
 * test/stack/modern-stack-world.ts). Each world says, per stream of server messages, what the server sent,
 * what the application got, and what it was told it lost; the checks do the arithmetic.
 */

/** One stream of server messages (numbered in sending order: log seqs, progress counts). */
export interface StreamDelivery {
  /** Where it is, for the violation's text (a session's stream, a call's progress from one source). */
  readonly label: string;
  /** What reached the application from it, in arrival order: a repeat is a duplicate. */
  readonly delivered: readonly number[];
  /**
   * What the server sent on it that the application is owed (what it will never be owed is left out by
   * the world: a session nobody can resume, a superseded run). Absent: losses are not judged here.
   */
  readonly sent?: readonly number[];
  /** Sent but excused by a named open finding (the model's head attach): not owed, counted elsewhere. */
  readonly excused?: ReadonlySet<number>;
  /** Losses the application was told about on this stream with an exact count, summed. */
  readonly flagged: number;
  /** A loss of unknown size covers the stream (outcome unknown, a gap without a count, the session lost). */
  readonly sizelessLoss: boolean;
}

/** The application was told a session was lost (a gap of reason `session_lost`). */
export interface SessionLossReport {
  readonly label: string;
  readonly serverStillHad: boolean;
}

/** A client left a session (its id changed or ended) or moved to a new one. */
export interface SessionLeave {
  readonly label: string;
  readonly serverStillHad: boolean;
}

/** A progress notification handed to one call's handler, and the call the server sent it for. */
export interface ProgressDelivery {
  readonly receiver: string;
  readonly sentFor: string;
  readonly n: number;
}

export interface DeliveryTrace {
  readonly streams: readonly StreamDelivery[];
  readonly lossReports: readonly SessionLossReport[];
  readonly leaves: readonly SessionLeave[];
  /** Progress deliveries whose receiver the world can name (empty where it cannot). */
  readonly progress: readonly ProgressDelivery[];
  /**
   * New sessions the clients adopted against how many the world's faults allow (one, plus one per server
   * restart and per client restart without a cursor). Absent where the world does not count them.
   */
  readonly sessionsAdopted?: { readonly adopted: number; readonly allowed: number; readonly why: string };
}

export type DeliveryCheck = (d: DeliveryTrace) => string[];

/** No message reaches the application twice, and a stream's messages arrive in the order they were sent. */
export const noDuplicateDelivery: DeliveryCheck = (d) => {
  const out: string[] = [];
  for (const s of d.streams) {
    const counts = new Map<number, number>();
    for (const n of s.delivered) counts.set(n, (counts.get(n) ?? 0) + 1);
    for (const [n, k] of counts) if (k > 1) out.push(`${s.label}: ${n} delivered ${k} times`);
    const firsts = [...counts.keys()];
    if (firsts.some((n, i) => i > 0 && n < (firsts[i - 1] as number)))
      out.push(`${s.label}: delivered out of order (${s.delivered.join(',')})`);
  }
  return out;
};

/**
 * Every message the application is owed reaches it, or lies in a loss it was told about with the right
 * count (too few flagged is a silent loss, too many a loss that did not happen), or in a loss of unknown
 * size that covers it. And a session is never reported lost while the server still had it.
 */
export const noUnflaggedLoss: DeliveryCheck = (d) => {
  const out: string[] = [];
  for (const s of d.streams) {
    if (s.sent === undefined || s.sizelessLoss) continue;
    const got = new Set(s.delivered);
    const undelivered = s.sent.filter((n) => !got.has(n) && !s.excused?.has(n));
    if (s.flagged !== undelivered.length)
      out.push(
        `${s.label}: ${undelivered.length} undelivered [${undelivered.join(',')}] but gaps flagged ${s.flagged}` +
          (s.flagged > undelivered.length ? ' (over-reported)' : ''),
      );
  }
  for (const r of d.lossReports)
    if (r.serverStillHad) out.push(`${r.label}: reported lost while the server still had it`);
  return out;
};

/**
 * The session survives transport faults: a client leaves a session only when the server no longer has
 * it, and new sessions are adopted only as often as the world's restarts explain.
 */
export const sessionSurvivesTransport: DeliveryCheck = (d) => [
  ...d.leaves.filter((l) => l.serverStillHad).map((l) => `${l.label} while the server still had it`),
  ...(d.sessionsAdopted && d.sessionsAdopted.adopted > d.sessionsAdopted.allowed
    ? [
        `${d.sessionsAdopted.adopted} sessions adopted, but only ${d.sessionsAdopted.allowed} allowed (${d.sessionsAdopted.why})`,
      ]
    : []),
];

/** A call's progress handler receives only notifications the server sent for that call. */
export const noMisdelivery: DeliveryCheck = (d) => {
  const byPair = new Map<string, number[]>();
  for (const p of d.progress) {
    if (p.receiver === p.sentFor) continue;
    const key = `${p.receiver} received progress sent for ${p.sentFor}`;
    byPair.set(key, [...(byPair.get(key) ?? []), p.n]);
  }
  return [...byPair].map(([key, ns]) => `${key}: ${ns.join(',')}`);
};

/** The delivery checks, by the name the verdicts use. */
export const DELIVERY_CHECKS = {
  'no duplicate delivery': noDuplicateDelivery,
  'no unflagged loss': noUnflaggedLoss,
  'session survives transport': sessionSurvivesTransport,
  'no misdelivery': noMisdelivery,
} as const satisfies Record<string, DeliveryCheck>;
