import type { KeyReading } from '../continuity-extension.js';
import type { MemoCreate, MemoEntry } from './keyed-memo.js';
import {
  type KeyedReply,
  memoFullReply,
  nextEntry,
  outcomeUnknownReply,
  planKeyedCall,
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
  /** → nothing: the entry's log exists before the entry does (a re-issue finding it finds its log). */
  | { readonly kind: 'open-log'; readonly entry: MemoEntry }
  /** → `MemoCreate`: atomic set-if-absent within the per-principal bound. */
  | { readonly kind: 'create-entry'; readonly entry: MemoEntry }
  /** → nothing: the log of an entry that was not created is dropped. */
  | { readonly kind: 'drop-log'; readonly entry: MemoEntry }
  /** → nothing: compare-and-set `next` over `entry` (from its state), then wake its watchers. */
  | { readonly kind: 'replace-entry'; readonly entry: MemoEntry; readonly next: MemoEntry }
  /** → nothing: the body starts (once: only after `create-entry` answered `created`). */
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
  'open-log': undefined;
  'create-entry': MemoCreate;
  'drop-log': undefined;
  'replace-entry': undefined;
  'start-run': undefined;
}

/** How many times one request re-reads the memo after losing a race (creation, a declared death). */
export const MAX_KEYED_ROUNDS = 4;

type Steps = Generator<KeyedCallCommand, KeyedCallEnd, KeyedCallAnswers[keyof KeyedCallAnswers]>;

/**
 * The steps of one keyed call: read the memo (and the entry's log window, and its owner's liveness while
 * it runs), plan (`planKeyedCall`), then execute the plan, re-reading after a lost race.
 */
export function* keyedCallSteps(facts: {
  readonly reading: Extract<KeyReading, { kind: 'keyed' }>;
  readonly fingerprint: string;
  readonly memoWindowMs: number;
  /** The clock, for the entry a declared death writes. */
  readonly now: number;
}): Steps {
  for (let round = 0; round < MAX_KEYED_ROUNDS; round++) {
    const entry = (yield { kind: 'read-entry' }) as MemoEntry | undefined;
    const window = entry ? ((yield { kind: 'read-window', entry }) as StreamWindow | undefined) : undefined;
    const ownerAlive =
      entry?.state === 'running' ? ((yield { kind: 'owner-alive', owner: entry.owner }) as boolean) : true;
    const memoCompleteForMs = (yield { kind: 'memo-complete-for' }) as number;
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
    yield { kind: 'open-log', entry: fresh };
    const created = (yield { kind: 'create-entry', entry: fresh }) as MemoCreate;
    if (created.kind !== 'created') yield { kind: 'drop-log', entry: fresh };
    if (created.kind === 'full') return { kind: 'reply', reply: memoFullReply(created.retryAfterSeconds) };
    if (created.kind === 'exists') continue;
    yield { kind: 'start-run', entry: fresh };
    return { kind: 'serve', entry: fresh, afterSeq: 0 };
  }
  // Lost every race (entries created and forgotten under it): nothing can be vouched for.
  return { kind: 'reply', reply: outcomeUnknownReply() };
}

/** Drives `steps` with an async executor (the runtime's). */
export async function driveKeyedCall(
  steps: Steps,
  execute: (command: KeyedCallCommand) => Promise<KeyedCallAnswers[keyof KeyedCallAnswers]>,
): Promise<KeyedCallEnd> {
  let r = steps.next();
  while (!r.done) r = steps.next(await execute(r.value));
  return r.value;
}

/** Drives `steps` with a synchronous executor (the simulated world's). */
export function driveKeyedCallSync(
  steps: Steps,
  execute: (command: KeyedCallCommand) => KeyedCallAnswers[keyof KeyedCallAnswers],
): KeyedCallEnd {
  let r = steps.next();
  while (!r.done) r = steps.next(execute(r.value));
  return r.value;
}
