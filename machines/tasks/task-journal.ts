import type { CallEnding } from '../client/call-core.js';
import { JsonRpcCode } from '../codes.js';
import type { FollowOutcome } from './task-follow.js';

/**
 * The client's task journal, pure: what a task-declaring `tools/call` of `continuityFetch({ tasks: {
 * journal } })` writes before its first send, what a restarted process does with what it finds, and when
 * an entry is dropped. The shell (src/client/modern/task-journal.ts) loads, saves and hashes; it decides
 * nothing.
 *
 * Why a journal: a process killed after its send and before the call's end has lost the key it sent and
 * the task id it may have been handed. Restarted, it would send the same call with a new key: a second
 * task, a second charge. With the entry written BEFORE the first send, the restarted process sends the
 * same key (the server hands back the same task for the task's whole TTL) or, once the handle had
 * arrived, follows the journaled task id without sending the call at all.
 */

/** One call's journal entry. */
export interface JournalEntry {
  /** The continuity extension's idempotency key the call is sent with. */
  readonly key: string;
  /** What makes a later call "the same call": a hash of the endpoint URL, the tool name and its arguments. */
  readonly fingerprint: string;
  readonly url: string;
  readonly toolName: string;
  /** When the entry was written (epoch ms): an entry older than `maxAgeMs` is dropped unread. */
  readonly writtenAt: number;
  /** The task the call was answered with, written as the handle arrives, before the first poll. */
  readonly taskId?: string;
  /** The last event id the call had read when the handle arrived (diagnosis; a restart asks for every event). */
  readonly lastEventId?: string;
}

/** How long an entry is kept. */
export interface JournalPolicy {
  /**
   * An entry older than this is dropped unread: past it the server no longer holds the key nor the task
   * (the tasks runtime's default TTL, 1 hour). Longer only when the server's TTL is longer.
   */
  readonly maxAgeMs: number;
}

export const DEFAULT_JOURNAL_POLICY: JournalPolicy = { maxAgeMs: 3_600_000 };

/** The largest journal a store reads: more entries than this is not a journal this client wrote. */
export const MAX_JOURNAL_ENTRIES = 10_000;

/** The call about to be sent, as the shell sees it. */
export interface JournalCall {
  readonly fingerprint: string;
  readonly url: string;
  readonly toolName: string;
  /** The call goes through the continuity extension with a key (the server advertises it). */
  readonly keyed: boolean;
  /** Keys of entries owned by calls still running in this process: never adopted by another call. */
  readonly claimed: ReadonlySet<string>;
  readonly now: number;
}

/** What the call does before its first send. */
export type JournalStart =
  /** A journaled task: followed by its id; the call is not sent again. */
  | { readonly kind: 'follow'; readonly entry: JournalEntry }
  /** A journaled key without a task id: the call is sent with that key (the server dedups it). */
  | { readonly kind: 'reissue'; readonly entry: JournalEntry }
  /** No entry: a new one with `entry.key` is written, and the call is sent with that key. */
  | { readonly kind: 'fresh'; readonly entry: JournalEntry }
  /** Not keyed and nothing to follow: nothing is journaled (a re-send could not be deduplicated). */
  | { readonly kind: 'none' };

export interface JournalDecision<T> {
  /** The journal after the decision: the shell saves it when it differs, before acting. */
  readonly entries: readonly JournalEntry[];
  readonly changed: boolean;
  readonly decision: T;
}

/**
 * Before the first send: entries past their age are dropped; an unclaimed entry of the same call is
 * resumed (its task followed, or its key re-sent), a new key journaled otherwise. `freshKey` is the key
 * a fresh entry takes (the shell's random key).
 */
export function journalBegin(
  entries: readonly JournalEntry[],
  call: JournalCall,
  freshKey: string,
  policy: JournalPolicy = DEFAULT_JOURNAL_POLICY,
): JournalDecision<JournalStart> {
  const live = entries.filter((e) => call.now - e.writtenAt < policy.maxAgeMs);
  const pruned = live.length !== entries.length;
  const found = live.find((e) => e.fingerprint === call.fingerprint && !call.claimed.has(e.key));
  if (found?.taskId !== undefined)
    return { entries: live, changed: pruned, decision: { kind: 'follow', entry: found } };
  if (found && call.keyed)
    return { entries: live, changed: pruned, decision: { kind: 'reissue', entry: found } };
  if (!call.keyed) return { entries: live, changed: pruned, decision: { kind: 'none' } };
  const entry: JournalEntry = {
    key: freshKey,
    fingerprint: call.fingerprint,
    url: call.url,
    toolName: call.toolName,
    writtenAt: call.now,
  };
  return { entries: [...live, entry], changed: true, decision: { kind: 'fresh', entry } };
}

/** What a restarted process finds to resume on one endpoint without making its calls again. */
export interface JournalResume {
  /** Entries with a task id, unclaimed: each task is followed by its id (nothing is sent again). */
  readonly follow: readonly JournalEntry[];
  /**
   * Entries with only a key (the process stopped before the handle arrived): only the same call, made
   * again, can re-send that key and get the task back; they are left for it.
   */
  readonly unhanded: readonly JournalEntry[];
}

/**
 * A restarted process resumes what its journal holds for `url` (`resumeTasks`): entries past their age
 * dropped; each unclaimed entry with a task id followed; entries with only a key left for the same call.
 */
export function journalResume(
  entries: readonly JournalEntry[],
  at: { readonly url: string; readonly claimed: ReadonlySet<string>; readonly now: number },
  policy: JournalPolicy = DEFAULT_JOURNAL_POLICY,
): JournalDecision<JournalResume> {
  const live = entries.filter((e) => at.now - e.writtenAt < policy.maxAgeMs);
  const mine = live.filter((e) => e.url === at.url && !at.claimed.has(e.key));
  return {
    entries: live,
    changed: live.length !== entries.length,
    decision: {
      follow: mine.filter((e) => e.taskId !== undefined),
      unhanded: mine.filter((e) => e.taskId === undefined),
    },
  };
}

/**
 * `followTask(url, taskId, { journal })`: the unclaimed entry holding `taskId` is adopted (claimed for the
 * follow, settled by its end), or none: a task the journal does not hold (or a call still running in this
 * process follows) is followed without touching the journal.
 */
export function journalAdopt(
  entries: readonly JournalEntry[],
  taskId: string,
  claimed: ReadonlySet<string>,
): JournalEntry | undefined {
  return entries.find((e) => e.taskId === taskId && !claimed.has(e.key));
}

/** The handle arrived: its task id (and the call's last event id) joins the entry, before the first poll. */
export function journalHandle(
  entries: readonly JournalEntry[],
  key: string,
  taskId: string,
  lastEventId: string | undefined,
): readonly JournalEntry[] {
  return entries.map((e) =>
    e.key === key ? { ...e, taskId, ...(lastEventId !== undefined ? { lastEventId } : {}) } : e,
  );
}

/** How the journaled call ended, as far as the journal cares. */
export type JournalEnding =
  /** The call's own answer (a result, or a JSON-RPC error), with no task to follow. */
  | { readonly kind: 'answer'; readonly outcomeUnknown: boolean }
  /** The followed task's end. */
  | { readonly kind: 'task'; readonly outcome: FollowOutcome }
  /** The application aborted the call (its cancel was sent). */
  | { readonly kind: 'aborted' };

/** Outcome-unknown reasons of a followed task whose task may still run and be reached later. */
const RESUMABLE: ReadonlySet<string> = new Set(['task_unreachable', 'cancel_unconfirmed']);

/**
 * Whether an entry survives its call's end: kept only while a later process could still learn more
 * (outcome unknown: the key may be bound to a run; the task unreachable or waiting for input); dropped
 * once the outcome is known (the task's own end, a direct answer, the server not knowing the task, an
 * abort by the application).
 */
export function keepsEntry(ending: JournalEnding): boolean {
  switch (ending.kind) {
    case 'answer':
      return ending.outcomeUnknown;
    case 'aborted':
      return false;
    case 'task':
      if (ending.outcome.kind === 'input-unanswerable') return true;
      return ending.outcome.kind === 'unknown' && RESUMABLE.has(ending.outcome.reason);
  }
}

/**
 * How a call that reached no task handle ended, for the journal: the application's abort; a fetch error
 * (nothing read: outcome unknown); the server's own HTTP answer (known); a JSON-RPC answer, outcome
 * unknown when it is OUTCOME_UNKNOWN (-32050).
 */
export function answerEnding(ending: CallEnding, response: unknown): JournalEnding {
  if (ending === 'abort') return { kind: 'aborted' };
  if (ending === 'fetch-error') return { kind: 'answer', outcomeUnknown: true };
  if (ending === 'raw-answer') return { kind: 'answer', outcomeUnknown: false };
  const error = (response as { error?: { code?: unknown } } | undefined)?.error;
  return { kind: 'answer', outcomeUnknown: error?.code === JsonRpcCode.OUTCOME_UNKNOWN };
}

/** The journal after the call with `key` ended. */
export function journalEnd(
  entries: readonly JournalEntry[],
  key: string,
  ending: JournalEnding,
): readonly JournalEntry[] {
  return keepsEntry(ending) ? entries : entries.filter((e) => e.key !== key);
}

/** What is hashed into a fingerprint: the URL, the tool name and the arguments, with object keys sorted. */
export function fingerprintSource(url: string, toolName: string, args: unknown): string {
  return JSON.stringify([url, toolName, canonical(args)]);
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (typeof v !== 'object' || v === null) return v;
  return Object.fromEntries(
    Object.keys(v)
      .sort()
      .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
  );
}

/** The entries of a journal file's JSON, or why it is refused (the shell throws it: never a silent reset). */
export function entriesOfJournalFile(
  json: unknown,
): { readonly entries: readonly JournalEntry[] } | { readonly refusal: string } {
  const file = json as { version?: unknown; entries?: unknown } | null;
  if (typeof file !== 'object' || file === null || file.version !== 1 || !Array.isArray(file.entries))
    return { refusal: 'not a task journal (version 1)' };
  if (file.entries.length > MAX_JOURNAL_ENTRIES)
    return { refusal: `more than ${MAX_JOURNAL_ENTRIES} entries` };
  if (!file.entries.every(isEntry)) return { refusal: 'a malformed entry' };
  return { entries: file.entries };
}

function isEntry(e: unknown): e is JournalEntry {
  if (typeof e !== 'object' || e === null) return false;
  const r = e as Record<string, unknown>;
  return (
    typeof r.key === 'string' &&
    typeof r.fingerprint === 'string' &&
    typeof r.url === 'string' &&
    typeof r.toolName === 'string' &&
    typeof r.writtenAt === 'number' &&
    (r.taskId === undefined || typeof r.taskId === 'string') &&
    (r.lastEventId === undefined || typeof r.lastEventId === 'string')
  );
}
