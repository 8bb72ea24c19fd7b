import { JsonRpcCode } from '../codes.js';
import { isRequest, type JsonRpcMessage, requestKey } from '../jsonrpc.js';
import { ledgerAdd } from './ledger.js';
import { sessionCalls } from './session-calls.js';
import { STANDALONE_KEY } from './session-context.js';
import { enqueueIn } from './session-setup.js';

const act = enqueueIn<typeof sessionCalls>();

/**
 * What the application sends: the initialize, then requests (each on its own stream) and notifications;
 * held in a queue while the session is being (re-)established.
 */
export const sessionSending = sessionCalls.extend({
  actions: {
    /** Sends an application message on the current session: a request gets its own stream. */
    dispatch: act(
      (
        { context, enqueue },
        { message, resumptionToken }: { message: JsonRpcMessage; resumptionToken?: string },
      ) => {
        enqueue({ type: 'cancelCall', params: { message } });
        if (isRequest(message)) {
          ledgerAdd(context.ledger, message);
          // With a resumption token it is not POSTed: it resumes that stream (absorb.ts, `asReplayedAnswer`).
          enqueue({
            type: 'spawnStream',
            params: {
              key: requestKey(message.id),
              kind: 'request',
              body: message,
              lastEventId: resumptionToken,
            },
          });
          return;
        }
        enqueue({
          type: 'spawnStream',
          params: { key: `message:${context.spawned}`, kind: 'message', body: message },
        });
        if (
          'method' in message &&
          message.method === 'notifications/initialized' &&
          !context.streams[STANDALONE_KEY]
        ) {
          enqueue({ type: 'spawnStream', params: { key: STANDALONE_KEY, kind: 'standalone' } });
        }
      },
    ),
    /**
     * A request with a resumption token while the session is being (re-)established: the token names an
     * event of a session that is not the one to come, and the request must not be POSTed instead. It fails.
     */
    rejectReplay: act(({ enqueue }, { message }: { message: JsonRpcMessage }) => {
      if (!isRequest(message)) return;
      enqueue({
        type: 'deliver',
        params: {
          message: {
            jsonrpc: '2.0',
            id: message.id,
            error: {
              code: JsonRpcCode.REQUEST_FAILED,
              message: 'resumptionToken: no active session to resume it in; the request was not sent',
            },
          },
        },
      });
    }),
    /** Held until the session is (re-)established; a cancellation still stops its call at once. */
    queueMessage: act(({ enqueue }, { message }: { message: JsonRpcMessage }) => {
      enqueue({ type: 'cancelCall', params: { message } });
      enqueue.assign(({ context: now }) => ({ queue: [...now.queue, message] }));
    }),
    /**
     * The application resumes a stream itself (`resumeStream`, the SDK's method): a GET with its
     * `Last-Event-ID` in this session, decided as every other resume (a `request` stream without a body).
     * Its cursor is recorded and persisted at once, as any stream's.
     */
    resumeForApp: act(({ enqueue }, { key, lastEventId }: { key: string; lastEventId: string }) => {
      enqueue({ type: 'spawnStream', params: { key, kind: 'request', lastEventId } });
      enqueue('persist');
    }),
    /** No session to resume in (not yet established, being re-established, or ended): the application hears why. */
    refuseResume: act(({ enqueue }, { key }: { key: string }) => {
      enqueue({
        type: 'reportError',
        params: { message: `resumeStream: no active session to resume ${key} in`, detail: { key } },
      });
    }),
    startInitialize: act(({ context, enqueue }, { message }: { message: JsonRpcMessage }) => {
      if (!isRequest(message)) return;
      ledgerAdd(context.ledger, message);
      enqueue.assign({ initializeRequest: message });
      enqueue({
        type: 'spawnStream',
        params: { key: requestKey(message.id), kind: 'request', body: message },
      });
    }),
  },
  guards: {
    isInitialize: ({ event }) =>
      event.type === 'app.send' && isRequest(event.message) && event.message.method === 'initialize',
    /** A request the application sent with the SDK's `resumptionToken`. */
    isReplay: ({ event }) =>
      event.type === 'app.send' && event.resumptionToken !== undefined && isRequest(event.message),
    isRequestMessage: ({ event }) => event.type === 'app.send' && isRequest(event.message),
  },
});
