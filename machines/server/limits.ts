import { JsonRpcCode } from '../codes.js';

/**
 * How much one server, one principal and one session may hold, and what a request beyond a bound is
 * answered. Pure: the runtime counts, these functions decide.
 */
export interface ServerLimits {
  /** Live sessions in this process. Beyond: 503 with `Retry-After`. */
  readonly maxSessions: number;
  /**
   * Live sessions of one principal (`authenticate`'s answer), or of one remote address when there is no
   * `authenticate`. Beyond: 429 with `Retry-After`.
   */
  readonly maxSessionsPerPrincipal: number;
  /** Requests running at once in one session (each has its own response stream). Beyond: 429 with `Retry-After`. */
  readonly maxOpenRequestStreamsPerSession: number;
  /** Characters of a string request id (ids are remembered for the session's life). Beyond: 400. */
  readonly maxRequestIdLength: number;
  /** Nesting of arrays and objects in a POST body. Beyond: 400. */
  readonly maxJsonDepth: number;
  /** The `Retry-After` sent with a 429 or 503, in seconds. */
  readonly retryAfterSeconds: number;
  /**
   * 2026-07-28: open `subscriptions/listen` streams in this process. Beyond: 503 with `Retry-After`. The
   * official SDK's own bound (1,024, answered 200 `-32603`) is set above it, so it never answers first.
   */
  readonly maxListens: number;
  /**
   * 2026-07-28: open `subscriptions/listen` streams of one principal, or of one remote address without
   * `authenticate`. Beyond: 429 with `Retry-After`; other principals' listens are not affected.
   */
  readonly maxListensPerPrincipal: number;
}

export const DEFAULT_SERVER_LIMITS: ServerLimits = {
  maxSessions: 10_000,
  maxSessionsPerPrincipal: 1_000,
  maxOpenRequestStreamsPerSession: 100,
  maxRequestIdLength: 256,
  maxJsonDepth: 128,
  retryAfterSeconds: 5,
  maxListens: 10_000,
  maxListensPerPrincipal: 100,
};

/** Which bound refused a request: also the `reason` of the `server.limited_requests` metric. */
export const LimitReason = {
  maxSessions: 'max_sessions',
  maxSessionsPerPrincipal: 'max_sessions_per_principal',
  maxOpenRequestStreams: 'max_open_request_streams',
  maxListens: 'max_listens',
  maxListensPerPrincipal: 'max_listens_per_principal',
} as const;
export type LimitReason = (typeof LimitReason)[keyof typeof LimitReason];

export interface LimitRefusal {
  readonly ok: false;
  readonly status: 429 | 503;
  readonly code: number;
  readonly message: string;
  readonly reason: LimitReason;
  readonly retryAfterSeconds: number;
}

export type LimitAdmission = { readonly ok: true } | LimitRefusal;

/** The limits in force: the defaults, with what the server's options set. */
export function resolveLimits(given: Partial<ServerLimits> = {}): ServerLimits {
  const limits = { ...DEFAULT_SERVER_LIMITS };
  for (const key of Object.keys(limits) as (keyof ServerLimits)[]) {
    const value = given[key];
    if (value === undefined) continue;
    if (!Number.isFinite(value) || value < (key === 'retryAfterSeconds' ? 0 : 1)) {
      throw new RangeError(`limits.${key} must be a positive number, got ${value}`);
    }
    limits[key] = Math.floor(value);
  }
  return limits;
}

/**
 * May a new session be created? `sessions`: live sessions in this process; `sessionsOfPrincipal`: those
 * of the caller (its principal, or its remote address without `authenticate`). A full server answers
 * 503 (another instance, or later, may serve); a principal over its share answers 429.
 */
export function admitNewSession(
  counts: { readonly sessions: number; readonly sessionsOfPrincipal: number },
  limits: ServerLimits,
): LimitAdmission {
  if (counts.sessions >= limits.maxSessions) {
    return refuse(
      503,
      LimitReason.maxSessions,
      `Service Unavailable: ${limits.maxSessions} sessions are open`,
      limits,
    );
  }
  if (counts.sessionsOfPrincipal >= limits.maxSessionsPerPrincipal) {
    return refuse(
      429,
      LimitReason.maxSessionsPerPrincipal,
      `Too Many Requests: at most ${limits.maxSessionsPerPrincipal} sessions per principal`,
      limits,
    );
  }
  return { ok: true };
}

/** Whom a request counts against for the per-principal bounds: its principal, else the caller's address. */
export const holderOf = (principal: string | undefined, remoteAddress: string | undefined): string =>
  principal !== undefined ? `principal:${principal}` : `address:${remoteAddress ?? 'unknown'}`;

/**
 * May a 2026-07-28 `subscriptions/listen` stream open? `listens`: open in this process; `listensOfHolder`:
 * those of the caller (`holderOf`). A full process answers 503 (another instance, or later, may serve);
 * a principal over its share answers 429, and never stops another principal's listen.
 */
export function admitListen(
  counts: { readonly listens: number; readonly listensOfHolder: number },
  limits: Pick<ServerLimits, 'maxListens' | 'maxListensPerPrincipal' | 'retryAfterSeconds'>,
): LimitAdmission {
  if (counts.listensOfHolder >= limits.maxListensPerPrincipal) {
    return refuse(
      429,
      LimitReason.maxListensPerPrincipal,
      `Too Many Requests: at most ${limits.maxListensPerPrincipal} open subscriptions/listen streams per principal`,
      limits,
    );
  }
  if (counts.listens >= limits.maxListens) {
    return refuse(
      503,
      LimitReason.maxListens,
      `Service Unavailable: ${limits.maxListens} subscriptions/listen streams are open`,
      limits,
    );
  }
  return { ok: true };
}

/** The official SDK's own bound on open listens: above ours, so ours always answers first. */
export const sdkListenBound = (limits: Pick<ServerLimits, 'maxListens'>): number => limits.maxListens * 2;

/** The answer to a request refused because its session runs `maxOpenRequestStreamsPerSession` already. */
export function tooManyOpenRequests(
  limits: Pick<ServerLimits, 'maxOpenRequestStreamsPerSession' | 'retryAfterSeconds'>,
): LimitRefusal {
  return refuse(
    429,
    LimitReason.maxOpenRequestStreams,
    `Too Many Requests: at most ${limits.maxOpenRequestStreamsPerSession} requests may run at once in a session`,
    limits,
  );
}

function refuse(
  status: 429 | 503,
  reason: LimitReason,
  message: string,
  limits: Pick<ServerLimits, 'retryAfterSeconds'>,
): LimitRefusal {
  return {
    ok: false,
    status,
    code: JsonRpcCode.LIMIT_EXCEEDED,
    message,
    reason,
    retryAfterSeconds: limits.retryAfterSeconds,
  };
}
