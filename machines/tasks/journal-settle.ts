import type { CallEnding } from '../client/call-core.js';
import { answerEnding, type JournalEnding } from './task-journal.js';

/**
 * How a modern `tools/call` that has ended reaches the SDK, and when its task-journal entry is settled
 * (dropped or kept, `keepsEntry`) relative to that. The shell (src/client/modern/continuity-fetch.ts)
 * executes the plan; it decides neither the order nor the journal's ending.
 *
 * Why the order matters: an entry is settled BEFORE the SDK hears of the call's end. Told first, an
 * application may exit at once; an entry still on disk would then make the next process follow or re-send
 * a call whose end it already knew. A task handle is the exception: the call is not over until the task
 * is, so its entry is settled by the follow's end, and a follow that throws releases it (kept, unclaimed,
 * for a later process to resume).
 */

/** What the SDK is given. */
export type CallDelivery<H> =
  /** The application aborted: the SDK's request fails with the signal's reason. */
  | { readonly kind: 'abort' }
  /** The server's own HTTP answer as it came, under the application's request id. */
  | { readonly kind: 'raw-answer' }
  /** Nothing was read: the SDK's request fails with the fetch error. */
  | { readonly kind: 'fetch-error' }
  /** A task handle: the task is followed, and its end is the call's answer. */
  | { readonly kind: 'follow'; readonly handle: H }
  /** The machine's final answer. */
  | { readonly kind: 'answer' };

/** What the journal does with the call's entry. */
export type JournalSettle =
  /** The call was not journaled. */
  | { readonly kind: 'none' }
  /** Settle with `ending` first; deliver once the journal is saved (a failed save fails the call). */
  | { readonly kind: 'settle-first'; readonly ending: JournalEnding }
  /** Settled by the followed task's end (`{ kind: 'task' }`); released if the follow throws. */
  | { readonly kind: 'after-follow' };

export interface CallSettlement<H> {
  readonly delivery: CallDelivery<H>;
  readonly journal: JournalSettle;
}

/**
 * The plan for an ended call: `ending` is `callEnding`'s; `handle` the task handle in the final
 * response (undefined when there is none, or when the caller does not follow tasks); `response` the
 * machine's output response (an OUTCOME_UNKNOWN error keeps the entry).
 */
export function settleCall<H>(
  ending: CallEnding,
  facts: { readonly journaled: boolean; readonly handle: H | undefined; readonly response: unknown },
): CallSettlement<H> {
  const delivery: CallDelivery<H> =
    ending !== 'final'
      ? { kind: ending }
      : facts.handle !== undefined
        ? { kind: 'follow', handle: facts.handle }
        : { kind: 'answer' };
  if (!facts.journaled) return { delivery, journal: { kind: 'none' } };
  if (delivery.kind === 'follow') return { delivery, journal: { kind: 'after-follow' } };
  return { delivery, journal: { kind: 'settle-first', ending: answerEnding(ending, facts.response) } };
}
