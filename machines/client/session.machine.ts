import { and } from 'xstate';
import { OutcomeUnknownReason } from '../codes.js';
import { type ClientEvent, initialClientContext } from './session-context.js';
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

type EventOf<T extends ClientEvent['type']> = Extract<ClientEvent, { type: T }>;

/** Event data handed to the actions as their params. */
const sent = ({ event }: { event: EventOf<'app.send'> }) => ({ message: event.message });
const opened = ({ event }: { event: EventOf<'stream.opened'> }) => ({
  sessionId: event.sessionId,
  advertisement: event.advertisement,
});
const streamKey = ({ event }: { event: { key: string } }) => ({ key: event.key });
const streamEnd = ({ event }: { event: EventOf<'stream.ended'> }) => ({
  key: event.key,
  outcome: event.outcome,
});

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
    'stream.answered': [
      { guard: 'isStaleReport' },
      { actions: ['receive', { type: 'endAnswered', params: streamKey }] },
    ],
    'stream.cursor': [{ guard: 'isStaleReport' }, { actions: 'recordCursor' }],
    'stream.gap': [{ guard: 'isStaleReport' }, { actions: 'forwardGap' }],
    'stream.opened': { guard: 'isStaleReport' },
    'stream.ended': [
      { guard: 'isStaleReport' },
      { actions: [{ type: 'settleEndedStream', params: streamEnd }, 'persist'] },
    ],
    'app.resume': { actions: { type: 'refuseResume', params: ({ event }) => ({ key: event.key }) } },
    'app.protocolVersion': {
      actions: { type: 'rememberProtocolVersion', params: ({ event }) => ({ version: event.version }) },
    },
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
          {
            guard: 'isInitialize',
            target: 'initializing',
            actions: { type: 'startInitialize', params: sent },
          },
          { guard: 'isRequestMessage', actions: { type: 'rejectAfterEnd', params: sent } },
        ],
      },
    },
    initializing: {
      on: {
        'stream.opened': { actions: { type: 'adoptSession', params: opened } },
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
            actions: [{ type: 'settleEndedStream', params: streamEnd }, 'rejectQueued'],
          },
        ],
        'app.send': [
          { guard: 'isReplay', actions: { type: 'rejectReplay', params: sent } },
          { actions: { type: 'queueMessage', params: sent } },
        ],
      },
    },
    active: {
      after: { sessionProven: { actions: 'forgetReinits' } },
      on: {
        'app.send': {
          actions: {
            type: 'dispatch',
            params: ({ event }) => ({ message: event.message, resumptionToken: event.resumptionToken }),
          },
        },
        'app.resume': {
          actions: {
            type: 'resumeForApp',
            params: ({ event }) => ({ key: event.key, lastEventId: event.lastEventId }),
          },
        },
        'stream.message': { actions: ['receive', 'recordMessageCursor'] },
        'stream.messages': { actions: ['receive', 'recordMessageCursor'] },
        // A stale stream's answer is still delivered, as a stale `stream.message` is here.
        'stream.answered': [
          { guard: 'isStaleReport', actions: 'receive' },
          { actions: ['receive', { type: 'endAnswered', params: streamKey }] },
        ],
        'stream.ended': [
          { guard: 'isStaleReport' },
          {
            guard: and(['sessionTerminated', 'reinitsExhausted']),
            target: 'failed',
            actions: { type: 'noteUnexecuted', params: streamEnd },
          },
          {
            guard: 'sessionTerminated',
            target: 'reinitializing',
            actions: { type: 'noteUnexecuted', params: streamEnd },
          },
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
        'stream.opened': { actions: { type: 'adoptSession', params: opened } },
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
        'app.send': [
          { guard: 'isReplay', actions: { type: 'rejectReplay', params: sent } },
          { actions: { type: 'queueMessage', params: sent } },
        ],
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
      on: { 'app.send': { actions: { type: 'rejectAfterEnd', params: sent } } },
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
      on: { 'app.send': { actions: { type: 'rejectAfterEnd', params: sent } } },
    },
    closed: { type: 'final' },
  },
});
