import { type Actor, assign, createActor, setup } from 'xstate';
import { ListenMeta, readListenMissed } from '../../machines/continuity-extension.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { ListenAttemptFacts, ListenLog, ListenLogLimits } from '../../machines/server/listen-log.js';
import type { InspectOption } from './keyed-mirror.js';

/**
 * The server's listen log (`subscriptions/listen` with the continuity extension, machines/server/
 * listen-log.ts), for the inspector. The log is plain data stepped by pure functions, not an actor: to show
 * it, this keeps one mirror actor, created with XState's `inspect` option and told what the runtime did
 * (a change published, a listen acknowledged). The mirror records; it decides nothing (every decision is
 * the log's functions') and the runtime never reads it. The page shows its position (the head), what it
 * still holds against its retention, and each re-open's answer: an exact count, or a gap of unknown size.
 */

/** What the mirror holds: the log as the page reads it. */
export interface ListenLogView {
  readonly epoch: string;
  /** The newest change's sequence number; 0 before the first. */
  readonly head: number;
  /** The oldest change still held; `head + 1` when it holds none. */
  readonly oldest: number;
  readonly retentionMs: number;
  readonly maxChanges: number;
  /** Streams opened (the acknowledgements passed), and of them re-opens with a last position. */
  readonly listens: number;
  readonly reopens: number;
  /** Re-opens told an exact count, and the changes so counted; re-opens the log could not vouch for. */
  readonly exactGaps: number;
  readonly missedChanges: number;
  readonly unknownGaps: number;
  /** The latest re-open's answer, as the client was told it. */
  readonly lastReopen?: string;
}

type MirrorEvent =
  | { type: 'log.published'; head: number; oldest: number }
  | { type: 'log.acknowledged'; head: number; oldest: number; reopen?: { count: number } | 'unknown' };

/** The mirror: one state, its context the view. Its id (`listenLog`) is what the page draws it by. */
export const listenLogMirror = setup({
  types: { context: {} as ListenLogView, input: {} as ListenLogView, events: {} as MirrorEvent },
}).createMachine({
  id: 'listenLog',
  context: ({ input }) => input,
  initial: 'logging',
  states: {
    logging: {
      on: {
        'log.published': {
          actions: assign(({ event }) => ({ head: event.head, oldest: event.oldest })),
        },
        'log.acknowledged': {
          actions: assign(({ context, event }) => {
            const reopen = event.reopen;
            const counted = typeof reopen === 'object';
            return {
              head: event.head,
              oldest: event.oldest,
              listens: context.listens + 1,
              reopens: context.reopens + (reopen ? 1 : 0),
              exactGaps: context.exactGaps + (counted ? 1 : 0),
              missedChanges: context.missedChanges + (counted ? reopen.count : 0),
              unknownGaps: context.unknownGaps + (reopen === 'unknown' ? 1 : 0),
              ...(reopen
                ? { lastReopen: counted ? `exact: ${reopen.count} missed` : 'unknown (not vouched for)' }
                : {}),
            };
          }),
        },
      },
    },
  },
});

/** The runtime's side: told what happened to the log, it moves the mirror. */
export class ListenLogInspection {
  private readonly actor: Actor<typeof listenLogMirror>;

  constructor(inspect: InspectOption, log: ListenLog, limits: ListenLogLimits) {
    this.actor = createActor(listenLogMirror, {
      input: {
        epoch: log.epoch,
        ...held(log),
        retentionMs: limits.retentionMs,
        maxChanges: limits.maxChanges,
        listens: 0,
        reopens: 0,
        exactGaps: 0,
        missedChanges: 0,
        unknownGaps: 0,
      },
      inspect,
    }).start();
  }

  /** A change was recorded (and the log expired what its limits no longer keep). */
  published(log: ListenLog): void {
    this.actor.send({ type: 'log.published', ...held(log) });
  }

  /**
   * A listen stream's first message passed, as the client gets it (`positionedAck`'s output). A re-open
   * (its request named a last position) whose acknowledgement carries no `missed` was not vouched for.
   */
  acknowledged(attempt: ListenAttemptFacts, log: ListenLog, sent: JsonRpcMessage): void {
    if (!attempt.positions || !('method' in sent)) return;
    const meta = (sent.params as { _meta?: unknown } | undefined)?._meta;
    if (typeof meta !== 'object' || meta === null || !(ListenMeta.position in meta)) return;
    const missed = readListenMissed(meta);
    const reopen =
      attempt.lastPosition === undefined
        ? undefined
        : missed
          ? { count: missed.count }
          : ('unknown' as const);
    this.actor.send({ type: 'log.acknowledged', ...held(log), ...(reopen ? { reopen } : {}) });
  }

  stop(): void {
    this.actor.stop();
  }
}

function held(log: ListenLog): { head: number; oldest: number } {
  return { head: log.head, oldest: log.changes[0]?.seq ?? log.head + 1 };
}
