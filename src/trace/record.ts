/**
 * One line of a trace file (JSON Lines). A trace follows machine actors: when each started (with the
 * snapshot it started from and the machine it runs), every event it received (from whom, when), and the
 * state each event left it in. Wire facts (statuses, event ids, cuts, timings) are the events themselves:
 * the runtime reports the network to the machines as events, so recording the events records the wire.
 */
export type TraceRecord = ActorStarted | Started | EventReceived | StateReached | ActionTaken;

export interface ActorStarted {
  readonly k: 'actor';
  /** Milliseconds since the trace began. */
  readonly t: number;
  /** The actor's session id (unique within a process). */
  readonly a: string;
  /** The machine's root id (`modernCall`, `clientSession`, …); absent for actors that are not machines. */
  readonly machine?: string;
  /** The actor's id within its parent (`stream-3`, …). */
  readonly id: string;
  readonly parent?: string;
}

/** A machine actor's first snapshot (entry actions run, children invoked): where a replay starts. */
export interface Started {
  readonly k: 'start';
  readonly t: number;
  readonly a: string;
  /** Its persisted snapshot, encoded (`codec.ts`). */
  readonly snapshot: unknown;
}

export interface EventReceived {
  readonly k: 'event';
  readonly t: number;
  readonly a: string;
  /** The sender's session id; absent for events from outside the actor system (the application). */
  readonly from?: string;
  /** The event, encoded. */
  readonly e: { readonly type: string } & Record<string, unknown>;
}

export interface StateReached {
  readonly k: 'state';
  readonly t: number;
  readonly a: string;
  /** The state value after the event. */
  readonly value: unknown;
  readonly status: string;
  /** The event that led here. */
  readonly after: string;
  /** The machine's latest decision (`context.decision`), when it keeps one: what a cut was taken to mean. */
  readonly decision?: unknown;
  /** The output of a final state: how a call or stream ended. */
  readonly output?: unknown;
}

/**
 * An action a machine asked of the world (`deliver` a message to the application, `persistCursor`…), with
 * its params: what the application was told, and when. The machines' own bookkeeping (`xstate.*`) is not
 * recorded, except what they emit (`xstate.emit`: a keyed body started, a listen gap).
 */
export interface ActionTaken {
  readonly k: 'action';
  readonly t: number;
  readonly a: string;
  readonly action: string;
  readonly params?: unknown;
}

/** The machines' state value as one readable string: `attempting.live`, `waiting`. */
export function stateName(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null || typeof value !== 'object') return String(value);
  return Object.entries(value as Record<string, unknown>)
    .map(([k, v]) => {
      const inner = stateName(v);
      return inner.includes(',') ? `${k}.(${inner})` : `${k}.${inner}`;
    })
    .join(', ');
}
