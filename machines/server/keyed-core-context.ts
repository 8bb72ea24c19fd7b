import { isOwnerAlive } from './instances.js';
import type { AddressKeys } from './keyed-address-book.js';
import type { KeyedCommand, KeyedNote } from './keyed-core-io.js';
import {
  type KeyedCallCommand,
  type KeyedCallEnd,
  keyedBodyEndSteps,
  keyedFollowSteps,
} from './keyed-execute.js';
import { type MemoEntry, orphanedEntries } from './keyed-memo.js';
import { abortsLocalRun, attachStep, nextEntry, refusedBeforeRun } from './keyed-plan.js';
import type { Task, TaskRunner } from './keyed-tasks.js';
import type { KeyedLimits } from './keyed-timing.js';

/**
 * What the parts of the keyed core (keyed-core.ts, keyed-core-bodies.ts) share: the decisions they take,
 * the task runner, and the store moves every part makes (a compare-and-set of an entry, an owner's
 * liveness). Pure.
 */

/** The decisions the core takes from keyed-plan.ts et al.; a mutant of the model replaces one. */
export interface KeyedCoreDecisions {
  readonly attachStep: typeof attachStep;
  /** The steps of an attached response (a mutant ends one early). */
  readonly followSteps: typeof keyedFollowSteps;
  readonly bodyEnd: typeof keyedBodyEndSteps;
  readonly refusedBeforeRun: typeof refusedBeforeRun;
  readonly abortsLocalRun: typeof abortsLocalRun;
  readonly orphanedEntries: typeof orphanedEntries;
  readonly isOwnerAlive: typeof isOwnerAlive;
  /** What a call's steps are told a store answered (identity; a mutant misreads one). */
  readonly callAnswer: (command: KeyedCallCommand, answer: unknown) => unknown;
  /** How a call's steps end (identity; a mutant rewrites one). */
  readonly callEnd: (end: KeyedCallEnd) => KeyedCallEnd;
  /** A closed response stream is a transport fact (false); a mutant cancels the key. */
  readonly closedStreamCancels: boolean;
}

export const KEYED_DECISIONS: KeyedCoreDecisions = {
  attachStep,
  followSteps: keyedFollowSteps,
  bodyEnd: keyedBodyEndSteps,
  refusedBeforeRun,
  abortsLocalRun,
  orphanedEntries,
  isOwnerAlive,
  callAnswer: (_c, a) => a,
  callEnd: (e) => e,
  closedStreamCancels: false,
};

/** What a part of the core is given by the core. */
export interface CoreContext {
  readonly tasks: TaskRunner;
  readonly d: KeyedCoreDecisions;
  readonly limits: KeyedLimits;
  /** This instance: the owner of the entries it runs. */
  readonly self: string;
  readonly addressKeys: AddressKeys;
  now(): number;
  emit(command: KeyedCommand): void;
  fail(error: unknown): void;
  note(note: KeyedNote): void;
}

/** The bell of a key's log (its attached responses sleep on it) and of a starting run. */
export const logBell = (logId: string): string => `log:${logId}`;
export const startBell = (run: number): string => `start:${run}`;

/**
 * Compare-and-set `next` over `entry` (from its state and run), then wake its watchers. The entry stored
 * after.
 */
export function* replace(ctx: CoreContext, entry: MemoEntry, next: MemoEntry): Task<MemoEntry | undefined> {
  const expected = { state: entry.state, logId: entry.logId };
  const stored = (yield { kind: 'memo.replace', next, expected }) as MemoEntry | undefined;
  // A store answers `next` itself when this write won (MemoStore.replace); a loser is answered the
  // winner's entry, which may be in the same state: the move is noted once, by the winner (metrics count it).
  if (stored === next && entry.state !== next.state)
    ctx.note({ kind: 'state', from: entry.state, to: next.state });
  ctx.tasks.ring(logBell(entry.logId));
  return stored;
}

/** Moves the stored entry by the machine (`nextEntry`, compare-and-set from its state). */
export function* record(
  ctx: CoreContext,
  entry: MemoEntry,
  event: Parameters<typeof nextEntry>[1],
  watched = false,
): Task<MemoEntry | undefined> {
  const next = nextEntry(entry, event, ctx.now(), watched);
  if (!next) return entry;
  const after = yield* replace(ctx, entry, next);
  ctx.note({ kind: 'recorded', before: entry, event, watched, after });
  return after;
}

/**
 * The one liveness rule, on the leases the memo holds now. An owner the rule finds alive without any lease
 * (this instance) costs no store call: every look of a response attached here would otherwise ask.
 */
export function* ownerAlive(ctx: CoreContext, owner: string): Task<boolean> {
  if (ctx.d.isOwnerAlive(owner, ctx.self, NO_LEASES)) return true;
  const leased = (yield { kind: 'memo.alive', owners: [owner] }) as ReadonlySet<string>;
  return ctx.d.isOwnerAlive(owner, ctx.self, leased);
}

const NO_LEASES: ReadonlySet<string> = new Set();

/**
 * Drives a procedure's steps (a call's, an attached response's, a body end's) inside a task: `execute`
 * turns each step command into store calls and sleeps and gives its answer, which goes back into the
 * steps; the steps' return value is the task's.
 */
export function* driveSteps<C, R>(
  steps: Generator<C, R, never>,
  execute: (command: C) => Task<unknown>,
): Task<R> {
  let r = steps.next(undefined as never);
  while (!r.done) r = steps.next((yield* execute(r.value)) as never);
  return r.value;
}

/** Best effort: a log that could not be dropped is only storage; the request goes on. */
export function* dropLog(ctx: CoreContext, logId: string): Task<undefined> {
  try {
    yield { kind: 'log.drop', logId };
  } catch (error) {
    ctx.fail(error);
  }
  return undefined;
}
