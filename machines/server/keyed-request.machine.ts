import { emit, enqueueActions, setup } from 'xstate';
import { ContinuityErrorCode } from '../continuity-extension.js';
import { formatEventId } from '../event-id.js';
import { answerCursor, type ResumeAnswer, type StreamWindow } from './retention.js';

/**
 * One keyed request of MCP 2026-07-28 under the continuity extension (docs/continuity-extension.md), on
 * the server: the work apart from the streams that watch it. The tool body starts once, when the machine
 * starts; nothing afterwards starts it again. A closed stream is a transport fact (the work goes on); only
 * an explicit `notifications/cancelled` cancels. A re-issue of the same key and principal attaches to the
 * running work, or gets the recorded outcome; with other arguments it is refused.
 *
 * Work states: running → committed (side effect done, outcome recorded, nobody was watching) → answered
 * (the outcome went to a stream); running → cancelled (explicit cancel); running → outcomeUnknown (the
 * instance running it died); running → refused (the server's checks refused it before the tool ran: a
 * re-issue then runs, the only way a key runs twice, because it never ran); any finished state → forgotten (the memo window ran out; the runtime deletes
 * the record). The runtime keeps one actor per `memoKey(principal, key)`, so principals never meet here.
 *
 * Answers are emitted (`keyed.*`); the runtime relays them to HTTP, persists the snapshot (memory, SQLite,
 * Redis) and owns the memo's clock (it sends `memo.expired`, e.g. from a Redis TTL), because an XState
 * timer does not survive a restored snapshot.
 *
 * @spec 2026-07-28 streamable-http#cancellation (what the extension changes for keyed requests)
 */
export interface KeyedRequestInput {
  /** `memoKey(principal, key)`. */
  readonly memoKey: string;
  /** `requestFingerprint(method, params)` of the first attempt. */
  readonly fingerprint: string;
  /** The first attempt's stream (its JSON-RPC id, or any id the runtime gives the response). */
  readonly attacher: string;
}

/** The final JSON-RPC answer of the tool, as recorded: a result (even `isError: true`) or an error. */
export type RecordedOutcome =
  | { readonly kind: 'result'; readonly result: unknown }
  | { readonly kind: 'error'; readonly error: { code: number; message: string; data?: unknown } };

export type KeyedRequestEvent =
  /**
   * A re-issue: new JSON-RPC id, same key, same principal. `resume` is `keyedResume(...)` of its last event
   * id against this key's event log.
   */
  | { type: 'reissue.arrived'; attacher: string; fingerprint: string; resume: ResumeAnswer }
  /** A response stream watching this key closed (client gone, balancer cut). Not a cancellation. */
  | { type: 'stream.closed'; attacher: string }
  /** An explicit cancel of this key (§13, or the older `notifications/cancelled`), from its principal. */
  | { type: 'cancel.requested' }
  /** The tool body returned; its outcome is recorded durably before this event is sent. */
  | { type: 'tool.finished'; outcome: RecordedOutcome }
  /**
   * The server refused the request before the tool ran (the SDK's own checks answered 4xx: a header that
   * disagrees with the arguments, a scope it lacks). Nothing ran; `outcome` is that refusal.
   */
  | { type: 'tool.refused'; outcome: RecordedOutcome }
  /** The memo window after the work ended has passed. Ignored while the work runs. */
  | { type: 'memo.expired' }
  /** The instance running the body died (lease lost, or restart found the record running). */
  | { type: 'instance.died' };

/** What one attempt (the first, or a re-issue) is told. */
export type KeyedAnswer =
  /** Stream the log after `afterSeq`, then live events, then the outcome when it is recorded. */
  | { readonly kind: 'attach'; readonly afterSeq: number }
  /** Stream the log after `afterSeq`, then the recorded outcome. */
  | { readonly kind: 'recorded'; readonly afterSeq: number; readonly outcome: RecordedOutcome }
  /** The recorded outcome, written now to a stream that was attached while the work ran. */
  | { readonly kind: 'outcome'; readonly outcome: RecordedOutcome }
  /** A JSON-RPC error with one of the extension's codes; nothing runs. */
  | { readonly kind: 'refused'; readonly code: typeof ContinuityErrorCode.KEY_REUSED }
  | { readonly kind: 'cancelled'; readonly code: typeof ContinuityErrorCode.CANCELLED }
  | { readonly kind: 'outcome-unknown'; readonly code: typeof ContinuityErrorCode.OUTCOME_UNKNOWN }
  /** The key's earlier attempt was refused before it ran: this one runs (a new work under the same key). */
  | { readonly kind: 'start-over' }
  /** 410: the events after the re-issue's cursor were evicted; the details are the body's `data`. */
  | {
      readonly kind: 'evicted';
      readonly code: typeof ContinuityErrorCode.EVENTS_EVICTED;
      readonly resume: Extract<ResumeAnswer, { kind: 'gone' }>;
    }
  /** A last event id this key's log never issued: Invalid params, nothing attaches. */
  | {
      readonly kind: 'invalid-cursor';
      readonly code: typeof INVALID_PARAMS;
      readonly resume: Extract<ResumeAnswer, { kind: 'invalid' }>;
    };

/** JSON-RPC's own Invalid params. */
const INVALID_PARAMS = -32602;

export type KeyedRequestEmitted =
  /** Run the tool body. Emitted once, on start. */
  | { type: 'keyed.start' }
  /** Abort the body (its abort signal fires). */
  | { type: 'keyed.abort' }
  | { type: 'keyed.answer'; attacher: string; answer: KeyedAnswer }
  /** The work ended: arm the memo window from now. */
  | { type: 'keyed.memo-armed' }
  /** The memo window passed: delete the record (and the key's event log). */
  | { type: 'keyed.forget' };

export interface KeyedRequestContext {
  readonly memoKey: string;
  readonly fingerprint: string;
  /** Streams watching the work now. */
  attached: string[];
  outcome: RecordedOutcome | undefined;
}

/**
 * The answer to a re-issue's last event id against the key's own log (one stream, `stream`, in the log
 * incarnation `epoch`). `undefined` means the client saw no event: everything retained is replayed, and if
 * the log already evicted its first events, the client is told exactly how many it never saw.
 */
export function keyedResume(
  lastEventId: string | undefined,
  log: { readonly epoch: string; readonly stream: number; readonly window: StreamWindow | undefined },
): ResumeAnswer {
  const cursor = lastEventId ?? formatEventId({ epoch: log.epoch, stream: log.stream, seq: 0 });
  return answerCursor(cursor, {
    epoch: log.epoch,
    previousEpochs: [],
    knownStreams: new Set([log.stream]),
    window: log.window,
  });
}

type Reissue = Extract<KeyedRequestEvent, { type: 'reissue.arrived' }>;

const answer = (attacher: string, a: KeyedAnswer) => ({ type: 'keyed.answer' as const, attacher, answer: a });

export const keyedRequestMachine = setup({
  types: {
    context: {} as KeyedRequestContext,
    input: {} as KeyedRequestInput,
    events: {} as KeyedRequestEvent,
    emitted: {} as KeyedRequestEmitted,
  },
  guards: {
    isOtherRequest: ({ context, event }) =>
      event.type === 'reissue.arrived' && event.fingerprint !== context.fingerprint,
    cannotResume: ({ event }) => event.type === 'reissue.arrived' && event.resume.kind !== 'replay',
    someoneWatching: ({ context }) => context.attached.length > 0,
  },
  actions: {
    startBody: emit({ type: 'keyed.start' }),
    abortBody: emit({ type: 'keyed.abort' }),
    armMemo: emit({ type: 'keyed.memo-armed' }),
    refuseOtherRequest: emit(({ event }) =>
      answer((event as Reissue).attacher, { kind: 'refused', code: ContinuityErrorCode.KEY_REUSED }),
    ),
    /** 410 or -32602 for a cursor the log cannot honour; nothing attaches, nothing runs. */
    refuseCursor: emit(({ event }) => {
      const { attacher, resume } = event as Reissue;
      return answer(
        attacher,
        resume.kind === 'gone'
          ? { kind: 'evicted', code: ContinuityErrorCode.EVENTS_EVICTED, resume }
          : {
              kind: 'invalid-cursor',
              code: INVALID_PARAMS,
              resume: resume as Extract<ResumeAnswer, { kind: 'invalid' }>,
            },
      );
    }),
    /** A re-issue while the work runs watches it; it never starts it. Named so a mutant can break it. */
    attachToRunning: enqueueActions(({ context, event, enqueue }) => {
      const { attacher, resume } = event as Reissue;
      enqueue.assign({ attached: [...context.attached.filter((a) => a !== attacher), attacher] });
      enqueue.emit(answer(attacher, { kind: 'attach', afterSeq: afterSeqOf(resume) }));
    }),
    /** A re-issue after the work finished gets what was recorded. Named so a mutant can break it. */
    answerRecorded: emit(({ context, event }) => {
      const { attacher, resume } = event as Reissue;
      return answer(attacher, {
        kind: 'recorded',
        afterSeq: afterSeqOf(resume),
        outcome: context.outcome as RecordedOutcome,
      });
    }),
    /** Nothing ran under the key: the re-issue runs. Named so a mutant can break it. */
    startOver: emit(({ event }) => answer((event as Reissue).attacher, { kind: 'start-over' })),
    answerCancelled: emit(({ event }) =>
      answer((event as Reissue).attacher, { kind: 'cancelled', code: ContinuityErrorCode.CANCELLED }),
    ),
    answerUnknown: emit(({ event }) =>
      answer((event as Reissue).attacher, {
        kind: 'outcome-unknown',
        code: ContinuityErrorCode.OUTCOME_UNKNOWN,
      }),
    ),
    detach: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'stream.closed') return;
      enqueue.assign({ attached: context.attached.filter((a) => a !== event.attacher) });
    }),
    recordOutcome: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'tool.finished' && event.type !== 'tool.refused') return;
      enqueue.assign({ outcome: event.outcome, attached: [] });
      for (const a of context.attached) enqueue.emit(answer(a, { kind: 'outcome', outcome: event.outcome }));
    }),
    /** Every watcher is told; their streams then end. */
    tellWatchers: enqueueActions(({ context, enqueue }, kind: 'cancelled' | 'outcome-unknown') => {
      for (const a of context.attached) {
        enqueue.emit(
          answer(
            a,
            kind === 'cancelled'
              ? { kind, code: ContinuityErrorCode.CANCELLED }
              : { kind, code: ContinuityErrorCode.OUTCOME_UNKNOWN },
          ),
        );
      }
      enqueue.assign({ attached: [] });
    }),
  },
}).createMachine({
  id: 'keyedRequest',
  context: ({ input }) => ({
    memoKey: input.memoKey,
    fingerprint: input.fingerprint,
    attached: [input.attacher],
    outcome: undefined,
  }),
  initial: 'running',
  // A closed stream is a transport fact in every state: the watcher is gone, the work is not touched.
  on: { 'stream.closed': { actions: 'detach' } },
  states: {
    running: {
      description: 'the tool body runs; streams come and go',
      entry: 'startBody',
      on: {
        'reissue.arrived': [
          { guard: 'isOtherRequest', actions: 'refuseOtherRequest' },
          { guard: 'cannotResume', actions: 'refuseCursor' },
          { actions: 'attachToRunning' },
        ],
        'tool.finished': [
          { guard: 'someoneWatching', target: 'finished.answered', actions: 'recordOutcome' },
          { target: 'finished.committed', actions: 'recordOutcome' },
        ],
        // The watchers get the refusal as the outcome; the key is free to run again.
        'tool.refused': { target: 'refused', actions: 'recordOutcome' },
        'cancel.requested': {
          target: 'cancelled',
          actions: ['abortBody', { type: 'tellWatchers', params: 'cancelled' }],
        },
        'instance.died': {
          target: 'outcomeUnknown',
          actions: { type: 'tellWatchers', params: 'outcome-unknown' },
        },
        // Never forgotten while it runs: a re-issue must always find running work.
        'memo.expired': {},
      },
    },
    finished: {
      description: 'the body returned; its outcome is recorded and remembered for the memo window',
      entry: 'armMemo',
      initial: 'committed',
      on: { 'memo.expired': 'forgotten' },
      states: {
        committed: {
          description: 'side effect done, outcome recorded, not yet written to any stream',
          on: {
            'reissue.arrived': [
              { guard: 'isOtherRequest', actions: 'refuseOtherRequest' },
              { guard: 'cannotResume', actions: 'refuseCursor' },
              { target: 'answered', actions: 'answerRecorded' },
            ],
          },
        },
        answered: {
          description: 'the recorded outcome went to a stream; later re-issues get it again',
          on: {
            'reissue.arrived': [
              { guard: 'isOtherRequest', actions: 'refuseOtherRequest' },
              { guard: 'cannotResume', actions: 'refuseCursor' },
              { actions: 'answerRecorded' },
            ],
          },
        },
      },
    },
    refused: {
      description: 'refused before the tool ran (the SDK answered 4xx); nothing ran, so a re-issue runs',
      entry: 'armMemo',
      on: {
        'reissue.arrived': [
          { guard: 'isOtherRequest', actions: 'refuseOtherRequest' },
          { actions: 'startOver' },
        ],
        'memo.expired': 'forgotten',
      },
    },
    cancelled: {
      description: 'an explicit cancel (§13); the key never runs again',
      entry: 'armMemo',
      on: {
        'reissue.arrived': [
          { guard: 'isOtherRequest', actions: 'refuseOtherRequest' },
          { actions: 'answerCancelled' },
        ],
        'memo.expired': 'forgotten',
      },
    },
    outcomeUnknown: {
      description: 'the instance running the body died before recording an outcome',
      entry: 'armMemo',
      on: {
        'reissue.arrived': [
          { guard: 'isOtherRequest', actions: 'refuseOtherRequest' },
          { actions: 'answerUnknown' },
        ],
        'memo.expired': 'forgotten',
      },
    },
    forgotten: {
      description: 'the memo window passed; the record is deleted',
      type: 'final',
      entry: emit({ type: 'keyed.forget' }),
    },
  },
});

function afterSeqOf(resume: ResumeAnswer): number {
  return resume.kind === 'replay' ? resume.afterSeq : 0;
}

/** What the server does with a keyed request whose key it has no record of. */
export type UnknownKeyDecision =
  /** Start a `keyedRequestMachine` for it. */
  | { readonly kind: 'execute' }
  /** -32012: it may have run here before the memo lost it (memory memo restarted, store lost). */
  | { readonly kind: 'outcome-unknown'; readonly code: typeof ContinuityErrorCode.OUTCOME_UNKNOWN };

/**
 * A keyed request arrives and the memo has no record of its key. A first attempt runs. A re-issue runs only
 * if the memo is complete for the whole window: it has kept every key it saw for at least `memoWindowMs`
 * (it is durable, or this process has been up that long). Then the first attempt never arrived, or arrived
 * more than a window ago, which the client's own rule excludes (it re-issues only inside the window).
 * Otherwise the memo may have lost the key with a restart, and running it again could duplicate it.
 */
export function admitUnknownKey(
  reissue: boolean,
  memoCompleteForMs: number,
  memoWindowMs: number,
): UnknownKeyDecision {
  if (!reissue || memoCompleteForMs >= memoWindowMs) return { kind: 'execute' };
  return { kind: 'outcome-unknown', code: ContinuityErrorCode.OUTCOME_UNKNOWN };
}
