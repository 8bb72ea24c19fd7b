import { assign, emit } from 'xstate';
import { clientSessionMachine } from '../machines/client/session.machine.js';
import { streamMachine } from '../machines/client/stream.machine.js';
import { parseEventId } from '../machines/event-id.js';
import { answerCursor, type ResumeAnswer } from '../machines/server/retention.js';
import { serverSessionMachine } from '../machines/server/session.machine.js';
import type { CheckName } from './checks.js';
import { CORRECT_CLIENT } from './world/client.js';
import type { WorldVariant } from './world/world.js';

/**
 * Deliberately wrong variants, built from the real machines by swapping one named implementation with
 * `provide`. The property suite must find a counterexample for each, or it proves nothing.
 */
export interface Mutant {
  readonly name: string;
  readonly variant: WorldVariant;
  /** The properties expected to catch it (at least one must). */
  readonly caughtBy: readonly CheckName[];
}

/** The design note's incident client: a reset is read as a dead session, and the call is sent again. */
const incidentClient: Mutant = {
  name: 'client that drops the session on a reset and re-sends the call',
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
};

/** A client that never keeps Last-Event-ID: every reconnect starts over. */
const noCursorClient: Mutant = {
  name: 'client that never persists Last-Event-ID',
  variant: {
    client: {
      ...CORRECT_CLIENT,
      name: 'no-cursor',
      streamMachine: streamMachine.provide({ actions: { recordCursor: assign({}) } }),
    },
  },
  caughtBy: ['no duplicate delivery', 'no unflagged loss'],
};

/** The design note's second incident: an evicted cursor silently resumes at the head. */
const headResumingServer: Mutant = {
  name: 'server that silently resumes at head on an evicted cursor',
  variant: {
    client: CORRECT_CLIENT,
    serverMachine: serverSessionMachine.provide({
      actions: {
        answerResume: emit(({ context, event }) => {
          const e = event as { lastEventId: string; window?: { head: number } };
          const cursor = parseEventId(e.lastEventId);
          const honest = answerCursor(e.lastEventId, {
            epoch: context.epoch,
            previousEpochs: context.previousEpochs,
            knownStreams: new Set(Object.keys(context.streams).map(Number)),
            window: e.window as never,
          });
          const answer: ResumeAnswer =
            honest.kind === 'gone' && cursor && e.window
              ? { kind: 'replay', stream: cursor.stream, afterSeq: e.window.head }
              : honest;
          return { type: 'decision.resume' as const, answer };
        }),
      },
    }),
  },
  caughtBy: ['no unflagged loss'],
};

export const MUTANTS: readonly Mutant[] = [incidentClient, noCursorClient, headResumingServer];
