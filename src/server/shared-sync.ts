import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { type ExpiryRead, expiryEvent, RECORD_MISSING_MEANS } from '../../machines/server/instances.js';
import { DEFAULT_REQUEST_MEMORY } from '../../machines/server/request-memory.js';
import { sharedFacts } from '../../machines/server/session.machine.js';
import {
  coreOf,
  joinSnapshot,
  mergeSnapshot,
  newEntries,
  numberedCore,
  rebaseEntries,
  type StreamEntry,
  settledFacts,
  unrunRebased,
  type Watermark,
  watermarkOf,
} from '../../machines/server/shared-record.js';
import type { EventLog, Rebased, SessionRecord, SharedSessionStore } from './event-log.js';
import type { SessionHost } from './session-host.js';

/** A rebase the store did, with what the decision it rebased was made on. */
interface PendingRebase extends Rebased {
  readonly base: Watermark;
  readonly entries: ReadonlyArray<readonly [number, StreamEntry]>;
  /** The snapshot the decision left (before the rebase). */
  readonly decided: unknown;
}

/** The request memory's capacity a snapshot was made with (machines/server/request-memory.ts). */
const requestMemoryOf = (snapshot: unknown): number =>
  (snapshot as { context: { requestMemory?: number } }).context.requestMemory ?? DEFAULT_REQUEST_MEMORY;

/** What the shared-store sync of one session needs. */
export interface SyncedSession {
  readonly id: string;
  readonly epoch: string;
  readonly principal?: string;
  readonly initialize?: JsonRpcMessage;
  /** When the session was created (wall clock, ms), kept in its record (`SessionRecord.createdAt`). */
  readonly createdAt?: number;
  /** The version of the stored record the session's snapshot came from (0: a new session). */
  readonly version?: number;
  /** Where a rebased request no instance runs gets its answer (`unrunRebased`). */
  readonly log: Pick<EventLog, 'appendFinal'>;
  readonly onError: (error: unknown) => void;
}

/**
 * Shared-store sync: keeps one session's machine on the newest stored record, and commits the decisions
 * every instance must see. Without a shared store (`store` undefined) a decision is simply made.
 */
export class SharedSync {
  /** The stored record's version this machine reflects. */
  private version: number;
  /**
   * How far the numbering of the snapshot at `version` went (machines/server/shared-record.ts): a commit
   * writes the entries numbered since, a catch-up reads them. Taken when first needed.
   */
  private base: Watermark | undefined;
  /** Decisions of this session on this instance, one at a time. */
  private turn: Promise<unknown> = Promise.resolve();
  /** What ran here before a decision that was discarded: the adopted machine is told this, not its effect. */
  private runningBeforeDiscard: Record<string, number> | undefined;

  constructor(
    private readonly host: SessionHost,
    readonly store: SharedSessionStore | undefined,
    private readonly o: SyncedSession,
    /** Another instance ended the session: this instance ends its copy. */
    private readonly gone: (reason: 'expired' | 'terminated') => void,
  ) {
    this.version = o.version ?? 0;
  }

  /**
   * Runs `act` (which asks the machine) on this instance's copy and writes what it changed that every
   * instance must see (a request id admitted, a stream numbered) over exactly the version the copy came
   * from; a decision that changed none of it is confirmed against that version instead. Either is one
   * step: no read comes first. When another instance wrote first, the decision is discarded, the newer
   * record read (only what changed since, machines/server/shared-record.ts) and the decision made again
   * on it. Decisions of one session on one instance take turns, so they never conflict with each other.
   */
  async decide<R>(act: () => R): Promise<R> {
    const shared = this.store;
    if (!shared) return act();
    const run = this.turn.then(async () => {
      for (let attempt = 0; attempt < 32; attempt++) {
        // Only a copy known to be behind (a discarded decision) is read before deciding.
        if (this.version < 0) await this.sync();
        const before = this.version;
        if (this.base === undefined && !this.host.ended) this.base = watermarkOf(this.host.persisted());
        const snapshot = this.host.actor.getSnapshot();
        const facts = sharedFacts(snapshot);
        const settled = settledFacts(snapshot);
        const running = Object.fromEntries(this.host.running());
        const answer = act();
        if (this.host.ended) return answer;
        const changed = sharedFacts(this.host.actor.getSnapshot()) !== facts;
        const written = changed
          ? await this.commit(shared, before, settled)
          : await shared.confirm(this.o.id, before);
        if (written === true) {
          if (changed) this.version = before + 1;
          return answer;
        }
        if (written !== false) {
          const again = await this.rebased(written, act, running);
          if (again.done) return again.answer;
        }
        // Another instance wrote first: this decision is discarded with the machine it was made on, and
        // what runs here is restated as it was before it.
        this.version = -1;
        this.runningBeforeDiscard = running;
      }
      throw new Error(`session ${this.o.id}: the shared store kept changing under every decision`);
    });
    this.turn = run.catch(() => {});
    return run;
  }

  /**
   * Writes the decision just made over version `before`: only the core and the entries it numbered when
   * the store keeps that layout (machines/server/shared-record.ts), else the whole record.
   */
  private async commit(
    shared: SharedSessionStore,
    before: number,
    settledBefore: string,
  ): Promise<boolean | PendingRebase> {
    const snapshot = this.host.persisted();
    const base = this.base;
    const entries = shared.commitEntries && base ? newEntries(base, snapshot) : undefined;
    const watermark = watermarkOf(snapshot);
    if (!entries || !base) {
      const whole = await shared.commit(this.record(snapshot), before);
      if (whole) this.base = watermark;
      return whole;
    }
    const facts = settledFacts(snapshot);
    // Only admissions (no other shared fact changed) may be rebased after another instance's.
    const rebase =
      facts === settledBefore && watermark.standalone === base.standalone
        ? { base, capacity: requestMemoryOf(snapshot) }
        : undefined;
    const written = await (shared.commitEntries as NonNullable<SharedSessionStore['commitEntries']>)(
      this.record(coreOf(snapshot)),
      entries,
      watermark,
      before,
      facts,
      rebase,
    );
    if (written === true) this.base = watermark;
    if (typeof written === 'boolean') return written;
    return { ...written, base, entries, decided: snapshot };
  }

  /**
   * The store wrote this decision after another instance's admissions (machines/server/shared-record.ts,
   * "Admissions commute"): this copy catches up on those (they came with the answer), makes the decision
   * again there, and, finding it numbered exactly what the store wrote, is done with no further step.
   * Anything else (never expected): the requests the store admitted get their definite answer, "not run"
   * (`unrunRebased`), and the decision is made again on the record read anew, which finds them admitted
   * and hands the client that answer.
   */
  private async rebased<R>(
    r: PendingRebase,
    act: () => R,
    running: Record<string, number>,
  ): Promise<{ done: true; answer: R } | { done: false }> {
    const merged = mergeSnapshot(r.decided, r.base, numberedCore(coreOf(r.decided), r.onto), r.since);
    this.runningBeforeDiscard = running;
    this.adopt(merged, r.version - 1);
    const base = watermarkOf(merged);
    this.base = base;
    const answer = act();
    const again = this.host.ended ? undefined : newEntries(base, this.host.persisted());
    const expected = rebaseEntries(r.entries, r.base.nextStream, r.onto.nextStream);
    if (again !== undefined && JSON.stringify(again) === JSON.stringify(expected)) {
      this.version = r.version;
      this.base = watermarkOf(this.host.persisted());
      return { done: true, answer };
    }
    this.o.onError(new Error(`session ${this.o.id}: a rebased decision was not made again as written`));
    for (const { stream, answer: unrun } of unrunRebased(expected)) {
      await this.o.log.appendFinal(this.o.id, stream, unrun).catch(this.o.onError);
    }
    return { done: false };
  }

  /** Runs `act` in this session's turn, between decisions (a reap, say), committing nothing. */
  async inTurn<R>(act: () => Promise<R>): Promise<R> {
    if (!this.store) return act();
    const run = this.turn.then(act);
    this.turn = run.catch(() => {});
    return run;
  }

  /** Brings the machine up to the stored record. False when the session is gone. */
  async sync(): Promise<boolean> {
    const shared = this.store;
    if (!shared || this.host.ended) return !this.host.ended;
    if (shared.loadSince) return this.catchUp(shared.loadSince.bind(shared));
    if ((await shared.version(this.o.id)) === this.version) return true;
    const stored = await shared.load(this.o.id);
    // A new session is stored by its first commit (its initialize request).
    if (!stored && this.version === 0) return true;
    if (!stored) {
      this.gone(RECORD_MISSING_MEANS);
      return false;
    }
    if (stored.version !== this.version) this.adopt(stored.record.snapshot, stored.version);
    return true;
  }

  /**
   * `sync` on a store with the layout of machines/server/shared-record.ts: one read, which answers
   * "unchanged" or brings the newer core and only the entries numbered since this copy's base.
   */
  private async catchUp(loadSince: NonNullable<SharedSessionStore['loadSince']>): Promise<boolean> {
    const base = this.base;
    const stored = await loadSince(this.o.id, this.version, base);
    if (!stored && this.version === 0) return true;
    if (!stored) {
      this.gone(RECORD_MISSING_MEANS);
      return false;
    }
    if (!stored.record || stored.version === this.version) return true;
    const { record, entries } = stored;
    const snapshot =
      entries === undefined
        ? record.snapshot
        : base === undefined
          ? joinSnapshot(record.snapshot, entries)
          : mergeSnapshot(this.host.persisted(), base, record.snapshot, entries);
    this.adopt(snapshot, stored.version);
    this.base = watermarkOf(snapshot);
    return true;
  }

  /**
   * The idle TTL ran out here; the machine decides on how long it was idle everywhere. Used elsewhere
   * since, the idle clock here restarts from then, so a sleeping copy does not wake to ask at every sweep.
   */
  async checkExpiry(): Promise<void> {
    let read: ExpiryRead;
    try {
      const idleMs = await this.store?.idleFor(this.o.id);
      read = idleMs === undefined ? { kind: 'missing' } : { kind: 'idle', idleMs };
    } catch (error) {
      this.o.onError(error);
      read = { kind: 'failed' };
    }
    if (this.host.ended) return;
    if (read.kind === 'idle') this.host.used(this.host.now() - read.idleMs);
    const event = expiryEvent(read);
    if (event.type === 'session.gone') this.gone(event.reason);
    else this.host.send(event);
  }

  /** The record stored for this session: what a new process or another instance restores it from. */
  record(snapshot: unknown = this.host.persisted()): SessionRecord {
    return {
      id: this.o.id,
      epoch: this.o.epoch,
      principal: this.o.principal,
      initialize: this.o.initialize as JsonRpcMessage,
      snapshot,
      ...(this.o.createdAt === undefined ? {} : { createdAt: this.o.createdAt }),
    };
  }

  /**
   * Another instance moved the session on; adopt its snapshot. What is attached and running here is this
   * instance's own fact, so it is restated to the new machine.
   */
  private adopt(snapshot: unknown, version: number): void {
    // What ran before the discarded decision and still runs: a request settled while the commit was in
    // flight (its answer is stored outside the turn) is not restated, or the session would stay busy
    // forever; one the discarded decision started is not either (the decision is made again).
    const now = this.host.running();
    const before = this.runningBeforeDiscard;
    const running = before
      ? Object.fromEntries(Object.entries(before).filter(([key]) => now.has(key)))
      : Object.fromEntries(now);
    const attached = this.host.attached();
    this.runningBeforeDiscard = undefined;
    this.host.replace(snapshot);
    this.version = version;
    this.host.send({ type: 'session.synced', attached, running });
  }
}
