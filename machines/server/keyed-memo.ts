import { formatEventId } from '../event-id.js';
import { pureTransition } from '../pure-transition.js';
import {
  type KeyedRequestEmitted,
  type KeyedRequestEvent,
  keyedRequestMachine,
  type RecordedOutcome,
} from './keyed-request.machine.js';

/**
 * What the memo of the continuity extension keeps per (principal, key), and how a stored entry moves:
 * by `keyedRequestMachine` alone (`stepMemoEntry`), so the runtime (src/server/keyed), its stores (memory,
 * SQLite, Redis) and the simulated world agree on every state a key can be in. Pure.
 *
 * @spec docs/continuity-extension.md §4 (work states), §6 (memo window, instances)
 */

/** A key's work state as stored: the machine's state, flattened (`finished.committed` → `committed`). */
export type KeyedWorkState =
  | 'running'
  | 'committed'
  | 'answered'
  | 'cancelled'
  | 'outcomeUnknown'
  | 'refused';

/** One memo entry. Plain JSON: stores write it as is. */
export interface MemoEntry {
  /** `memoKey(principal, key)`. */
  readonly memoKey: string;
  /** The principal, for the per-principal bound (the empty string when the server has no authentication). */
  readonly principal: string;
  /** `requestFingerprint(method, params)` of the first attempt. */
  readonly fingerprint: string;
  readonly state: KeyedWorkState;
  /** The recorded outcome, once `committed` or `answered` (or the refusal, once `refused`). */
  readonly outcome?: RecordedOutcome;
  /**
   * The sequence number of the final response in the key's log: the outcome is recorded with it before
   * it is appended, so every stream writes the outcome under the same SSE id.
   */
  readonly finalSeq?: number;
  /** The instance running the body (its lease says whether it is alive). */
  readonly owner: string;
  /** The key's event log: a pseudo-session of the event log (`keyedLogId`), with this epoch. */
  readonly logId: string;
  readonly epoch: string;
  readonly createdAt: number;
  /** When the work ended (recorded, cancelled, outcome unknown): the memo window starts here. */
  readonly finishedAt?: number;
}

/**
 * What a compare-and-set of an entry expects stored (`MemoStore.replace`): its state AND its run (the log
 * id, new for every run of the key). So a writer that read one run never overwrites another run of the
 * same key that happens to be in the same state (a refused key restarted, a forgotten key created again).
 */
export type MemoExpected = Pick<MemoEntry, 'state' | 'logId'>;

/** The stream number of a key's log within its pseudo-session: one stream per key. */
export const KEYED_STREAM = 1;

/** The SSE id of event `seq` of a key's log. */
export const keyedEventId = (entry: Pick<MemoEntry, 'epoch'>, seq: number): string =>
  formatEventId({ epoch: entry.epoch, stream: KEYED_STREAM, seq });

/** The machine's state value for a stored state. */
function stateValue(state: KeyedWorkState) {
  return state === 'committed' || state === 'answered' ? { finished: state } : state;
}

function flatten(value: unknown): KeyedWorkState | 'forgotten' {
  if (typeof value === 'string') return value as KeyedWorkState | 'forgotten';
  const finished = (value as { finished?: string }).finished;
  return finished === 'answered' ? 'answered' : 'committed';
}

/** One step of a stored entry: its next state and outcome, and what the machine emitted. */
export interface MemoStep {
  readonly state: KeyedWorkState | 'forgotten';
  readonly outcome: RecordedOutcome | undefined;
  readonly emitted: readonly KeyedRequestEmitted[];
  /** False when the machine ignored the event in this state (the entry is unchanged). */
  readonly changed: boolean;
}

/**
 * Runs `event` through `keyedRequestMachine` from the stored entry. Watchers are not stored (they are
 * streams on whichever instance), so the machine is restored with `attached` (default none): the answers
 * it emits are those for the attempt the event names, and for `attached`. Pure: `pureTransition` executes nothing.
 */
export function stepMemoEntry(
  entry: Pick<MemoEntry, 'memoKey' | 'fingerprint' | 'state' | 'outcome'>,
  event: KeyedRequestEvent,
  /** Streams watching the work now, where the runtime knows them (its own responses). */
  attached: readonly string[] = [],
): MemoStep {
  const snapshot = keyedRequestMachine.resolveState({
    value: stateValue(entry.state),
    context: {
      memoKey: entry.memoKey,
      fingerprint: entry.fingerprint,
      attached: [...attached],
      outcome: entry.outcome,
    },
  });
  const [next, actions] = pureTransition(keyedRequestMachine, snapshot, event);
  const emitted: KeyedRequestEmitted[] = [];
  for (const a of actions) {
    const params = (a as { params?: { event?: KeyedRequestEmitted } }).params;
    if ((a.type as string) === 'xstate.emit' && params?.event) emitted.push(params.event);
  }
  const state = next.status === 'done' ? 'forgotten' : flatten(next.value);
  return {
    state,
    outcome: next.context.outcome,
    emitted,
    changed: state !== entry.state || next.context.outcome !== entry.outcome,
  };
}

/**
 * When the memo forgets the entry: `memoWindowMs` after its work ended; never while it runs (undefined).
 */
export function memoExpiresAt(
  entry: Pick<MemoEntry, 'state' | 'finishedAt'>,
  memoWindowMs: number,
): number | undefined {
  if (entry.state === 'running' || entry.finishedAt === undefined) return undefined;
  return entry.finishedAt + memoWindowMs;
}

/** True when the entry is past its window at `now`: the store deletes it and the key's log. */
export function memoExpired(
  entry: Pick<MemoEntry, 'state' | 'finishedAt'>,
  memoWindowMs: number,
  now: number,
): boolean {
  const at = memoExpiresAt(entry, memoWindowMs);
  return at !== undefined && now >= at;
}

/** What a store's atomic create (set-if-absent within the per-principal bound) answers. */
export type MemoCreate =
  | { readonly kind: 'created' }
  /** The key is known (another attempt created it first): plan again with this entry. */
  | { readonly kind: 'exists'; readonly entry: MemoEntry }
  /** The principal's bound is reached by entries that may not be evicted: 429. */
  | {
      readonly kind: 'full';
      readonly retryAfterSeconds: number;
      /** `address`: the caller's address is at its own bound (address-keys.ts), not the principal. */
      readonly bound?: 'address';
    };

/** What creating an entry for a new key gives (the stores make it atomic: set-if-absent plus the bound). */
export type MemoAdmission =
  | { readonly kind: 'admit' }
  /** 429: the principal holds `maxEntriesPerPrincipal` entries none of which may be evicted. */
  | { readonly kind: 'full'; readonly retryAfterSeconds: number };

/**
 * The per-principal bound (§6): a new key is admitted while the principal holds fewer than `max` live
 * entries (running, or inside their window). Running and in-window entries are never evicted to make
 * room; the answer instead says when the first of the principal's entries leaves its window.
 * `principalEntries` are the principal's entries that are not past their window at `now`.
 */
export function admitNewKey(
  principalEntries: ReadonlyArray<Pick<MemoEntry, 'state' | 'finishedAt'>>,
  max: number,
  memoWindowMs: number,
  now: number,
): MemoAdmission {
  if (principalEntries.length < max) return { kind: 'admit' };
  let first = Number.POSITIVE_INFINITY;
  for (const e of principalEntries) {
    const at = memoExpiresAt(e, memoWindowMs);
    if (at !== undefined && at < first) first = at;
  }
  return admitCounted({ live: principalEntries.length, firstWindowEnd: first }, max, memoWindowMs, now);
}

/**
 * What a store counts of a principal's live entries, without reading them: how many, and when the first
 * of them leaves its window (`Infinity` when every one is running). Stores count in the store (an indexed
 * SQL COUNT, a Redis ZCARD), so admitting a key costs the same at 10 entries and at 10,000.
 */
export interface PrincipalCount {
  readonly live: number;
  /** The earliest window end among the live entries; only read when the bound is reached. */
  readonly firstWindowEnd: number;
}

/** `admitNewKey` on a count: the same rule, for stores that count instead of listing entries. */
export function admitCounted(
  count: PrincipalCount,
  max: number,
  memoWindowMs: number,
  now: number,
): MemoAdmission {
  if (count.live < max) return { kind: 'admit' };
  // Every entry running: nothing frees before one finishes and its window passes.
  const waitMs = Number.isFinite(count.firstWindowEnd) ? count.firstWindowEnd - now : memoWindowMs;
  return { kind: 'full', retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
}

/**
 * The entries a process must declare outcome unknown: `running` entries whose owner is gone. A single
 * process (memory, SQLite) restarting outlives none of its old entries (`isOwnerAlive` of an old owner is
 * false); with a shared store it is the owner's lease that decides (`isOwnerAlive` in instances.ts).
 */
export function orphanedEntries<E extends Pick<MemoEntry, 'state' | 'owner'>>(
  entries: readonly E[],
  isOwnerAlive: (owner: string) => boolean,
): E[] {
  return entries.filter((e) => e.state === 'running' && !isOwnerAlive(e.owner));
}

/**
 * The pseudo-session of the event log that holds a key's events. `digest` is a hash of the memo key (the
 * runtime computes it), so the id is safe in SQL and in Redis hash tags whatever the key's characters.
 */
export const keyedLogId = (digest: string): string => `keyed-${digest}`;
