import type { MemoCreate, MemoEntry, MemoExpected } from '../../machines/server/keyed-memo.js';

/**
 * Where the continuity extension's memo is kept (docs/continuity-extension.md §4, §6): one entry per
 * (principal, key). The store keeps entries and makes each change atomic; what an entry becomes is decided
 * by `machines/server/keyed-memo.ts` and `keyed-plan.ts` (the keyed-request machine). Implementations:
 * memory (one process, not durable), SQLite (one process, survives a restart), Redis (several instances
 * share it, and it survives a restart). `memoStoreContract` (`mcp-continuity/testing`) is the suite every
 * store passes.
 */
export type { MemoCreate, MemoExpected } from '../../machines/server/keyed-memo.js';

export interface MemoStore {
  /** True when entries survive a restart of the process. */
  readonly durable: boolean;
  /** How long a finished entry is kept: the advertised `memoWindowMs`. */
  readonly memoWindowMs: number;
  /** Names this process (or instance) as the owner of the entries it runs. */
  readonly instanceId: string;
  /** How long this store has been keeping every key it saw (§4: a re-issue of an unknown key). */
  completeForMs(): Promise<number>;
  /** The entry, or undefined when there is none or it is past its window. */
  get(memoKey: string): Promise<MemoEntry | undefined>;
  /**
   * Atomic set-if-absent within the per-principal bound (`admitNewKey`): two attempts of one key racing,
   * on one instance or two, create it once.
   */
  create(entry: MemoEntry, maxEntriesPerPrincipal: number): Promise<MemoCreate>;
  /**
   * Compare-and-set: writes `next` only while the stored entry is in `expected.state` AND is the same run
   * (`expected.logId`), so an outcome is recorded once, a cancel or a declared death never overwrites a
   * recorded outcome, and a writer that read one run never overwrites another run of the key in the same
   * state (a refused key restarted, a forgotten key created again). Returns the stored entry afterwards
   * (`next` when it won), or undefined when the entry is gone.
   */
  replace(next: MemoEntry, expected: MemoExpected): Promise<MemoEntry | undefined>;
  /** Every entry in state `running` (a restarted process declares its own outcome unknown). */
  running(): Promise<MemoEntry[]>;
  /** Deletes the entries past their window; returns their log ids, so the caller drops their events. */
  sweep(): Promise<string[]>;
  /** This instance is alive for `leaseMs` more. */
  renewLease(leaseMs: number): Promise<void>;
  /** This instance stops: its running entries are orphans at once. */
  dropLease(): Promise<void>;
  /** Which of these instances hold a lease now (this instance always does). */
  alive(instanceIds: readonly string[]): Promise<ReadonlySet<string>>;
  /**
   * Optional: a store that forgets entries by itself (a timer at the end of each window) reports each
   * forgotten entry's log id here, so its events go with it. Stores without it are swept (`sweep`).
   */
  onForget?(listener: (logId: string) => void): void;
  /**
   * Optional: the live entries held now (running, or inside their window), counted without waiting, for
   * the `server.memo_entries` gauge. A store that counts asynchronously (Redis) returns its last count
   * (undefined before it has one) and starts the next.
   */
  liveEntries?(): number | undefined;
  close(): Promise<void>;
}
