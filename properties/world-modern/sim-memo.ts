import {
  admitNewKey,
  type MemoCreate,
  type MemoEntry,
  type MemoExpected,
  memoExpired,
  memoExpiresAt,
} from '../../machines/server/keyed-memo.js';

export interface SimMemoStoreOptions {
  readonly memoWindowMs: number;
  /** The virtual clock. */
  readonly now: () => number;
  /** When the store's data was created (its `completeForMs` counts from here). */
  readonly since: number;
  /** Whether an entry is past its window (the runtime's `memoExpired`; a mutant may wrap it). */
  readonly expired?: typeof memoExpired;
  /** Arms the store's own expiry at the end of a finished entry's window (the world's virtual timers). */
  readonly schedule?: (fn: () => void, ms: number) => void;
  /** Told of each entry the store forgets by itself (its window passed), as `MemoStore.onForget`. */
  readonly onForget?: (entry: MemoEntry) => void;
  /** Where an entry is filed by its memo key: the key itself (a mutant's store files it otherwise). */
  readonly slot?: (memoKey: string) => string;
  /** Whose bound an entry counts against: its principal (a mutant's store counts otherwise). */
  readonly principalOf?: (entry: MemoEntry) => string;
}

/**
 * The simulated memo of the 2026 world: the `MemoStore` contract (src/testing/contracts/memo-store.ts),
 * synchronously, on a virtual clock. Like the runtime's stores it compares an entry's state AND run (its
 * log id) on replace: a writer that read one run never overwrites another run of the key in the same
 * state. test/contracts/memo-store.test.ts
 * runs the contract on it (`asMemoStore`).
 */
export class SimMemoStore {
  private readonly entries = new Map<string, MemoEntry>();
  private readonly expired: typeof memoExpired;
  private readonly slot: (memoKey: string) => string;

  constructor(private readonly options: SimMemoStoreOptions) {
    this.expired = options.expired ?? memoExpired;
    this.slot = options.slot ?? ((k) => k);
  }

  get memoWindowMs(): number {
    return this.options.memoWindowMs;
  }

  completeForMs(): number {
    return this.options.now() - this.options.since;
  }

  /** The entry, or undefined when there is none or it is past its window (then it is forgotten now). */
  get(memoKey: string): MemoEntry | undefined {
    const entry = this.entries.get(this.slot(memoKey));
    if (!entry) return undefined;
    if (!this.expired(entry, this.options.memoWindowMs, this.options.now())) return entry;
    this.entries.delete(this.slot(memoKey));
    this.options.onForget?.(entry);
    return undefined;
  }

  /** Set-if-absent within the per-principal bound (`admitNewKey`). */
  create(entry: MemoEntry, maxEntriesPerPrincipal: number): MemoCreate {
    const existing = this.get(entry.memoKey);
    if (existing) return { kind: 'exists', entry: existing };
    const now = this.options.now();
    const principalOf = this.options.principalOf ?? ((e: MemoEntry) => e.principal);
    const mine = [...this.entries.values()].filter(
      (e) => principalOf(e) === principalOf(entry) && !this.expired(e, this.options.memoWindowMs, now),
    );
    const admission = admitNewKey(mine, maxEntriesPerPrincipal, this.options.memoWindowMs, now);
    if (admission.kind === 'full') return admission;
    this.write(entry);
    return { kind: 'created' };
  }

  /** Compare-and-set on the stored entry's state and run; the stored entry afterwards, undefined when gone. */
  replace(next: MemoEntry, expected: MemoExpected): MemoEntry | undefined {
    const stored = this.get(next.memoKey);
    if (!stored) return undefined;
    if (stored.state !== expected.state || stored.logId !== expected.logId) return stored;
    this.write(next);
    return next;
  }

  running(): MemoEntry[] {
    return [...this.entries.values()].filter((e) => e.state === 'running');
  }

  /** Deletes the entries past their window; returns their log ids. */
  sweep(): string[] {
    const gone: string[] = [];
    for (const [k, e] of this.entries)
      if (this.expired(e, this.options.memoWindowMs, this.options.now())) {
        this.entries.delete(k);
        gone.push(e.logId);
      }
    return gone;
  }

  private write(entry: MemoEntry): void {
    this.entries.set(this.slot(entry.memoKey), entry);
    const expires = memoExpiresAt(entry, this.options.memoWindowMs);
    if (expires !== undefined && this.options.schedule)
      this.options.schedule(() => this.get(entry.memoKey), Math.max(0, expires - this.options.now()));
  }
}
