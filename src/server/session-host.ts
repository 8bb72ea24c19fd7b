import { type Actor, createActor, type InspectionEvent, type Observer } from 'xstate';
import { askMachine } from '../../machines/server/execute-plan.js';
import {
  type ServerSessionEmitted,
  type ServerSessionEvent,
  serverSessionMachine,
} from '../../machines/server/session.machine.js';
import { SleepingMachine } from '../../machines/server/sleeping-machine.js';

type SessionActor = Actor<typeof serverSessionMachine>;
type Emitted<T extends ServerSessionEmitted['type']> = Extract<ServerSessionEmitted, { type: T }>;

/**
 * What hosting a session's machine needs to create it: the session's own options object, read where it
 * is (a copy of its keys would be one more object per idle session, docs/benchmarks.md row 4).
 */
export interface HostedMachine {
  readonly id: string;
  readonly epoch: string;
  readonly principal?: string;
  readonly idleTtlMs: number;
  /** Its log: whether a shared store is kept beside it. */
  readonly log: { readonly shared?: object };
  readonly limits?: { readonly maxOpenRequestStreamsPerSession?: number };
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** A persisted snapshot: the session is restored (a new process, or adopted from a shared store). */
  readonly snapshot?: unknown;
  /** The host's clock (its timer port's): the idle clock of a sleeping session reads it. */
  readonly wakes: { readonly now: () => number };
}

/**
 * The machine's announcements the session acts on. Methods of the session itself, not closures: four
 * closures and their context were kept by every idle session (docs/benchmarks.md, row 4).
 */
export interface HostListeners {
  machineEnded(e: Emitted<'session.ended'>): void;
  machineReleased(): void;
  machineExpiryDue(): void;
  machineUnanswered(e: Emitted<'decision.unanswered'>): void;
}

/**
 * Hosting: one session's machine, asleep while idle (sleeping-machine.ts), asked and told by the
 * session, and whether the session has ended here. Nothing is decided here.
 */
export class SessionHost {
  private readonly machine: SleepingMachine;
  /** The session ended here (or was released): no machine to ask any more. */
  ended = false;
  /** Ended because the process stops with a durable log: the session lives on for the next process. */
  released = false;
  /** Another instance ended the session; this one only ends its copy. */
  endedElsewhere = false;

  constructor(
    private readonly o: HostedMachine,
    private readonly listeners: HostListeners,
  ) {
    this.machine = new SleepingMachine((snapshot) => this.spawn(snapshot), o.snapshot, o.wakes.now);
  }

  /** The machine, woken first if the session sleeps. */
  get actor(): SessionActor {
    return this.machine.actor;
  }

  get sleeping(): boolean {
    return this.machine.sleeping;
  }

  /**
   * The requests running here (request key → stream), as the machine counts them. A sleeping machine
   * runs nothing (it sleeps only when idle), so it is not woken to be asked.
   */
  running(): ReadonlyMap<string, number> {
    if (this.machine.sleeping) return NOTHING;
    return new Map(Object.entries(this.actor.getSnapshot().context.running ?? {}));
  }

  /** The responses attached here, as the machine counts them (a sleeping machine has none). */
  attached(): number {
    return this.machine.sleeping ? 0 : this.actor.getSnapshot().context.attached;
  }

  /** What is attached or running here keeps the session alive (on every instance, sharing a store). */
  get busy(): boolean {
    return this.attached() > 0 || this.running().size > 0;
  }

  /** The host's clock. */
  now(): number {
    return this.o.wakes.now();
  }

  /** The session was used just now (at `time`, if given: on another instance): its idle clock restarts. */
  used(time?: number): void {
    if (time === undefined) this.machine.used();
    else this.machine.usedAt(time);
  }

  persisted(): unknown {
    return this.machine.persisted();
  }

  sweep(now: number, idleForMs: number, busy: boolean): void {
    if (!this.ended) this.machine.sweep(now, idleForMs, this.o.idleTtlMs, busy);
  }

  /** Adopts a newer snapshot (from a shared store). */
  replace(snapshot: unknown): void {
    this.machine.replace(snapshot);
  }

  stop(): void {
    this.machine.stop();
  }

  /** Events after the session ended (here, or released by a stopping process) have no machine to go to. */
  send(event: ServerSessionEvent): void {
    if (!this.ended) this.actor.send(event);
  }

  /** Sends `event` and returns the machine's answer of `type`. */
  ask<T extends ServerSessionEmitted['type']>(event: ServerSessionEvent, type: T): Emitted<T> {
    if (this.ended) throw new SessionUnavailableError(this.released);
    return askMachine(this.actor, event, type);
  }

  private spawn(snapshot: unknown): SessionActor {
    const o = this.o;
    const actor = createActor(serverSessionMachine, {
      input: {
        sessionId: o.id,
        epoch: o.epoch,
        idleTtlMs: o.idleTtlMs,
        principal: o.principal,
        sharedStore: o.log.shared !== undefined,
        maxInFlight: o.limits?.maxOpenRequestStreamsPerSession,
      },
      ...(snapshot ? { snapshot: snapshot as never } : {}),
      inspect: o.inspect,
    });
    const listeners = this.listeners;
    actor.on('session.ended', (e) => listeners.machineEnded(e));
    actor.on('session.released', () => listeners.machineReleased());
    actor.on('expiry.due', () => listeners.machineExpiryDue());
    actor.on('decision.unanswered', (e) => listeners.machineUnanswered(e));
    actor.start();
    return actor;
  }
}

const NOTHING: ReadonlyMap<never, never> = new Map<never, never>();

/**
 * A request reached a session that ended while it was on its way: 404 if the session is gone, 503 if this
 * process released it (it is stopping; the session lives on in a durable log and another process serves it).
 */
export class SessionUnavailableError extends Error {
  constructor(readonly released: boolean) {
    super(released ? 'the session was released by a stopping server' : 'the session has ended');
    this.name = 'SessionUnavailableError';
  }
}
