import { assign, emit } from 'xstate';
import { absorbEvents, type StreamCursorView, type StreamView } from '../machines/client/absorb.js';
import { clientSessionMachine } from '../machines/client/session.machine.js';
import { responseDecision, streamMachine } from '../machines/client/stream.machine.js';
import { JsonRpcCode } from '../machines/codes.js';
import type { classifyClose } from '../machines/decide.js';
import { parseEventId } from '../machines/event-id.js';
import type { JsonRpcMessage } from '../machines/jsonrpc.js';
import { answerCursor, type ResumeAnswer } from '../machines/server/retention.js';
import {
  type ServerSessionEvent,
  serverSessionMachine,
  unansweredAnswer,
} from '../machines/server/session.machine.js';
import { replayStep } from '../machines/server/session-commands.js';
import type { CheckName } from './checks.js';
import { CORRECT_CLIENT } from './world/client.js';
import type { WorldVariant } from './world/world.js';

/**
 * Deliberately wrong variants, built from the real machines by swapping one named guard or action with
 * `provide`: at least one per decision branch the coverage table lists (the close table, the POST-failure
 * rule, the cursor answer, admission, de-duplication, ledger settling, replay de-duplication). The
 * property suite must find a counterexample for each, or it proves nothing.
 */
export interface Mutant {
  readonly name: string;
  /** The decision branch it breaks (a group of the coverage table). */
  readonly branch: string;
  readonly variant: WorldVariant;
  /** The properties expected to catch it (documentation: the test reports which one did). */
  readonly caughtBy: readonly CheckName[];
  /**
   * For a mutant only rare worlds reveal: the hunt judges this many times the usual count of worlds (it
   * still stops at the first counterexample, so the cost is paid only when the catch comes late).
   */
  readonly runsFactor?: number;
}

const client = (name: string, stream: typeof streamMachine, extra: Partial<WorldVariant['client']> = {}) => ({
  client: { ...CORRECT_CLIENT, name, streamMachine: stream, ...extra },
});

/** A stream machine whose close decisions go through `classify` first: one row of the table changed. */
function closeTable(
  rewrite: (d: ReturnType<typeof classifyClose>, status: number) => ReturnType<typeof classifyClose>,
): typeof streamMachine {
  return streamMachine.provide({
    actions: {
      classifyResponse: assign({
        decision: ({ context, event }) =>
          event.type === 'http.response'
            ? rewrite(responseDecision(context, event.status, event.body), event.status)
            : undefined,
        mayHaveRun: ({ context, event }) =>
          context.mayHaveRun || (event.type === 'http.response' && event.status !== 404),
      }),
    },
  });
}

/** A server whose cursor answers are rewritten: one branch of `answerCursor` changed. */
function cursorAnswer(rewrite: (honest: ResumeAnswer, e: { window?: { head: number } }) => ResumeAnswer) {
  return serverSessionMachine.provide({
    actions: {
      answerResume: emit(({ context, event }) => {
        const e = event as Extract<ServerSessionEvent, { type: 'resume.requested' }>;
        const honest = answerCursor(e.lastEventId, {
          epoch: context.epoch,
          previousEpochs: context.previousEpochs,
          knownStreams: new Set(Object.keys(context.streams).map(Number)),
          window: e.window,
        });
        return { type: 'decision.resume' as const, answer: rewrite(honest, e) };
      }),
    },
  });
}

/**
 * The runtime's stream machine, except that each run of SSE events is read (by the runtime's
 * `absorbEvents`) against the wrong view of the stream or the wrong cursor that `misread` gives.
 */
const misreadingStreams = (
  misread: (view: StreamView, cursor: StreamCursorView) => [StreamView, StreamCursorView],
) =>
  streamMachine.provide({
    actions: {
      absorb: assign(({ context, event }) => {
        const events = event.type === 'sse.events' ? event.events : event.type === 'sse.event' ? [event] : [];
        const absorbed = absorbEvents(...misread(context.stream, context), events);
        const progress =
          absorbed.messages.length > 0 || absorbed.newIds.length > 0 || absorbed.end !== undefined;
        return { absorbed, attempt: progress ? 0 : context.attempt };
      }),
    },
  });

export const MUTANTS: readonly Mutant[] = [
  {
    // The design note's incident client.
    name: 'client that drops the session on a reset and re-sends the call',
    branch: 'close table',
    variant: {
      client: {
        name: 'incident',
        sessionMachine: clientSessionMachine,
        streamMachine: streamMachine.provide({
          guards: {
            mayReconnect: () => false,
            isTransportFault: () => false,
            isSessionGone: ({ context }) =>
              context.decision?.action === 'session-terminated' || context.decision?.action === 'reconnect',
          },
        }),
        retryPolicy: () => true,
      },
    },
    caughtBy: ['at most once', 'session survives transport'],
  },
  {
    name: 'client that never persists Last-Event-ID',
    branch: 'replay dedupe',
    variant: client('no-cursor', streamMachine.provide({ actions: { recordCursor: assign({}) } })),
    caughtBy: ['no duplicate delivery', 'no unflagged loss'],
  },
  {
    // The design note's second incident.
    name: 'server that silently resumes at head on an evicted cursor',
    branch: 'cursor answer',
    variant: {
      client: CORRECT_CLIENT,
      serverMachine: cursorAnswer((honest, e) => {
        const cursor = honest.kind === 'gone' ? parseEventId(honest.requestedId) : undefined;
        return honest.kind === 'gone' && cursor && e.window
          ? { kind: 'replay', stream: cursor.stream, afterSeq: e.window.head }
          : honest;
      }),
    },
    caughtBy: ['no unflagged loss'],
  },
  {
    name: '404 read as a transport fault (reconnect)',
    branch: 'close table',
    variant: client(
      '404-reconnects',
      closeTable((d, status) => (status === 404 ? { action: 'reconnect', reason: 'reset' } : d)),
    ),
    caughtBy: ['no spurious outcome unknown', 'no hang', 'no unflagged loss'],
  },
  {
    // Issue 22: the client before machines/client/not-found.ts, against a server that routes only POST.
    name: "a standalone GET's 404 read as the session's end",
    branch: 'not-found rule',
    variant: client(
      'get-404-session-lost',
      closeTable((d, status) => (status === 404 ? { action: 'session-terminated' } : d)),
    ),
    caughtBy: ['session survives transport', 'no unflagged loss'],
  },
  {
    name: '410 read as a transport fault (reconnect without a gap)',
    branch: 'close table',
    variant: client(
      '410-reconnects',
      closeTable((d, status) => (status === 410 ? { action: 'reconnect', reason: 'reset' } : d)),
    ),
    caughtBy: ['no unflagged loss', 'no hang', 'no spurious outcome unknown'],
  },
  {
    name: '5xx read as a lost session',
    branch: 'close table',
    variant: client(
      '5xx-session-lost',
      closeTable((d, status) => (status >= 500 ? { action: 'session-terminated' } : d)),
    ),
    caughtBy: ['session survives transport', 'no unflagged loss', 'no spurious outcome unknown'],
  },
  {
    name: 'a clean end of stream read as a stop',
    branch: 'close table',
    variant: client(
      'end-stops',
      streamMachine.provide({
        actions: {
          classifyEnd: assign({ decision: () => ({ action: 'stop', reason: 'close_event' }) as const }),
        },
      }),
    ),
    caughtBy: ['no hang', 'no unflagged loss'],
  },
  {
    name: 'stall detection off although the server sends heartbeats',
    branch: 'close table',
    variant: client('no-stall', streamMachine.provide({ guards: { stallDetectionOn: () => false } })),
    caughtBy: ['no hang', 'no unflagged loss'],
  },
  {
    name: 'a POST that may have run is always re-sent',
    branch: 'POST-failure rule',
    variant: client(
      'always-resend',
      streamMachine.provide({
        guards: {
          mayReconnect: ({ context }) =>
            context.decision?.action === 'reconnect' &&
            (context.stream.kind === 'standalone' || context.attempt < context.stream.policy.maxRetries),
        },
      }),
    ),
    caughtBy: ['at most once'],
  },
  {
    name: 'a POST is never re-sent, even one refused or to a de-duplicating server',
    branch: 'POST-failure rule',
    variant: client(
      'never-resend',
      streamMachine.provide({
        guards: {
          mayReconnect: ({ context }) =>
            context.decision?.action === 'reconnect' &&
            (context.stream.kind === 'standalone' ||
              (context.lastEventId !== undefined && context.attempt < context.stream.policy.maxRetries)),
        },
      }),
    ),
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    name: 'a 410 counts one event too many',
    branch: 'cursor answer',
    variant: {
      client: CORRECT_CLIENT,
      serverMachine: cursorAnswer((honest) =>
        honest.kind === 'gone' && honest.lostCount !== null
          ? { ...honest, lostCount: honest.lostCount + 1 }
          : honest,
      ),
    },
    caughtBy: ['no unflagged loss'],
  },
  {
    name: 'a replay starts one event after the cursor',
    branch: 'cursor answer',
    variant: {
      client: CORRECT_CLIENT,
      serverMachine: cursorAnswer((honest) =>
        honest.kind === 'replay' ? { ...honest, afterSeq: honest.afterSeq + 1 } : honest,
      ),
    },
    caughtBy: ['no unflagged loss'],
  },
  {
    name: 'every GET without a cursor attaches at the head',
    branch: 'admission',
    variant: {
      client: CORRECT_CLIENT,
      serverMachine: serverSessionMachine.provide({
        actions: {
          attachStandalone: emit({
            type: 'decision.attach' as const,
            decision: { kind: 'attach' as const, stream: 0, from: 'head' as const },
          }),
        },
      }),
    },
    caughtBy: ['no unflagged loss'],
  },
  {
    name: 'a re-sent request id runs again on a server that advertises de-duplication',
    branch: 'dedupe',
    variant: {
      client: CORRECT_CLIENT,
      serverMachine: serverSessionMachine.provide({ guards: { isDuplicateRequest: () => false } }),
    },
    caughtBy: ['at most once'],
  },
  {
    name: 'every pending call is re-sent after a session loss',
    branch: 'ledger settling',
    variant: client('resend-all', streamMachine, { retryPolicy: () => true }),
    caughtBy: ['at most once'],
  },
  {
    name: 'a 404 to any POST taken as proof that it never ran',
    branch: 'ledger settling',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'any-404-proves',
        sessionMachine: clientSessionMachine.provide({
          actions: {
            noteUnexecuted: assign({
              provenUnexecuted: ({ context, event }) =>
                event.type === 'stream.ended' && event.outcome.kind === 'session-terminated'
                  ? [...context.provenUnexecuted, event.key]
                  : context.provenUnexecuted,
            }),
          },
        }),
      },
    },
    caughtBy: ['at most once'],
  },
  {
    name: 'outcome unknown reported to the application as a definite failure',
    branch: 'ledger settling',
    variant: client('unknown-as-failed', streamMachine, {
      distort: (m: JsonRpcMessage): JsonRpcMessage =>
        'error' in m && m.error.code === JsonRpcCode.OUTCOME_UNKNOWN
          ? { ...m, error: { code: JsonRpcCode.REQUEST_FAILED, message: 'failed' } }
          : m,
    }),
    caughtBy: ['honest errors'],
  },
  {
    name: 'events the client already has are delivered again',
    branch: 'replay dedupe',
    variant: client(
      'no-overlap-drop',
      // Judges every event as new: the cursor it compares against is forgotten.
      misreadingStreams((view) => [view, { lastEventId: undefined, recentIds: [] }]),
    ),
    caughtBy: ['no duplicate delivery'],
  },
  {
    // Issue 24: a stream restored by a new process (no request body) took its answer for a message and
    // resumed from the answer's id until it gave up, then reported a loss that never happened.
    name: 'a request stream without its request (restored after a restart) does not know its own answer',
    branch: 'replay dedupe',
    variant: client(
      'restored-stream-outlives-answer',
      // A bodiless request stream read as a standalone one: no response is its answer.
      misreadingStreams((view, cursor) => [
        view.kind === 'request' && view.body === undefined ? { ...view, kind: 'standalone' } : view,
        cursor,
      ]),
    ),
    caughtBy: ['answered streams not resumed'],
  },
  {
    // Issue 24: the world used to start every read-back at the oldest retained event, so this could not
    // fail. The read-back now comes after the attach, as at run time (src/server/attachment.ts).
    name: 'a reader whose cursor was evicted after the attach writes on from the oldest event',
    branch: 'cursor answer',
    variant: {
      client: CORRECT_CLIENT,
      serverRules: {
        replayStep: (window, events, lastSent) =>
          replayStep(window, events, Math.max(lastSent, window.oldest - 1)),
      },
    },
    caughtBy: ['no unflagged loss'],
    // It needs an eviction between the attach and the read-back: seeds caught it after 520 and 8,299
    // worlds, and one missed it in 3,000 (seed 1999821035). 10× keeps a miss below one run in 10,000.
    runsFactor: 10,
  },
  {
    // Issue 23's client: a provider is given, but a 401 fails the request like any other status.
    name: 'a 401 read as a refusal although a provider could authorize',
    branch: 'close table',
    variant: client('no-authorization', streamMachine.provide({ guards: { isChallenge: () => false } })),
    caughtBy: ['honest errors'],
  },
  {
    // A call that may have run is ended (UnauthorizedError) instead of waiting for finishAuth.
    name: 'authorization exhausted: a call that may have run is failed instead of waiting',
    branch: 'POST-failure rule',
    variant: client('reject-ran', streamMachine.provide({ guards: { rejectWhenUnauthorized: () => true } })),
    caughtBy: ['honest errors'],
  },
  {
    // Issue 24 item 5: "the server does not de-duplicate" must not excuse a call that may be re-sent.
    name: 'a read-only call ends outcome unknown instead of being re-sent (retry policy: never)',
    branch: 'POST-failure rule',
    variant: client('resend-none', streamMachine, { retryPolicy: () => false }),
    caughtBy: ['re-sent when safe'],
  },
  {
    // Issue 24 item 5: a session may expire only while nothing uses it.
    name: 'the server expires a session that is in use (busy counts as idle)',
    branch: 'session',
    variant: {
      client: CORRECT_CLIENT,
      serverMachine: serverSessionMachine.provide({ guards: { isBusy: () => false } }),
    },
    caughtBy: ['sessions end for a reason'],
  },
  {
    // Issue 24 item 6: a woken session expires after half its TTL asleep. (An idle timer armed short
    // would be the same bug, but an idle session sleeps within a sweep period, long before any TTL: the
    // expiry is decided on waking, here as at run time.)
    name: 'the server expires a woken session before its TTL (half of it asleep counts as all)',
    branch: 'session',
    variant: {
      client: CORRECT_CLIENT,
      serverMachine: serverSessionMachine.provide({
        guards: {
          sleptPastTtl: ({ context, event }) =>
            event.type === 'session.woken' && event.idleMs >= context.idleTtlMs / 2,
        },
      }),
    },
    caughtBy: ['expiry after the idle TTL'],
  },
  {
    // Issue 24 item 4: a sleeping session is told it slept since the clock began, not since its last use.
    name: 'a sleeping session woken as if idle since the start (its last use ignored)',
    branch: 'server timing',
    variant: { client: CORRECT_CLIENT, serverRules: { sleptFor: (now) => now } },
    caughtBy: ['expiry after the idle TTL'],
  },
  {
    // Issue 24 item 4: the world's DELETE used to bypass `serve`, so its answer could not be wrong.
    name: 'every DELETE answered 200, even of a session the server no longer has',
    branch: 'session',
    variant: {
      client: CORRECT_CLIENT,
      serverRules: { deleteAnswer: () => ({ kind: 'empty', status: 200 }) },
    },
    caughtBy: ['DELETE answered honestly'],
  },
  {
    // Issue 24 item 4: a second principal. Both layers swapped (the handler's look-up and the machine's
    // own check), since either alone still refuses the stranger.
    name: "a stranger holding a session's id is served as its owner (its DELETE ends the session)",
    branch: 'admission',
    variant: {
      client: CORRECT_CLIENT,
      serverRules: { ownsSession: () => true },
      serverMachine: serverSessionMachine.provide({ guards: { isForeignPrincipal: () => false } }),
    },
    caughtBy: ['DELETE answered honestly'],
  },
  {
    // Issue 24 item 4 (found by the world once its log could refuse a write): a tool ran, the log would
    // not take its answer, and the client was told the call failed while the charge had landed.
    name: 'an answer the log refused reported as a failure (-32603) instead of outcome unknown',
    branch: 'session',
    variant: {
      client: CORRECT_CLIENT,
      serverMachine: serverSessionMachine.provide({
        actions: {
          answerUnanswered: emit(({ context, event }) => {
            const e = event as Extract<ServerSessionEvent, { type: 'request.unanswered' }>;
            return {
              type: 'decision.unanswered' as const,
              requestKey: e.requestKey,
              stream: context.running?.[e.requestKey] as number,
              answer: unansweredAnswer(e.cause === 'unstored' ? 'failed' : e.cause),
            };
          }),
        },
      }),
    },
    caughtBy: ['honest errors'],
  },
  {
    // Issue 24 item 4: the unstored-end retry. Without it, a log that refuses the outcome-unknown answer as
    // well leaves a resumed stream waiting for an answer nobody writes.
    name: "an unanswered request's answer the log refused is never stored again",
    branch: 'server timing',
    variant: { client: CORRECT_CLIENT, serverRules: { unstoredAnswerRetryMs: () => undefined } },
    caughtBy: ['no hang'],
  },
];
