import type { AnyStateMachine } from 'xstate';
import { listenMachine } from './client/listen.machine.js';
import { modernCallMachine } from './client/modern-call.machine.js';
import { clientSessionMachine } from './client/session.machine.js';
import { streamMachine } from './client/stream.machine.js';
import { keyedRequestMachine } from './server/keyed-request.machine.js';
import { serverSessionMachine } from './server/session.machine.js';

/**
 * Every machine of the core, by the name its generated diagram is filed under (`docs/machines/<name>.md`).
 * Adding a machine here is all it takes for `npm run docs` to draw it and for the staleness test to guard it.
 */
export const machineCatalog: Record<string, AnyStateMachine> = {
  'client-session': clientSessionMachine,
  'client-stream': streamMachine,
  'server-session': serverSessionMachine,
  'client-call-modern': modernCallMachine,
  'client-listen-modern': listenMachine,
  'server-keyed-request-modern': keyedRequestMachine,
};
