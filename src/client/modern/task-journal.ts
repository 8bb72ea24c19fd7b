import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import {
  DEFAULT_JOURNAL_POLICY,
  entriesOfJournalFile,
  fingerprintSource,
  type JournalEnding,
  type JournalEntry,
  type JournalPolicy,
  type JournalResume,
  type JournalStart,
  journalAdopt,
  journalBegin,
  journalEnd,
  journalHandle,
  journalResume,
  MAX_JOURNAL_ENTRIES,
} from '../../../machines/tasks/task-journal.js';
import { replaceFileDurably } from '../durable-file.js';
import { LatestWrite } from '../latest-write.js';

/**
 * Where `continuityFetch({ tasks: { journal } })` keeps its task journal (docs/tasks.md, "The journal"):
 * one entry per task-declaring call that has not ended with a known outcome. Only a durable store lets a
 * restarted process resume its calls.
 */
export interface TaskJournalStore {
  /** True when the entries survive the process. */
  readonly durable: boolean;
  load(): Promise<readonly JournalEntry[]>;
  /** Replaces every entry; resolves once they are stored (durably, for a durable store). */
  save(entries: readonly JournalEntry[]): Promise<void>;
}

/** Keeps the journal in memory: a call resumed within one process, not across a restart. */
export class MemoryTaskJournal implements TaskJournalStore {
  readonly durable = false;
  private entries: readonly JournalEntry[] = [];
  async load(): Promise<readonly JournalEntry[]> {
    return this.entries;
  }
  async save(entries: readonly JournalEntry[]): Promise<void> {
    this.entries = [...entries];
  }
}

/**
 * Keeps the journal in a JSON file, written as `FileCursorStore` writes its cursor: a temporary file,
 * fsync, then rename over the old one, so a kill -9 leaves the old journal or the new one, never half of
 * one. A file that is not a journal (or one over `MAX_JOURNAL_ENTRIES`) is refused with an error, never
 * silently reset: a reset would forget keys and charge twice.
 */
export class FileTaskJournal implements TaskJournalStore {
  readonly durable = true;

  constructor(readonly path: string) {}

  async load(): Promise<readonly JournalEntry[]> {
    let text: string;
    try {
      // About 1 KiB per entry at most: a bigger file is not ours.
      if ((await stat(this.path)).size > MAX_JOURNAL_ENTRIES * 1_024)
        throw new Error(`${this.path}: too large for a task journal`);
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const file = entriesOfJournalFile(JSON.parse(text));
    if ('refusal' in file) throw new Error(`${this.path}: ${file.refusal}`);
    return file.entries;
  }

  async save(entries: readonly JournalEntry[]): Promise<void> {
    await replaceFileDurably(this.path, JSON.stringify({ version: 1, entries }));
  }
}

/** A call as the journal needs it. */
export interface JournaledCall {
  readonly url: string;
  readonly toolName: string;
  readonly args: unknown;
  readonly keyed: boolean;
}

/**
 * One `continuityFetch`'s view of its journal store: the entries in memory, the keys of calls running
 * in this process, and saves written one at a time (the newest wins). Executes
 * `machines/tasks/task-journal.ts`'s decisions; each resolves once the journal it produced is stored.
 */
export class JournalBook {
  private entries: readonly JournalEntry[] | undefined;
  private loading: Promise<readonly JournalEntry[]> | undefined;
  private readonly claimed = new Set<string>();
  private readonly saves: LatestWrite<readonly JournalEntry[]>;

  constructor(
    private readonly store: TaskJournalStore,
    private readonly policy: JournalPolicy = DEFAULT_JOURNAL_POLICY,
  ) {
    this.saves = new LatestWrite((entries) => this.store.save(entries));
  }

  /** Decides what the call does before its first send, and stores the journal that decision made. */
  async begin(call: JournaledCall, freshKey: string): Promise<JournalStart> {
    await this.loaded();
    // Read after the await, in the same synchronous block as the assignment below: two calls awaiting
    // the first load must not both start from the list the file gave (the second would drop the first's entry).
    const entries = this.entries as readonly JournalEntry[];
    const fingerprint = createHash('sha256')
      .update(fingerprintSource(call.url, call.toolName, call.args))
      .digest('base64url');
    const made = journalBegin(
      entries,
      {
        fingerprint,
        url: call.url,
        toolName: call.toolName,
        keyed: call.keyed,
        claimed: this.claimed,
        now: Date.now(),
      },
      freshKey,
      this.policy,
    );
    this.entries = made.entries;
    if (made.decision.kind !== 'none') this.claimed.add(made.decision.entry.key);
    if (made.changed) await this.saves.push(made.entries);
    return made.decision;
  }

  /**
   * What this process resumes on `url` after a restart (`machines/tasks/task-journal.ts` `journalResume`):
   * the entries to follow are claimed until each is ended or released.
   */
  async resume(url: string): Promise<JournalResume> {
    await this.loaded();
    const made = journalResume(
      this.entries as readonly JournalEntry[],
      { url, claimed: this.claimed, now: Date.now() },
      this.policy,
    );
    this.entries = made.entries;
    for (const e of made.decision.follow) this.claimed.add(e.key);
    if (made.changed) await this.saves.push(made.entries);
    return made.decision;
  }

  /** The unclaimed entry holding `taskId`, claimed for a follow by id (`followTask`), or undefined. */
  async adopt(taskId: string): Promise<JournalEntry | undefined> {
    await this.loaded();
    const entry = journalAdopt(this.entries as readonly JournalEntry[], taskId, this.claimed);
    if (entry) this.claimed.add(entry.key);
    return entry;
  }

  /** The handle of the call with `key` arrived: stored before the first poll. */
  async handle(key: string, taskId: string, lastEventId: string | undefined): Promise<void> {
    await this.loaded();
    this.entries = journalHandle(this.entries as readonly JournalEntry[], key, taskId, lastEventId);
    await this.saves.push(this.entries);
  }

  /** The call with `key` ended: its entry dropped or kept, as decided. */
  async end(key: string, ending: JournalEnding): Promise<void> {
    this.claimed.delete(key);
    await this.loaded();
    const before = this.entries as readonly JournalEntry[];
    this.entries = journalEnd(before, key, ending);
    if (this.entries !== before) await this.saves.push(this.entries);
  }

  /**
   * The call with `key` stopped in this process without an ending (it failed before or while being sent,
   * or its follow threw): its entry is kept (its outcome is unknown) and no longer claimed, so a later call
   * of the same tool and arguments in this process adopts its key instead of sending a fresh one.
   */
  release(key: string): void {
    this.claimed.delete(key);
  }

  private async loaded(): Promise<readonly JournalEntry[]> {
    if (this.entries) return this.entries;
    this.loading ??= this.store.load();
    const entries = await this.loading;
    this.entries ??= entries;
    return this.entries;
  }
}

const books = new WeakMap<TaskJournalStore, JournalBook>();

/**
 * The one book of `store` in this process: `continuityFetch`, `followTask` and `resumeTasks` given the
 * same store share it, so their saves (each the whole journal) never overwrite one another's entries and
 * a call in flight keeps its claim. The first caller's policy holds.
 */
export function journalBookOf(
  store: TaskJournalStore,
  policy: JournalPolicy = DEFAULT_JOURNAL_POLICY,
): JournalBook {
  let book = books.get(store);
  if (!book) {
    book = new JournalBook(store, policy);
    books.set(store, book);
  }
  return book;
}
