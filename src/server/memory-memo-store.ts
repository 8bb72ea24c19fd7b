import { randomBytes } from 'node:crypto';
import {
  admitNewKey,
  type KeyedWorkState,
  type MemoEntry,
  memoExpired,
} from '../../machines/server/keyed-memo.js';
import { memoForgetDelayMs } from '../../machines/server/keyed-timing.js';
import type { MemoCreate, MemoStore } from './memo-store.js';

export interface MemoryMemoStoreOptions {
  readonly memoWindowMs: number;
  /** Injectable clock (tests). Defaults to `Date.now`. */
  readonly now?: () => number;
  /** Told when an entry is forgotten (its window passed), with its log id: the runtime drops its events. */
  readonly onForget?: (logId: string) => void;
}

/**
 * The memo in process memory: one process, nothing survives a restart (so a re-issue of an unknown key
 * is outcome unknown until the process has been up for the memo window). Each finished entry has one
 * timer, at the end of its window, that deletes it: no entry and no timer outlives its window.
 */
export class MemoryMemoStore implements MemoStore {
  readonly durable = false;
  readonly instanceId = randomBytes(8).toString('hex');
  private readonly entries = new Map<string, MemoEntry>();
  private readonly byPrincipal = new Map<string, Set<string>>();
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly now: () => number;
  private readonly since: number;
  private forgotten: ((logId: string) => void) | undefined;
  readonly memoWindowMs: number;

  constructor(private readonly options: MemoryMemoStoreOptions) {
    this.memoWindowMs = options.memoWindowMs;
    this.now = options.now ?? Date.now;
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
    const held = this.byPrincipal.get(entry.principal)?.size ?? 0;
    if (held < maxEntriesPerPrincipal) {
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

  async replace(next: MemoEntry, expected: KeyedWorkState): Promise<MemoEntry | undefined> {
    const stored = this.current(next.memoKey);
    if (!stored) return undefined;
    if (stored.state !== expected) return stored;
    this.write(next);
    return next;
  }

  async running(): Promise<MemoEntry[]> {
    return [...this.entries.values()].filter((e) => e.state === 'running');
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
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
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
    const old = this.timers.get(entry.memoKey);
    if (old !== undefined) clearTimeout(old);
    this.timers.delete(entry.memoKey);
    // The deadline is the memo's rule (machines/server/keyed-timing.ts); this only sets the timer.
    const delay = memoForgetDelayMs(entry, this.options.memoWindowMs, this.now());
    if (delay === undefined) return;
    const timer = setTimeout(() => this.forget(entry.memoKey), delay);
    timer.unref?.();
    this.timers.set(entry.memoKey, timer);
  }

  private forget(memoKey: string, tell = true): void {
    const e = this.entries.get(memoKey);
    if (!e) return;
    this.entries.delete(memoKey);
    const t = this.timers.get(memoKey);
    if (t !== undefined) clearTimeout(t);
    this.timers.delete(memoKey);
    const set = this.byPrincipal.get(e.principal);
    set?.delete(memoKey);
    if (set?.size === 0) this.byPrincipal.delete(e.principal);
    if (tell) this.forgotten?.(e.logId);
  }
}
