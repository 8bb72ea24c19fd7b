import type { Attributes } from '@opentelemetry/api';
import type { MetricSpec } from './names.js';
import type { Recorder } from './recorder.js';

/** Sessions timed at once; beyond, the oldest start is forgotten (its end then records nothing). */
const MAX_OPEN = 100_000;

/**
 * Times 2025-era sessions for the conventions' `mcp.client.session.duration` and
 * `mcp.server.session.duration` (seconds): from the moment a session is first known here (or, for one
 * restored from a store, from its creation elsewhere: `startedAgo`) to its end. A session whose start is
 * not known here records nothing at its end.
 */
export class SessionTimer {
  private readonly open = new Map<string, number>();

  constructor(
    private readonly recorder: Recorder,
    private readonly spec: MetricSpec,
    private readonly now: () => number,
  ) {}

  started(sessionId: string): void {
    this.startedAgo(sessionId, 0);
  }

  /** A session that started `agoMs` ago elsewhere (another instance, a previous process). */
  startedAgo(sessionId: string, agoMs: number): void {
    if (this.open.has(sessionId)) return;
    this.open.set(sessionId, this.now() - agoMs);
    if (this.open.size > MAX_OPEN) this.open.delete(this.open.keys().next().value as string);
  }

  /** A session that ended where this instance does not count it (another instance did): no record, no entry. */
  forget(sessionId: string): void {
    this.open.delete(sessionId);
  }

  /** How many sessions are being timed (bounded by `MAX_OPEN`). */
  get size(): number {
    return this.open.size;
  }

  ended(sessionId: string, attributes: Attributes = {}): void {
    const startedAt = this.open.get(sessionId);
    if (startedAt === undefined) return;
    this.open.delete(sessionId);
    this.recorder.record(this.spec, Math.max(0, this.now() - startedAt) / 1000, attributes);
  }
}

/** The client session machine's states in which its session id names a live session. */
const LIVE_STATES = new Set(['uninitialized', 'initializing', 'active']);
/** States a session id is dropped in because the server no longer has the session (a 404). */
const LOST_STATES = new Set(['reinitializing', 'failed']);

/**
 * What a client machine snapshot says of its session: the id it holds while that session lives, and,
 * once it no longer does, whether it ended by loss (the conventions' `error.type`).
 */
export function clientSessionOf(snapshot: {
  readonly value?: unknown;
  readonly status?: unknown;
  readonly context?: { readonly sessionId?: unknown };
}): { readonly live: string | undefined; readonly errorType: string | undefined } {
  const state = typeof snapshot.value === 'string' ? snapshot.value : '';
  const id = snapshot.context?.sessionId;
  const live =
    snapshot.status === 'active' && LIVE_STATES.has(state) && typeof id === 'string' ? id : undefined;
  return { live, errorType: LOST_STATES.has(state) ? 'session_lost' : undefined };
}
