import { assign } from 'xstate';
import { reconnectDelay } from '../backoff.js';
import { OutcomeUnknownReason } from '../codes.js';
import { requestKey } from '../jsonrpc.js';
import type { ServerAdvertisement } from '../validity.js';
import { ledgerOnSessionLost, outcomeUnknownError, type RetryPolicy } from './ledger.js';
import { acceptableSessionId } from './limits.js';
import { initKey, STANDALONE_KEY } from './session-context.js';
import { sessionSending } from './session-sending.js';
import { enqueueIn } from './session-setup.js';

const act = enqueueIn<typeof sessionSending>();

/**
 * The session's life: adopting its id, resuming a restored one, losing it (404) and re-initializing with
 * backoff, giving up, and deleting it on close.
 */
export const sessionLifecycle = sessionSending.extend({
  actions: {
    /** The server named the session (the initialize's response headers): kept, if it is acceptable. */
    adoptSession: act(
      ({ context, enqueue }, opened: { sessionId?: string; advertisement?: ServerAdvertisement }) => {
        if (opened.sessionId === undefined) return;
        if (!acceptableSessionId(opened.sessionId)) {
          enqueue({
            type: 'reportError',
            params: {
              message: 'the server sent a session id that is too long or not visible ASCII; not used',
            },
          });
          return;
        }
        enqueue.assign({
          sessionId: opened.sessionId,
          advertisement: opened.advertisement ?? context.advertisement,
        });
      },
    ),
    /**
     * The session is gone (404). Settle what was in flight: re-send what the policy allows, declare the
     * rest outcome unknown. Then initialize a new session with the application's original parameters.
     */
    loseSession: act(({ context, enqueue }) => {
      const proven = new Set(context.provenUnexecuted);
      const policy: RetryPolicy = (request, annotations) =>
        proven.has(requestKey(request.id)) || context.config.retryPolicy(request, annotations);
      const lost = ledgerOnSessionLost(context.ledger, policy, context.annotations);
      for (const request of lost.unknown) {
        enqueue({
          type: 'deliver',
          params: { message: outcomeUnknownError(request.id, OutcomeUnknownReason.sessionLost) },
        });
      }
      enqueue({
        type: 'notifyGap',
        params: {
          streamKey: STANDALONE_KEY,
          reason: OutcomeUnknownReason.sessionLost,
          lostCount: null,
          sessionId: context.sessionId,
        },
      });
      enqueue({ type: 'persistCursor', params: { record: null } });
      const reinitId = `mcp-continuity-reinit-${context.spawned}`;
      const backoff = context.config.policy;
      enqueue.assign({
        resendQueue: [...context.resendQueue, ...lost.resend],
        sessionId: undefined,
        reinitId,
        provenUnexecuted: [],
        reinits: context.reinits + 1,
        // The first re-initialize is immediate (a restarted server); a session lost again before it proved
        // itself waits as a reconnect attempt would, so a server that 404s everything cannot make us spin.
        reinitDelayMs:
          context.reinits === 0
            ? 0
            : reconnectDelay(
                context.reinits - 1,
                backoff,
                undefined,
                (context.config.seed ^ 0x5bd1e995) >>> 0,
              ),
      });
    }),
    /** Sends the new session's initialize, with the application's original parameters. */
    spawnReinitialize: act(({ context, enqueue }, { now }: { now: boolean }) => {
      const reinitId = context.reinitId;
      if (!context.initializeRequest || reinitId === undefined) return;
      // On entry only when there is no wait; when the wait ends only if there was one.
      if (now !== (context.reinitDelayMs === 0)) return;
      enqueue({
        type: 'spawnStream',
        params: {
          key: requestKey(reinitId),
          kind: 'request',
          body: { ...context.initializeRequest, id: reinitId },
        },
      });
    }),
    forgetReinits: assign({ reinits: 0 }),
    /** The session is gone (404): nothing of it is kept, persisted or deleted on close. */
    forgetSession: act(({ enqueue }) => {
      enqueue.assign({ sessionId: undefined });
      enqueue({ type: 'persistCursor', params: { record: null } });
    }),
    /**
     * The session could not be re-established: the transport is failed for good; the application is told
     * why. Either the new session's initialize failed (its stream ended without an answer, or the server
     * answered it with an error), or sessions kept being lost as soon as they were made.
     */
    reportGivenUp: act(({ context, enqueue, event }) => {
      const reinit = 'key' in event && event.key === initKey(context, true);
      const failure =
        event.type === 'stream.ended'
          ? event.outcome
          : event.type === 'stream.message'
            ? event.message
            : undefined;
      enqueue({
        type: 'reportFailure',
        params: reinit
          ? { message: 'the session was lost and re-initializing it failed', detail: failure }
          : {
              message: `the session was lost ${context.reinits + 1} times in a row, each time soon after it was established; the client gave up re-initializing`,
              detail: { reinits: context.reinits + 1 },
            },
      });
    }),
    reportForeignRecord: act(({ context, enqueue }) => {
      if (!context.foreignRecord) return;
      enqueue({
        type: 'reportError',
        params: {
          message: `the cursor record names another server than ${context.config.serverUrl ?? 'this one'}: not used`,
        },
      });
      enqueue.assign({ foreignRecord: false });
    }),
    /** The new session answered: announce it, reopen the GET stream, re-send, then flush the queue. */
    completeReinitialize: act(({ context, enqueue }) => {
      enqueue({
        type: 'spawnStream',
        params: {
          key: `message:${context.spawned}`,
          kind: 'message',
          body: { jsonrpc: '2.0', method: 'notifications/initialized' },
        },
      });
      enqueue({ type: 'spawnStream', params: { key: STANDALONE_KEY, kind: 'standalone' } });
      for (const request of context.resendQueue) {
        enqueue({
          type: 'spawnStream',
          params: { key: requestKey(request.id), kind: 'request', body: request },
        });
      }
      for (const message of context.queue) enqueue.raise({ type: 'app.send', message });
      enqueue.assign({ resendQueue: [], queue: [], reinitId: undefined });
    }),
    resumeRestored: act(({ context, enqueue }) => {
      const restored = context.restored;
      if (!restored) return;
      enqueue.assign({
        sessionId: restored.sessionId,
        protocolVersion: restored.protocolVersion,
        initializeRequest: restored.initializeRequest,
        advertisement: restored.advertisement,
        restored: undefined,
      });
      for (const [key, cursor] of Object.entries(restored.streams)) {
        if (cursor.lastEventId === undefined && cursor.kind === 'request') {
          // Died before its first event id: nothing to resume; its answer, if any, is unreachable.
          enqueue({
            type: 'notifyGap',
            params: {
              streamKey: key,
              reason: OutcomeUnknownReason.streamUnresumable,
              lostCount: null,
              sessionId: restored.sessionId,
            },
          });
          continue;
        }
        enqueue({
          type: 'spawnStream',
          params: { key, kind: cursor.kind, lastEventId: cursor.lastEventId },
        });
      }
      if (!restored.streams[STANDALONE_KEY])
        enqueue({ type: 'spawnStream', params: { key: STANDALONE_KEY, kind: 'standalone' } });
    }),
    rememberProtocolVersion: assign((_, { version }: { version: string }) => ({ protocolVersion: version })),
    deleteSession: act(({ context, enqueue }) => {
      if (context.sessionId !== undefined)
        enqueue({ type: 'sendDelete', params: { sessionId: context.sessionId } });
      enqueue({ type: 'persistCursor', params: { record: null } });
    }),
  },
  guards: {
    hasRestoredSession: ({ context }) => context.restored !== undefined,
    isInitAnswer: ({ context, event }) =>
      event.type === 'stream.message' && event.key === initKey(context, false),
    isReinitAnswer: ({ context, event }) =>
      event.type === 'stream.message' && event.key === initKey(context, true) && 'result' in event.message,
    isReinitRejected: ({ context, event }) =>
      event.type === 'stream.message' && event.key === initKey(context, true) && !('result' in event.message),
    isInitAccepted: ({ event }) => event.type === 'stream.message' && 'result' in event.message,
    initStreamFailed: ({ context, event }) =>
      event.type === 'stream.ended' && event.outcome.kind !== 'done' && event.key === initKey(context, false),
    /** The session was lost more often in a row than the policy retries: stop re-initializing. */
    reinitsExhausted: ({ context }) => context.reinits > context.config.policy.maxRetries,
    reinitStreamFailed: ({ context, event }) =>
      event.type === 'stream.ended' && event.outcome.kind !== 'done' && event.key === initKey(context, true),
    /** 404 on a session-scoped request: the only transport report that ends a session. */
    sessionTerminated: ({ event }) =>
      event.type === 'stream.ended' && event.outcome.kind === 'session-terminated',
    closedByServer: ({ event }) => event.type === 'stream.ended' && event.outcome.kind === 'closed-by-server',
  },
});
