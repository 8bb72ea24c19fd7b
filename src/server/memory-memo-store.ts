import { randomBytes } from 'node:crypto';
import {
  admitCounted,
  admitNewKey,
  type MemoEntry,
  type MemoExpected,
  memoExpired,
} from '../../machines/server/keyed-memo.js';
import { memoForgetDelayMs } from '../../machines/server/keyed-timing.js';
import type { MemoCreate, MemoStore } from './memo-store.js';
import { type Wake, WakePort } from './wake-port.js';

export interface MemoryMemoStoreOptions {
  readonly memoWindowMs: number;
  /** Injectable clock (tests). Defaults to `Date.now`. */
  readonly now?: () => number;
  /** Told when an entry is forgotten (its window passed), with its log id: the runtime drops its events. */
  readonly onForget?: (logId: string) => void;
  /** The timer port the window ends are asked of. Defaults to one of its own: one timer for the store. */
  readonly wakes?: WakePort;
}

/**
 * The memo in process memory: one process, nothing survives a restart (so a re-issue of an unknown key
 * is outcome unknown until the process has been up for the memo window). Each finished entry has one
 * wake-up, at the end of its window, that deletes it: no entry and no wake-up outlives its window. The
 * wake-ups share one timer (a `WakePort`), not one Node timer per entry.
 */
export class MemoryMemoStore implements MemoStore {
  readonly durable = false;
  readonly instanceId = randomBytes(8).toString('hex');
  private readonly entries = new Map<string, MemoEntry>();
  private readonly byPrincipal = new Map<string, Set<string>>();
  private readonly timers = new Map<string, Wake>();
  /** The keys of the running entries: `running()` (every lease tick) reads these, not every entry. */
  private readonly runningKeys = new Set<string>();
  private readonly wakes: WakePort;
  private readonly now: () => number;
  private readonly since: number;
  private forgotten: ((logId: string) => void) | undefined;
  readonly memoWindowMs: number;

  constructor(private readonly options: MemoryMemoStoreOptions) {
    this.memoWindowMs = options.memoWindowMs;
    this.now = options.now ?? Date.now;
    // Its own port runs on real time, as the Node timers did: a delay is real milliseconds whatever `now` says.
    this.wakes = options.wakes ?? new WakePort();
    this.since = this.now();
    this.forgotten = options.onForget;
  }

  onForget(listener: (logId: string) => void): void {
    this.forgotten = listener;
  }

  async completeForMs(): Promise<number> {
    return this.now() - this.since;
  }

  async get(memoKey: string): Promise<MemoEntry | undefined> {
    return this.current(memoKey);
  }

  /**
   * The live entry, read synchronously: `create` and `replace` must not wait between their read and their
   * write, or two requests racing on one key both see it absent (or both see `expected`) and both win.
   */
  private current(memoKey: string): MemoEntry | undefined {
    const e = this.entries.get(memoKey);
    if (e && memoExpired(e, this.options.memoWindowMs, this.now())) {
      this.forget(memoKey);
      return undefined;
    }
    return e;
  }

  async create(entry: MemoEntry, maxEntriesPerPrincipal: number): Promise<MemoCreate> {
    const existing = this.current(entry.memoKey);
    if (existing) return { kind: 'exists', entry: existing };
    // The principal's set holds its live entries (each is deleted by its own timer when its window ends),
    // so below the bound it is admitted without reading them: a create costs O(1), not O(entries).
    // The bound is the memo's rule (`admitCounted`, machines/server/keyed-memo.ts) on the count; the
    // entries themselves are read only when the count reaches it.
    const held = this.byPrincipal.get(entry.principal)?.size ?? 0;
    const counted = { live: held, firstWindowEnd: Number.POSITIVE_INFINITY };
    if (admitCounted(counted, maxEntriesPerPrincipal, this.memoWindowMs, this.now()).kind === 'admit') {
      this.write(entry);
      return { kind: 'created' };
    }
    const mine = [...(this.byPrincipal.get(entry.principal) ?? [])]
      .map((k) => this.entries.get(k))
      .filter(
        (e): e is MemoEntry => e !== undefined && !memoExpired(e, this.options.memoWindowMs, this.now()),
      );
    const admission = admitNewKey(mine, maxEntriesPerPrincipal, this.options.memoWindowMs, this.now());
    if (admission.kind === 'full') return admission;
    this.write(entry);
    return { kind: 'created' };
  }

  async replace(next: MemoEntry, expected: MemoExpected): Promise<MemoEntry | undefined> {
    const stored = this.current(next.memoKey);
    if (!stored) return undefined;
    if (stored.state !== expected.state || stored.logId !== expected.logId) return stored;
    this.write(next);
    return next;
  }

  async running(): Promise<MemoEntry[]> {
    const running: MemoEntry[] = [];
    for (const k of this.runningKeys) {
      const e = this.entries.get(k);
      if (e?.state === 'running') running.push(e);
    }
    return running;
  }

  async sweep(): Promise<string[]> {
    const gone: string[] = [];
    for (const [k, e] of this.entries) {
      if (memoExpired(e, this.options.memoWindowMs, this.now())) {
        gone.push(e.logId);
        this.forget(k, false);
      }
    }
    return gone;
  }

  async renewLease(): Promise<void> {}
  async dropLease(): Promise<void> {}
  async alive(instanceIds: readonly string[]): Promise<ReadonlySet<string>> {
    return new Set(instanceIds.filter((id) => id === this.instanceId));
  }

  /** Each entry is deleted at the end of its window (its timer): every entry held is live. */
  liveEntries(): number {
    return this.entries.size;
  }

  /** What is held now: for tests (everything is freed when windows pass). */
  stats(): { entries: number; principals: number; timers: number } {
    return { entries: this.entries.size, principals: this.byPrincipal.size, timers: this.timers.size };
  }

  async close(): Promise<void> {
    for (const t of this.timers.values()) t.cancel();
    this.timers.clear();
    this.runningKeys.clear();
    this.entries.clear();
    this.byPrincipal.clear();
  }

  private write(entry: MemoEntry): void {
    this.entries.set(entry.memoKey, entry);
    let set = this.byPrincipal.get(entry.principal);
    if (!set) {
      set = new Set();
      this.byPrincipal.set(entry.principal, set);
    }
    set.add(entry.memoKey);
    this.timers.get(entry.memoKey)?.cancel();
    this.timers.delete(entry.memoKey);
    // The deadline is the memo's rule (machines/server/keyed-timing.ts); this only asks for the wake-up.
    const delay = memoForgetDelayMs(entry, this.options.memoWindowMs, this.now());
    // A running entry has no deadline (it is never forgotten): it is what `running()` lists.
    if (delay === undefined) {
      this.runningKeys.add(entry.memoKey);
      return;
    }
    this.runningKeys.delete(entry.memoKey);
    this.timers.set(
      entry.memoKey,
      this.wakes.after(delay, () => this.forget(entry.memoKey)),
    );
  }

  private forget(memoKey: string, tell = true): void {
    const e = this.entries.get(memoKey);
    if (!e) return;
    this.entries.delete(memoKey);
    this.timers.get(memoKey)?.cancel();
    this.timers.delete(memoKey);
    this.runningKeys.delete(memoKey);
    const set = this.byPrincipal.get(e.principal);
    set?.delete(memoKey);
    if (set?.size === 0) this.byPrincipal.delete(e.principal);
    if (tell) this.forgotten?.(e.logId);
  }
}
