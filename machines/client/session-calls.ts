import { assign } from 'xstate';
import { JsonRpcCode, OutcomeUnknownReason } from '../codes.js';
import {
  isRequest,
  isResponse,
  type JsonRpcError,
  type JsonRpcMessage,
  type RequestId,
  requestKey,
} from '../jsonrpc.js';
import { withOriginalIds } from '../request-tag.js';
import { isAppResumeKey } from './app-resume.js';
import {
  inboundOf,
  learnAnnotations,
  ledgerSettle,
  outcomeUnknownError,
  pendingByKey,
  pendingEntries,
} from './ledger.js';
import { cursorRecordOf, initKey } from './session-context.js';
import { enqueueIn } from './session-setup.js';
import { dropStream, forgetStream, sessionStreams } from './session-streams.js';
import type { StreamOutcome } from './stream.machine.js';

const outcomeReason: Partial<Record<StreamOutcome['kind'], OutcomeUnknownReason>> = {
  'given-up': OutcomeUnknownReason.reconnectGivenUp,
  unresumable: OutcomeUnknownReason.streamUnresumable,
  'response-evicted': OutcomeUnknownReason.responseEvicted,
  'epoch-changed': OutcomeUnknownReason.epochChanged,
  'session-terminated': OutcomeUnknownReason.sessionLost,
  'closed-by-server': OutcomeUnknownReason.serverClosedSession,
};

function failedError(id: RequestId, status: number, body: unknown): JsonRpcError {
  if (status >= 300 && status < 400)
    return {
      jsonrpc: '2.0',
      id,
      error: {
        code: JsonRpcCode.UNEXPECTED_STATUS,
        message: `The server redirected (HTTP ${status}); redirects are never followed, so the session id, headers and call stay with the configured URL`,
        data: { status, body },
      },
    };
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: JsonRpcCode.UNEXPECTED_STATUS,
      message: `The server answered HTTP ${status}; the client does not guess what that means for the call`,
      data: { status, body },
    },
  };
}

function requestFailed(id: RequestId, message: string): JsonRpcError {
  return { jsonrpc: '2.0', id, error: { code: JsonRpcCode.REQUEST_FAILED, message } };
}

/** The id a `notifications/cancelled` names, as the ledger keys it. */
function cancelledKey(message: JsonRpcMessage): string | undefined {
  if (!('method' in message) || message.method !== 'notifications/cancelled' || 'id' in message)
    return undefined;
  const id = message.params?.requestId;
  return typeof id === 'string' || typeof id === 'number' ? requestKey(id) : undefined;
}

const act = enqueueIn<typeof sessionStreams>();

/** A stream's end, as `stream.ended` reports it. */
export type StreamEnd = { readonly key: string; readonly outcome: StreamOutcome };

/**
 * The application's calls: answers settle the ledger and reach the application (or the orphan path), a
 * cancelled call stops its stream, and a call whose stream ended without an answer is settled.
 */
export const sessionCalls = sessionStreams.extend({
  actions: {
    /**
     * The application gave up on a call (`notifications/cancelled`, which the SDK also sends when its own
     * request timeout fires): the call's stream stops and its ledger entry goes; nothing is delivered for
     * it (the SDK has already ended it). The notification itself is still sent to the server.
     */
    cancelCall: act(({ context, enqueue }, { message }: { message: JsonRpcMessage }) => {
      const key = cancelledKey(message);
      // The initialize is the session's, not a call: it runs to its end (the SDK gave up on connect anyway).
      if (key === undefined || key === initKey(context, false)) return;
      const pending = pendingByKey(context.ledger, key);
      if (pending) ledgerSettle(context.ledger, pending.request.id);
      const entry = dropStream(context, key);
      if (entry) enqueue.stopChild(entry.ref);
      const queued = (m: JsonRpcMessage) => !(isRequest(m) && requestKey(m.id) === key);
      if (context.resendQueue.some((m) => !queued(m)) || context.queue.some((m) => !queued(m)))
        enqueue.assign({
          resendQueue: context.resendQueue.filter(queued),
          queue: context.queue.filter(queued),
        });
      if (pending || entry) enqueue({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),
    /**
     * A message from the server: settle the ledger and hand it on, or route a stranger's response aside.
     * The ledger is settled in place (see `ClientContext`); only learned annotations are assigned.
     */
    receive: act(({ context, enqueue, event }) => {
      const messages =
        event.type === 'stream.messages'
          ? event.messages
          : event.type === 'stream.message' || event.type === 'stream.answered'
            ? [event]
            : [];
      // Learned across the whole batch, then assigned once: each assign would start from the old context.
      let annotations = context.annotations;
      const key = 'streamId' in event ? event.key : undefined;
      for (const { message, eventId } of messages) {
        const inbound = inboundOf(context.ledger, context.config.requestOwner, message);
        if (inbound.kind === 'orphan') {
          // On a stream the application resumed itself, what arrives is its own (as the SDK hands it over).
          if (key !== undefined && isAppResumeKey(key))
            enqueue({ type: 'deliver', params: { message: withOriginalIds(message), key, eventId } });
          else enqueue({ type: 'deliverOrphan', params: { message } });
          continue;
        }
        if (inbound.kind === 'answer' && isResponse(message)) {
          const answered = 'result' in message;
          ledgerSettle(context.ledger, inbound.entry.request.id);
          if (answered && inbound.entry.request.method === 'tools/list')
            annotations = learnAnnotations(annotations, message.result);
        }
        enqueue({ type: 'deliver', params: { message, key, eventId } });
      }
      if (annotations !== context.annotations) enqueue.assign({ annotations });
    }),
    /**
     * Several messages of one stream in one event (`stream.messages`), where the session's state may move
     * between them (initializing, re-initializing): raised again one by one, in order, each handled as
     * its own `stream.message`; the last carries the cursor.
     */
    receiveOneByOne: act(({ enqueue, event }) => {
      if (event.type !== 'stream.messages') return;
      const last = event.messages.length - 1;
      event.messages.forEach((m, i) => {
        enqueue.raise({
          type: 'stream.message',
          key: event.key,
          streamId: event.streamId,
          eventId: m.eventId,
          message: m.message,
          ...(i === last ? { cursor: event.cursor } : {}),
        });
      });
    }),
    /**
     * A request stream's answer and its end (`stream.answered`): what `stream.message` and then
     * `stream.ended` (`done`) did, less the cursor write in between, which the stream's end removes again
     * before anyone could read it.
     */
    endAnswered: act(({ context, enqueue }, { key }: { key: string }) => {
      forgetStream(context, key);
      enqueue({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),
    /** A stream ended: forget it, and settle its request if it ended without an answer. */
    settleEndedStream: act(({ context, enqueue }, { key, outcome }: StreamEnd) => {
      const entry = forgetStream(context, key);
      const pending = entry?.kind === 'request' ? pendingByKey(context.ledger, key) : undefined;
      // A request stream that ended without its answer (a 202, a 204 or 405 to its resume) still ends its
      // call: nothing else will, short of the SDK's own timeout.
      if ((outcome.kind === 'done' || outcome.kind === 'stopped') && !pending) return;
      if (!pending) {
        enqueue({
          type: 'reportError',
          params: { message: `stream ${key} ended: ${outcome.kind}`, detail: outcome },
        });
        // Whatever that stream would still have carried will not arrive: say so, size unknown. (A request
        // stream with no pending entry was restored from another process: its answer is lost too.)
        if (entry?.kind === 'standalone' || entry?.kind === 'request') {
          enqueue({
            type: 'notifyGap',
            params: {
              streamKey: key,
              reason: outcome.kind,
              lostCount: null,
              sessionId: context.sessionId,
            },
          });
        }
        return;
      }
      const id = pending.request.id;
      if (outcome.kind === 'unauthorized') {
        ledgerSettle(context.ledger, id);
        enqueue({
          type: 'rejectUnauthorized',
          params: { message: failedError(id, outcome.status, outcome.body) },
        });
        return;
      }
      if (outcome.kind === 'refused') {
        ledgerSettle(context.ledger, id);
        enqueue({
          type: 'deliver',
          params: { message: failedError(id, outcome.status, outcome.body) },
        });
        return;
      }
      if (outcome.kind === 'given-up' && outcome.neverRan) {
        // No attempt left this process (every one refused before a byte was sent): it never ran.
        ledgerSettle(context.ledger, id);
        enqueue({
          type: 'deliver',
          params: {
            message: requestFailed(
              id,
              `The server could not be reached (${outcome.reason}); the request was never sent`,
            ),
          },
        });
        return;
      }
      const reason = outcomeReason[outcome.kind] ?? OutcomeUnknownReason.streamUnresumable;
      ledgerSettle(context.ledger, id);
      enqueue({ type: 'deliver', params: { message: outcomeUnknownError(id, reason) } });
    }),
    /** Every pending call ends as outcome unknown: the session or the transport is gone for good. */
    settleAllUnknown: act(({ context, enqueue }, { reason }: { reason: OutcomeUnknownReason }) => {
      for (const entry of pendingEntries(context.ledger)) {
        ledgerSettle(context.ledger, entry.request.id);
        enqueue({
          type: 'deliver',
          params: { message: outcomeUnknownError(entry.request.id, reason) },
        });
      }
      // Requests waiting to be re-sent are still pending in the ledger: settled above, once.
      enqueue.assign({ resendQueue: [] });
    }),
    /** Requests held while the session was being re-established, which will now never be sent: they fail. */
    rejectQueued: act(({ context, enqueue }) => {
      for (const message of context.queue) {
        if (!isRequest(message)) continue;
        enqueue({
          type: 'deliver',
          params: { message: requestFailed(message.id, 'The session has ended; create a new transport') },
        });
      }
      enqueue.assign({ queue: [] });
    }),
    /** A request sent after the session ended fails at once. */
    rejectAfterEnd: act(({ enqueue }, { message }: { message: JsonRpcMessage }) => {
      if (!isRequest(message)) return;
      enqueue({
        type: 'deliver',
        params: { message: requestFailed(message.id, 'The session has ended; create a new transport') },
      });
    }),
    /** A 404 that answered a call's own POST proves the call never ran: it may be sent again. */
    noteUnexecuted: assign(({ context }, { key, outcome }: StreamEnd) =>
      outcome.kind === 'session-terminated' && outcome.neverRan
        ? { provenUnexecuted: [...context.provenUnexecuted, key] }
        : {},
    ),
  },
});
