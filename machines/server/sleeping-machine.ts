import type { Actor } from 'xstate';
import { type SweepVerdict, sleptFor, sweepVerdict } from './deadlines.js';
import type { serverSessionMachine } from './session.machine.js';

type SessionActor = Actor<typeof serverSessionMachine>;

/** The rules a sleeping machine follows (machines/server/deadlines.ts); a mutant swaps one. */
export interface SleepRules {
  readonly sweepVerdict: typeof sweepVerdict;
  readonly sleptFor: typeof sleptFor;
}

const RULES: SleepRules = { sweepVerdict, sleptFor };

/**
 * A session machine that sleeps while its session is idle. Asleep, it is only its persisted snapshot,
 * as JSON (a few hundred bytes instead of a running actor's ~5 KiB, which is most of an idle session's
 * cost). Anything that reaches for `actor` wakes it: a new actor is created from the snapshot and told
 * how long it slept (`session.woken`), so its idle clock goes on where it stopped. Nothing is decided
 * here: the machine decides what the time asleep means (expired, or not yet).
 */
export class SleepingMachine {
  private awake: SessionActor | undefined;
  /** The persisted snapshot while asleep. */
  private dormant: string | undefined;
  /** When the session was last used here: its idle clock while it sleeps. */
  private lastUsed: number;

  constructor(
    /** Creates and starts an actor (from a snapshot, or new), with the owner's subscriptions. */
    private readonly spawn: (snapshot: unknown) => SessionActor,
    snapshot: unknown,
    /** The host's clock (its timer port's, or the simulated world's virtual one). */
    private readonly now: () => number,
    private readonly rules: SleepRules = RULES,
  ) {
    this.lastUsed = now();
    this.awake = spawn(snapshot);
  }

  /** The running actor, woken first if asleep. */
  get actor(): SessionActor {
    if (this.awake) return this.awake;
    const snapshot = JSON.parse(this.dormant as string) as unknown;
    this.dormant = undefined;
    const actor = this.spawn(snapshot);
    this.awake = actor;
    actor.send({ type: 'session.woken', idleMs: this.rules.sleptFor(this.now(), this.lastUsed) });
    return actor;
  }

  get sleeping(): boolean {
    return this.dormant !== undefined;
  }

  /** The session was used just now. */
  used(): void {
    this.lastUsed = this.now();
  }

  /** The session was used at `time` (on another instance, say), if that is later than known here. */
  usedAt(time: number): void {
    this.lastUsed = Math.max(this.lastUsed, time);
  }

  /** When the session was last used: its idle clock. */
  get lastUsedAt(): number {
    return this.lastUsed;
  }

  /** The persisted snapshot, without waking the machine. */
  persisted(): unknown {
    return this.dormant !== undefined ? JSON.parse(this.dormant) : this.actor.getPersistedSnapshot();
  }

  /**
   * Called now and then (one sweep for all sessions): sleeps, wakes (so the machine decides the expiry)
   * or stays, as `sweepVerdict` (deadlines.ts) decides; returns what it did.
   */
  sweep(now: number, idleForMs: number, idleTtlMs: number, busy: boolean): SweepVerdict {
    const actor = this.awake;
    const verdict = this.rules.sweepVerdict({
      now,
      lastUsed: this.lastUsed,
      asleep: this.dormant !== undefined,
      idleForMs,
      idleTtlMs,
      busy,
      machineIdle: actor?.getSnapshot().matches({ live: 'idle' }) ?? false,
    });
    if (verdict === 'wake') void this.actor;
    if (verdict !== 'sleep' || !actor) return verdict;
    this.dormant = JSON.stringify(actor.getPersistedSnapshot());
    this.awake = undefined;
    actor.stop();
    return verdict;
  }

  /** Replaces the machine with one made from `snapshot` (adopted from a shared store). */
  replace(snapshot: unknown): SessionActor {
    this.awake?.stop();
    this.dormant = undefined;
    this.awake = this.spawn(snapshot);
    return this.awake;
  }

  /** Stops the actor, if awake; a sleeping one has nothing to stop. */
  stop(): void {
    this.awake?.stop();
  }
}
