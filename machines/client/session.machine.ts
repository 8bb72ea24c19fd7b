import { and } from 'xstate';
import { OutcomeUnknownReason } from '../codes.js';
import { initialClientContext } from './session-context.js';
import { sessionLifecycle } from './session-lifecycle.js';

export {
  type ClientConfig,
  type ClientContext,
  type ClientEvent,
  type ClientInput,
  cursorRecordOf,
  type GapReport,
  STALL_HEARTBEATS,
  STANDALONE_KEY,
  type StreamEntry,
  stallTimeoutFor,
} from './session-context.js';

/**
 * The client's session chart: uninitialized → initializing → active ⇄ reinitializing, ending terminated
 * (server said `event: close`), failed (could not re-establish it) or closed (the application closed it).
 * What each action does lives by concern: session-streams.ts, session-calls.ts, session-sending.ts,
 * session-lifecycle.ts, on the base in session-setup.ts (types and the actions the runtime provides).
 */
export const clientSessionMachine = sessionLifecycle.createMachine({
  id: 'client',
  context: ({ input }) => initialClientContext(input),
  initial: 'uninitialized',
  on: {
    'stream.message': { guard: 'isStaleReport' },
    'stream.messages': { guard: 'isStaleReport' },
    'stream.answered': [{ guard: 'isStaleReport' }, { actions: ['receive', 'endAnswered'] }],
    'stream.cursor': [{ guard: 'isStaleReport' }, { actions: 'recordCursor' }],
    'stream.gap': [{ guard: 'isStaleReport' }, { actions: 'forwardGap' }],
    'stream.opened': { guard: 'isStaleReport' },
    'stream.ended': [{ guard: 'isStaleReport' }, { actions: ['settleEndedStream', 'persist'] }],
    'app.protocolVersion': { actions: 'rememberProtocolVersion' },
    'app.close': {
      target: '.closed',
      actions: [
        'stopAllStreams',
        { type: 'settleAllUnknown', params: { reason: OutcomeUnknownReason.transportClosed } },
        'rejectQueued',
        'deleteSession',
      ],
    },
  },
  states: {
    uninitialized: {
      entry: 'reportForeignRecord',
      always: { guard: 'hasRestoredSession', target: 'active', actions: ['resumeRestored', 'persist'] },
      on: {
        'app.send': [
          { guard: 'isInitialize', target: 'initializing', actions: 'startInitialize' },
          { guard: 'isRequestMessage', actions: 'rejectAfterEnd' },
        ],
      },
    },
    initializing: {
      on: {
        'stream.opened': { actions: 'adoptSession' },
        'stream.message': [
          { guard: 'isStaleReport' },
          {
            guard: and(['isInitAnswer', 'isInitAccepted']),
            target: 'active',
            actions: ['receive', 'persist', 'recordMessageCursor'],
          },
          { guard: 'isInitAnswer', target: 'uninitialized', actions: ['receive', 'recordMessageCursor'] },
          { actions: ['receive', 'recordMessageCursor'] },
        ],
        'stream.messages': { actions: 'receiveOneByOne' },
        'stream.ended': [
          { guard: 'isStaleReport' },
          {
            guard: 'initStreamFailed',
            target: 'uninitialized',
            actions: ['settleEndedStream', 'rejectQueued'],
          },
        ],
        'app.send': { actions: 'queueMessage' },
      },
    },
    active: {
      after: { sessionProven: { actions: 'forgetReinits' } },
      on: {
        'app.send': { actions: { type: 'dispatch', params: ({ event }) => ({ message: event.message }) } },
        'stream.message': { actions: ['receive', 'recordMessageCursor'] },
        'stream.messages': { actions: ['receive', 'recordMessageCursor'] },
        // A stale stream's answer is still delivered, as a stale `stream.message` is here.
        'stream.answered': [
          { guard: 'isStaleReport', actions: 'receive' },
          { actions: ['receive', 'endAnswered'] },
        ],
        'stream.ended': [
          { guard: 'isStaleReport' },
          {
            guard: and(['sessionTerminated', 'reinitsExhausted']),
            target: 'failed',
            actions: 'noteUnexecuted',
          },
          { guard: 'sessionTerminated', target: 'reinitializing', actions: 'noteUnexecuted' },
          { guard: 'closedByServer', target: 'terminated' },
        ],
      },
    },
    reinitializing: {
      // An atomic state (its value stays `reinitializing`): the initialize goes out at once, or after the
      // backoff `loseSession` chose.
      entry: ['stopAllStreams', 'loseSession', { type: 'spawnReinitialize', params: { now: true } }],
      after: { reinitDelay: { actions: { type: 'spawnReinitialize', params: { now: false } } } },
      on: {
        'stream.opened': { actions: 'adoptSession' },
        'stream.message': [
          { guard: 'isStaleReport' },
          {
            guard: 'isReinitAnswer',
            target: 'active',
            actions: ['completeReinitialize', 'persist', 'raiseMessageCursor'],
          },
          { guard: 'isReinitRejected', target: 'failed' },
          { actions: ['receive', 'recordMessageCursor'] },
        ],
        'stream.messages': { actions: 'receiveOneByOne' },
        'stream.ended': [{ guard: 'isStaleReport' }, { guard: 'reinitStreamFailed', target: 'failed' }],
        'app.send': { actions: 'queueMessage' },
      },
    },
    terminated: {
      entry: [
        'stopAllStreams',
        { type: 'settleAllUnknown', params: { reason: OutcomeUnknownReason.serverClosedSession } },
        'rejectQueued',
        'persist',
        'reportTerminated',
      ],
      on: { 'app.send': { actions: 'rejectAfterEnd' } },
    },
    /**
     * The session could not be re-established: its new initialize failed, or it kept being lost soon after
     * it was made (a server that 404s everything after initialize). Every call has ended; the transport
     * reports the failure (`MCPC_REINITIALIZE_GIVEN_UP`) and closes.
     */
    failed: {
      entry: [
        'stopAllStreams',
        { type: 'settleAllUnknown', params: { reason: OutcomeUnknownReason.sessionLost } },
        'rejectQueued',
        'forgetSession',
        'reportGivenUp',
      ],
      on: { 'app.send': { actions: 'rejectAfterEnd' } },
    },
    closed: { type: 'final' },
  },
});
