import {
  type FollowAction,
  type FollowFact,
  type FollowPolicy,
  type FollowState,
  followStep,
} from './task-follow.js';

/**
 * Following a task by a task listen (`subscriptions/listen` asking `notifications.taskIds`) instead of
 * polling `tasks/get`, and falling back, pure. It wraps `followStep`: every rule of the follow (input
 * keys once, retries, how a task ends) is unchanged; only *how the next state is read* is decided here.
 *
 * - A `tasks/get` the follow wants becomes a listen to open, then a wait for its next notification while
 *   the listen is open: a `notifications/tasks` carries the task's whole DetailedTask, the very answer a
 *   `tasks/get` gives, so it is read as one.
 * - An acknowledgement that does not name the task (the server offers no task listen, or not for this
 *   task), or a listen refused outright (an HTTP or JSON-RPC error), means polling for the rest of the follow.
 * - A listen that breaks is re-opened after the retry backoff (task listens have no event ids: the re-open's
 *   first notification is the task's current state, which supersedes whatever was missed); after
 *   `MAX_LISTEN_BREAKS` breaks in a row with no notification between them, the follow polls for good.
 * - A listen silent for the policy's `maxPollMs` is closed and re-opened at once (not a break: a task may
 *   not change for long): a listen dropped without a reset costs at most one poll interval's cap, the
 *   same as the slowest poll.
 */

/** How the follow reads the task's states. */
export type ListenMode =
  /** No listen open: the next read opens one. */
  | 'closed'
  /** Opened, its acknowledgement not read yet. */
  | 'opening'
  /** Acknowledged for the task: its notifications are the task's states. */
  | 'open'
  /** Not offered, or broken too often: polling `tasks/get` to the end. */
  | 'polling';

export interface ListenFollowState {
  readonly follow: FollowState;
  readonly mode: ListenMode;
  /** Breaks in a row without a notification between them. */
  readonly breaks: number;
}

/** What the listen told the shell (besides the follow's own facts). */
export type ListenFact =
  | FollowFact
  /** The acknowledgement: the task ids the server will notify about. */
  | { readonly kind: 'listen-ack'; readonly taskIds: readonly string[]; readonly at: number }
  /** A `notifications/tasks` for the followed task: its DetailedTask. */
  | { readonly kind: 'listen-notice'; readonly task: Record<string, unknown>; readonly at: number }
  /**
   * The listen ended: `refused` when the server answered it with something other than a stream (an HTTP
   * error status, a JSON-RPC error, a plain JSON body); a stream that ends or a cut is a break.
   */
  | { readonly kind: 'listen-end'; readonly refused: boolean; readonly at: number }
  /**
   * Nothing came for the `await-notice`'s `withinMs`: the listen may be dropped without a reset (a
   * balancer's silent drop), or the task may simply not have changed. Also no acknowledgement within the
   * request timeout after a `listen`. The shell closed it.
   */
  | { readonly kind: 'listen-quiet'; readonly at: number };

export type ListenAction =
  | FollowAction
  /** Open a task listen for the task (after `afterMs`), and report its acknowledgement or end. */
  | { readonly kind: 'listen'; readonly afterMs: number }
  /**
   * Report the listen's next notification for the task, or its end (or the application's cancel); after
   * `withinMs` of silence, close it and report it quiet.
   */
  | { readonly kind: 'await-notice'; readonly withinMs: number };

export interface ListenFollowStep {
  readonly state: ListenFollowState;
  readonly action: ListenAction;
}

/** Breaks in a row after which the follow polls to its end. */
export const MAX_LISTEN_BREAKS = 3;

/**
 * Starts the follow from its first step: listen-first when `listen` (the application asked for it), else
 * polling from the start (every step is then `followStep`'s own).
 */
export function startListenFollow(
  first: { readonly state: FollowState; readonly action: FollowAction },
  listen: boolean,
  policy: FollowPolicy,
): ListenFollowStep {
  return reading(
    { follow: first.state, mode: listen ? 'closed' : 'polling', breaks: 0 },
    first.action,
    policy,
  );
}

/** One fact in, the next action out. */
export function listenFollowStep(
  state: ListenFollowState,
  fact: ListenFact,
  policy: FollowPolicy,
): ListenFollowStep {
  switch (fact.kind) {
    case 'listen-ack': {
      if (fact.taskIds.includes(state.follow.taskId))
        return reading({ ...state, mode: 'open' }, state.follow.pending, policy);
      // Not offered for this task: poll, at once (the follow's wait was spent opening the listen).
      const pending = state.follow.pending;
      return reading(
        { ...state, mode: 'polling' },
        pending.kind === 'get' ? { kind: 'get', afterMs: 0 } : pending,
        policy,
      );
    }
    case 'listen-notice': {
      const step = followStep(
        state.follow,
        { kind: 'answer', status: 200, result: fact.task, at: fact.at },
        policy,
      );
      return reading({ ...state, follow: step.state, breaks: 0 }, step.action, policy);
    }
    case 'listen-end': {
      const breaks = state.breaks + 1;
      const giveUp = fact.refused || state.mode === 'polling' || breaks > MAX_LISTEN_BREAKS;
      const next: ListenFollowState = { ...state, mode: giveUp ? 'polling' : 'closed', breaks };
      // The state may have changed unseen: read it now (a poll), or by the re-open's first notification.
      return reading(next, { kind: 'get', afterMs: giveUp ? 0 : reopenDelay(breaks, policy) }, policy);
    }
    case 'listen-quiet':
      // No acknowledgement within the request timeout (a server or proxy that took the listen and
      // answers nothing): a break like a cut, so repeated ones end in polling rather than re-opening forever.
      if (state.mode === 'opening')
        return listenFollowStep(state, { kind: 'listen-end', refused: false, at: fact.at }, policy);
      return reading({ ...state, mode: 'closed', breaks: 0 }, { kind: 'get', afterMs: 0 }, policy);
    default: {
      const step = followStep(state.follow, fact, policy);
      return reading({ ...state, follow: step.state }, step.action, policy);
    }
  }
}

/** The follow's action, with its `tasks/get` turned into the listen's way of reading while one is used. */
function reading(state: ListenFollowState, action: FollowAction, policy: FollowPolicy): ListenFollowStep {
  const follow: FollowState = { ...state.follow, pending: action };
  const next = { ...state, follow };
  if (action.kind !== 'get') return { state: next, action };
  switch (state.mode) {
    case 'polling':
      return { state: next, action };
    case 'closed':
      // The first listen opens at once (its first notification is the current state); a re-open after
      // the wait decided with the break.
      return {
        state: { ...next, mode: 'opening' },
        action: { kind: 'listen', afterMs: state.breaks === 0 ? 0 : action.afterMs },
      };
    case 'opening':
    case 'open':
      return { state: next, action: { kind: 'await-notice', withinMs: policy.maxPollMs } };
  }
}

/** The re-open's wait after `breaks` breaks in a row: the follow's retry backoff, doubling, capped. */
function reopenDelay(breaks: number, policy: FollowPolicy): number {
  return Math.min(policy.maxPollMs, policy.retryDelayMs * 2 ** Math.max(0, breaks - 1));
}
