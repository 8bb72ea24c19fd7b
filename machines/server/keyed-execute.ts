import type { KeyReading } from '../continuity-extension.js';
import type { JsonRpcMessage } from '../jsonrpc.js';
import { keyedEventId, type MemoCreate, type MemoEntry } from './keyed-memo.js';
import {
  type AttachStep,
  type Attempt,
  appendsFinal,
  attachStep,
  cancelledReply,
  createsFirst,
  deliverAs,
  followReadsLog,
  type KeyedReply,
  keyedRunEnd,
  memoFullReply,
  needsMemoCompleteness,
  needsOwnerLiveness,
  nextEntry,
  outcomeMessage,
  outcomeUnknownReply,
  planKeyedCall,
  replyMessage,
} from './keyed-plan.js';
import type { StreamWindow } from './retention.js';

/**
 * The whole procedure for one keyed `tools/call`, as commands: which store reads and writes happen, in
 * which order, and how a lost race is retried. It is a generator, so the runtime (src/server/keyed, async
 * stores) and the simulated world (synchronous ones) drive the same steps: each yielded command is
 * executed and its answer sent back with `next(answer)`; the return value is the request's end. Pure.
 */
export type KeyedCallCommand =
  /** → `MemoEntry | undefined`: the memo's entry for the key. */
  | { readonly kind: 'read-entry' }
  /** → `StreamWindow | undefined`: the retained window of the entry's log. */
  | { readonly kind: 'read-window'; readonly entry: MemoEntry }
  /** → `boolean`: the owner is this instance or holds a lease. */
  | { readonly kind: 'owner-alive'; readonly owner: string }
  /** → `number`: how long the memo has been keeping every key it saw. */
  | { readonly kind: 'memo-complete-for' }
  /** → `MemoEntry`: a fresh running entry owned here (new epoch, new log id, now). */
  | { readonly kind: 'new-entry' }
  /**
   * → `MemoCreate`: atomic set-if-absent within the per-principal bound. `first`: created before the
   * memo was read (a first attempt), so a caller address at its own bound is no refusal yet (the key may
   * be known: it is read then).
   */
  | { readonly kind: 'create-entry'; readonly entry: MemoEntry; readonly first?: boolean }
  /** → nothing: the log of an entry replaced by a new run is dropped. */
  | { readonly kind: 'drop-log'; readonly entry: MemoEntry }
  /** → nothing: compare-and-set `next` over `entry` (from its state), then wake its watchers. */
  | { readonly kind: 'replace-entry'; readonly entry: MemoEntry; readonly next: MemoEntry }
  /**
   * → `boolean`, whether it won: compare-and-set `next` (a fresh running entry) over the refused `entry`
   * (from `refused`), then wake its watchers.
   */
  | { readonly kind: 'restart-entry'; readonly entry: MemoEntry; readonly next: MemoEntry }
  /**
   * → nothing: the body starts (once per work: only after `create-entry` answered `created`, or
   * `restart-entry` won).
   */
  | { readonly kind: 'start-run'; readonly entry: MemoEntry };

/** How the request ends. */
export type KeyedCallEnd =
  | { readonly kind: 'reply'; readonly reply: KeyedReply }
  /** Serve the response from the entry's log after `afterSeq` (`attachStep` each time it looks). */
  | { readonly kind: 'serve'; readonly entry: MemoEntry; readonly afterSeq: number };

/** The answers the driver sends back, by command. */
export interface KeyedCallAnswers {
  'read-entry': MemoEntry | undefined;
  'read-window': StreamWindow | undefined;
  'owner-alive': boolean;
  'memo-complete-for': number;
  'new-entry': MemoEntry;
  'create-entry': MemoCreate;
  'drop-log': undefined;
  'replace-entry': undefined;
  'restart-entry': boolean;
  'start-run': undefined;
}

/** How many times one request re-reads the memo after losing a race (creation, a declared death). */
export const MAX_KEYED_ROUNDS = 4;

type Steps = Generator<KeyedCallCommand, KeyedCallEnd, KeyedCallAnswers[keyof KeyedCallAnswers]>;

/**
 * The steps of one keyed call: read the memo (and the entry's log window, and its owner's liveness while
 * it runs), plan (`planKeyedCall`), then execute the plan, re-reading after a lost race. A first attempt
 * (`createsFirst`) creates its entry before reading anything: its key is new but for a duplicate, and the
 * create answers the entry it finds, which is then planned as a read one would be. No log is opened: a
 * key's log is opened by its first event (the log's append), and a running entry without one reads as an
 * empty log (`unopenedLogWindow`).
 */
export function* keyedCallSteps(facts: {
  readonly reading: Extract<KeyReading, { kind: 'keyed' }>;
  readonly fingerprint: string;
  readonly memoWindowMs: number;
  /** The clock, for the entry a declared death writes. */
  readonly now: number;
}): Steps {
  for (let round = 0; round < MAX_KEYED_ROUNDS; round++) {
    let entry: MemoEntry | undefined;
    let known = false;
    if (round === 0 && createsFirst(facts.reading)) {
      const fresh = (yield { kind: 'new-entry' }) as MemoEntry;
      const created = (yield { kind: 'create-entry', entry: fresh, first: true }) as MemoCreate;
      if (created.kind === 'created') {
        yield { kind: 'start-run', entry: fresh };
        return { kind: 'serve', entry: fresh, afterSeq: 0 };
      }
      if (created.kind === 'exists') {
        entry = created.entry;
        known = true;
      } else if (created.bound !== 'address')
        return { kind: 'reply', reply: memoFullReply(created.retryAfterSeconds, created.bound) };
      // The caller's address is at its bound: a known key still attaches, so the memo is read.
    }
    if (!known) entry = (yield { kind: 'read-entry' }) as MemoEntry | undefined;
    const window = entry ? ((yield { kind: 'read-window', entry }) as StreamWindow | undefined) : undefined;
    const ownerAlive =
      entry?.state === 'running' ? ((yield { kind: 'owner-alive', owner: entry.owner }) as boolean) : true;
    // Only a re-issue of a key the memo does not hold asks how long the memo has been complete.
    const memoCompleteForMs = needsMemoCompleteness(facts.reading, entry)
      ? ((yield { kind: 'memo-complete-for' }) as number)
      : 0;
    const plan = planKeyedCall({
      reading: facts.reading,
      fingerprint: facts.fingerprint,
      entry,
      window,
      ownerAlive,
      memoCompleteForMs,
      memoWindowMs: facts.memoWindowMs,
    });
    if (plan.kind === 'reply') return plan;
    if (plan.kind === 'serve') return { kind: 'serve', entry: entry as MemoEntry, afterSeq: plan.afterSeq };
    if (plan.kind === 'declare-died') {
      const e = entry as MemoEntry;
      const next = nextEntry(e, { type: 'instance.died' }, facts.now);
      if (next) yield { kind: 'replace-entry', entry: e, next };
      continue;
    }
    const fresh = (yield { kind: 'new-entry' }) as MemoEntry;
    if (plan.kind === 'execute-over') {
      // Nothing ran under the refused entry: a new work replaces it; the refused entry's log goes with it.
      const refused = entry as MemoEntry;
      const won = (yield { kind: 'restart-entry', entry: refused, next: fresh }) as boolean;
      if (!won) continue;
      // The body starts before the old log is dropped: a store failure dropping it must not leave the
      // new entry running with nothing running it.
      yield { kind: 'start-run', entry: fresh };
      yield { kind: 'drop-log', entry: refused };
      return { kind: 'serve', entry: fresh, afterSeq: 0 };
    }
    const created = (yield { kind: 'create-entry', entry: fresh }) as MemoCreate;
    if (created.kind === 'full')
      return { kind: 'reply', reply: memoFullReply(created.retryAfterSeconds, created.bound) };
    if (created.kind === 'exists') continue;
    yield { kind: 'start-run', entry: fresh };
    return { kind: 'serve', entry: fresh, afterSeq: 0 };
  }
  // Lost every race (entries created and forgotten under it): nothing can be vouched for.
  return { kind: 'reply', reply: outcomeUnknownReply() };
}

/**
 * Drives `steps` (any of this file's procedures) with an async executor (the runtime's): each command's
 * answer goes back into the steps; the return value is theirs.
 */
export async function driveKeyedCall<C, R, A>(
  steps: Generator<C, R, A>,
  execute: (command: C) => Promise<A>,
): Promise<R> {
  let r = steps.next();
  while (!r.done) r = steps.next(await execute(r.value));
  return r.value;
}

/** Drives `steps` with a synchronous executor (the simulated world's). */
export function driveKeyedCallSync<C, R, A>(steps: Generator<C, R, A>, execute: (command: C) => A): R {
  let r = steps.next();
  while (!r.done) r = steps.next(execute(r.value));
  return r.value;
}

/** One frame of an attached response: a log event under its SSE id, or an answer without one. */
export interface KeyedFrame {
  readonly id?: string;
  readonly message: JsonRpcMessage;
}

/**
 * The attached response of one attempt (`keyedFollowSteps`), as commands. Each look reads the entry, then
 * the log after what was sent (unless `followReadsLog` says nothing is left there), and its owner's
 * liveness while it runs, and `attachStep` decides.
 */
export type KeyedFollowCommand =
  /** → `{ window, events } | undefined`: the key's log after `afterSeq` (after age eviction). */
  | { readonly kind: 'read-log'; readonly afterSeq: number }
  /** → `MemoEntry | undefined`: the memo's entry for the key. */
  | { readonly kind: 'read-entry' }
  /** → `boolean`: the owner is this instance or holds a lease. */
  | { readonly kind: 'owner-alive'; readonly owner: string }
  /** → nothing: write these frames to the response, in order. */
  | { readonly kind: 'write'; readonly frames: ReadonlyArray<Required<KeyedFrame>> }
  /** → anything: the running entry's owner is gone; record `instance.died` (compare-and-set), then look again. */
  | { readonly kind: 'declare-died'; readonly entry: MemoEntry }
  /** → nothing: wait for a wake-up (a ring of the key's log, or the poll), then look again. */
  | { readonly kind: 'wait' };

/** A log read: the retained window and the events after the cursor. */
export interface KeyedLogRead {
  readonly window: StreamWindow;
  readonly events: ReadonlyArray<{ readonly seq: number; readonly message: JsonRpcMessage }>;
}

/** How an attached response ends: `attachStep`'s end, and the last frame to write (none when `lost`). */
export interface KeyedFollowEnd {
  readonly end: NonNullable<AttachStep<{ seq: number; message: JsonRpcMessage }>['end']>['kind'];
  readonly frame?: KeyedFrame;
}

type FollowAnswer = KeyedLogRead | MemoEntry | boolean | undefined;

/**
 * The steps of one attached response, from `afterSeq` to its end: look (read the entry, the log when
 * `followReadsLog`, its owner's liveness when `needsOwnerLiveness`), write what `attachStep` says (`deliverAs` the attempt,
 * under `keyedEventId`), declare a dead owner's entry (then look again at once), end, or wait. `decide` is
 * `attachStep` (the simulated world's mutants wrap it). Never starts anything.
 */
export function* keyedFollowSteps(facts: {
  readonly entry: Pick<MemoEntry, 'epoch' | 'logId'>;
  readonly attempt: Attempt;
  readonly afterSeq: number;
  /**
   * Nothing changed since the entry was created by this attempt (its log is empty, the entry as created):
   * the first look would find nothing to write and no end, so the response waits at once.
   */
  readonly quiet?: boolean;
  readonly decide?: typeof attachStep;
}): Generator<KeyedFollowCommand, KeyedFollowEnd, FollowAnswer> {
  const decide = facts.decide ?? attachStep;
  let lastSent = facts.afterSeq;
  if (facts.quiet) yield { kind: 'wait' };
  for (;;) {
    // The entry first: once it holds the outcome, every event before the final one is in the log (they
    // were appended before it was recorded), so the log is read only when some may be left to write.
    const current = (yield { kind: 'read-entry' }) as MemoEntry | undefined;
    // Another work under the key now (a refused key restarted under this stream): its events are in
    // another log. End without an answer, as a stream that fell behind: the client's re-issue attaches to
    // the new work from its start.
    if (current && current.logId !== facts.entry.logId) return { end: 'lost' };
    const read = followReadsLog(current, lastSent)
      ? ((yield { kind: 'read-log', afterSeq: lastSent }) as KeyedLogRead | undefined)
      : undefined;
    const alive =
      current && needsOwnerLiveness(current)
        ? ((yield { kind: 'owner-alive', owner: current.owner }) as boolean)
        : true;
    const step = decide(current, read?.window, read?.events ?? [], lastSent, alive);
    const frames: Array<Required<KeyedFrame>> = [];
    for (const e of step.write) {
      const m = deliverAs(e.message, facts.attempt);
      if (m) frames.push({ id: keyedEventId(facts.entry, e.seq), message: m });
    }
    if (frames.length > 0) yield { kind: 'write', frames };
    lastSent = step.lastSent;
    if (step.declareDied && current) {
      yield { kind: 'declare-died', entry: current };
      continue;
    }
    const end = step.end;
    if (!end) {
      yield { kind: 'wait' };
      continue;
    }
    if (end.kind === 'lost') return { end: end.kind };
    if (end.kind === 'outcome') {
      const message = outcomeMessage(end.outcome, facts.attempt);
      return end.seq === undefined
        ? { end: end.kind, frame: { message } }
        : { end: end.kind, frame: { id: keyedEventId(facts.entry, end.seq), message } };
    }
    const reply = end.kind === 'cancelled' ? cancelledReply() : outcomeUnknownReply();
    return { end: end.kind, frame: { message: replyMessage(reply, facts.attempt) } };
  }
}

/** The end of a body run (`keyedBodyEndSteps`), as commands. */
export type KeyedBodyEndCommand =
  /** → `StreamWindow | undefined`: the key's log window (its head: the final response's seq is head + 1). */
  | { readonly kind: 'read-window' }
  /** → `boolean`: a response here is waiting on the key's log (the outcome is then recorded `answered`). */
  | { readonly kind: 'watched' }
  /**
   * → `MemoEntry | undefined`, the entry stored after: move `entry` by `event` (`nextEntry`,
   * compare-and-set from its state and run), then wake its watchers.
   */
  | {
      readonly kind: 'record';
      readonly entry: MemoEntry;
      readonly event: Parameters<typeof nextEntry>[1];
      readonly watched: boolean;
    }
  /** → nothing: append the final response to the log (and finish it), under the recorded seq. */
  | { readonly kind: 'append-final'; readonly message: JsonRpcMessage }
  /** → nothing: wake the responses attached to the key's log. */
  | { readonly kind: 'ring' };

type BodyEndAnswer = MemoEntry | StreamWindow | boolean | undefined;

/**
 * The steps after a body's messages (`final`: its answer, if the SDK gave one), from the entry the run
 * started under (running, owned here): nothing is read first, since the compare-and-set expects that
 * entry's state and run, so a run that moved on meanwhile (cancelled, declared dead, forgotten and created
 * again) is never overwritten (`keyedRunEnd` decides on the run's entry). The outcome is recorded durably
 * first, under the seq the final response gets in the log (head + 1), and the final response appended only
 * when that recording won and there is a log to finish (`appendsFinal`), so no stream ever writes an
 * outcome the memo does not hold. An answerless end declares the entry dead.
 */
export function* keyedBodyEndSteps(
  /** The entry the run started under. */
  entry: MemoEntry,
  final: JsonRpcMessage | undefined,
  /** The SDK refused the request before the tool ran (`refusedBeforeRun`); `final` is the refusal. */
  refused = false,
  /**
   * The log's head when the driver knows it (its run is the log's only writer and made every append):
   * then the window is not read.
   */
  head?: number,
): Generator<KeyedBodyEndCommand, void, BodyEndAnswer> {
  const end = keyedRunEnd(entry, entry.owner, final, refused);
  if (end.kind === 'nothing') {
    yield { kind: 'ring' };
    return;
  }
  // No answer (`final` undefined): the entry would otherwise stay running under a live owner forever.
  if (end.kind === 'declare-died' || !final) {
    yield { kind: 'record', entry, event: { type: 'instance.died' }, watched: false };
    return;
  }
  const known = head ?? ((yield { kind: 'read-window' }) as StreamWindow | undefined)?.head;
  const finalSeq = (known ?? 0) + 1;
  const watched = (yield { kind: 'watched' }) as boolean;
  const won = (yield {
    kind: 'record',
    entry,
    event: {
      type: end.kind === 'refused' ? 'tool.refused' : 'tool.finished',
      outcome: end.outcome,
      finalSeq,
    },
    watched,
  }) as MemoEntry | undefined;
  if (appendsFinal(won, finalSeq)) yield { kind: 'append-final', message: final };
  yield { kind: 'ring' };
}
