/**
 * The neutral record of what happened in one world, simulated or real: the shape every check reads. The
 * model's recorders (properties/world/recorder.ts, properties/world-modern/recorder.ts) and the real-stack
 * worlds (test/stack/*-world.ts) each turn what they saw into a `Trace`, so an invariant is written once
 * per era (properties/checks.ts, properties/checks-modern.ts) and judged on both.
 *
 * Times are the world's own: virtual milliseconds in the model, real milliseconds since the world began
 * on the stack. Everything here is observed outside the system under test (tool bodies, the application,
 * the wire, the world's own faults), never read from the machines' context.
 */
export type Outcome = 'result' | 'error' | 'unknown';

export interface CallTrace {
  readonly key: string;
  readonly tool: string;
  /** When the application made the call. */
  readonly at: number;
  /**
   * The tool's annotations allow a re-send (`readOnlyHint` or `idempotentHint`) and the client had them
   * before the call was made: even a server that cannot tell a re-send from a first send may get it again.
   */
  readonly resendable: boolean;
  readonly outcome?: Outcome;
  /** The cause the client named: outcome unknown's `error.data.reason`, or the kind of an error. */
  readonly reason?: string;
  readonly settledAt?: number;
  /** How many times the application was given an outcome for it (more than one is a duplicate). */
  readonly outcomes: number;
  /** Its client process died before it settled: nobody waits for its outcome any more. */
  readonly abandoned: boolean;
  /**
   * Server instances that took a run of it (admitted it, or started its tool body). An instance that
   * restarts is a new instance: each incarnation has its own name.
   */
  readonly owners: readonly string[];
  /**
   * How the result the application got differs from what the tool produced (its text), when the world
   * can tell; undefined when it is the real one or cannot be compared.
   */
  readonly resultMismatch?: string;
  /** The tool has a side effect that must land once per call (a charge); undefined: it has one if any landed. */
  readonly sideEffecting?: boolean;
}

/** A session the server ended, with why and how much was using it at that moment. */
export interface SessionEnd {
  readonly sessionId: string;
  readonly at: number;
  /** The server's reason (`expired`, `terminated`, `shutdown`, or whatever a broken server says). */
  readonly cause: string;
  /** Streams attached to it and calls running in it when it ended. */
  readonly inUse: number;
  /**
   * How long it had gone unused when it ended (its idle clock, kept from outside the machine) and the TTL
   * it was given: an expiry needs the first to reach the second. Absent where the world cannot tell.
   */
  readonly unusedForMs?: number;
  readonly idleTtlMs?: number;
}

/** A server instance (one incarnation) died or was stopped. */
export interface InstanceDeath {
  readonly instance: string;
  readonly at: number;
}

/** A call's attempt answered 410 (events evicted), and the cursor the call's next attempt carried. */
export interface EvictionReissue {
  readonly callKey: string;
  readonly at: number;
  /** The cursor the 410 said to resume after (`resumeAfter`); undefined when it offered none. */
  readonly offered: string | undefined;
  /** The cursor the attempt that got the 410 carried (null: none). */
  readonly sent: string | null;
  /** The cursor the next attempt of the call carried (null: none); undefined when there was none. */
  readonly next: string | null | undefined;
}

export interface Trace {
  readonly calls: ReadonlyMap<string, CallTrace>;
  /** Tool bodies started, per call key (any tool whose starts the world counts). */
  readonly executions: ReadonlyMap<string, number>;
  /** Non-idempotent side effects that landed, per call key (a payment provider's ledger). */
  readonly sideEffects: ReadonlyMap<string, number>;
  /** Live calls with no outcome when the settle bound ran out. */
  readonly hung: readonly string[];
  readonly sessionEnds: readonly SessionEnd[];
  readonly deaths: readonly InstanceDeath[];
  readonly evictions: readonly EvictionReissue[];
}

/**
 * The era's vocabulary for the excuses: which of its client's reasons blame what. A reason in no set is
 * judged by the era's own checks only.
 */
export interface ExcuseRules {
  /**
   * Outcome-unknown reasons that say "it may have run, and re-sending it could run it again": an excuse
   * only for a call whose annotations forbid a re-send.
   */
  readonly unsafeToResend: ReadonlySet<string>;
  /** Outcome-unknown reasons that blame a server instance's death: an excuse only for calls it owned. */
  readonly instanceDied: ReadonlySet<string>;
  /** Why a server may end a session at all. */
  readonly sessionEndCauses: ReadonlySet<string>;
  /** Of those, the causes that are the server's own idea (expiry): only while nothing uses the session. */
  readonly onlyWhileIdle: ReadonlySet<string>;
}
