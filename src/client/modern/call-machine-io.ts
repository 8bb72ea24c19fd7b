import type { Actor } from 'xstate';
import { modernCallMachine } from '../../../machines/client/modern-call.machine.js';
import type { GapDetails } from '../../../machines/decide.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../../machines/jsonrpc.js';
import { type AttemptIo, attemptExchange, type System } from './attempt-exchange.js';

/** What one call's machine touches: its attempts' I/O and its three outward actions. */
export interface CallIo {
  readonly attempt: AttemptIo;
  /** Hands one message to the application, in order (the machine's `deliver`). */
  readonly deliver: (message: JsonRpcMessage) => void;
  /** POSTs the extension's explicit cancel (the machine's `sendCancel`). */
  readonly sendCancel: (request: JsonRpcRequest) => void;
  /** Events were evicted on the server (the machine's `reportGap`). */
  readonly reportGap: (gap: GapDetails) => void;
}

/**
 * Each call's I/O, by its actor's system: every root actor has a system of its own, and the machine's
 * actions and its `exchange` child are both handed it, so one provided machine serves every call.
 */
const ios = new WeakMap<System, CallIo>();

const ioOf = (system: System): CallIo => {
  const io = ios.get(system);
  if (!io) throw new Error('a call machine started without its I/O (bindCallIo)');
  return io;
};

/**
 * `modernCallMachine` with the real world's implementations, provided ONCE. `provide` builds a new machine
 * (every state node again): per call that was ~150 µs of CPU, more than running the call's machine.
 * Start an actor of it only after `bindCallIo`.
 */
export const ioCallMachine = modernCallMachine.provide({
  actors: { exchange: attemptExchange((system) => ioOf(system).attempt) },
  actions: {
    deliver: ({ system }, { message }) => ioOf(system).deliver(message),
    sendCancel: ({ system }, { request }) => ioOf(system).sendCancel(request),
    reportGap: ({ system }, { gap }) => ioOf(system).reportGap(gap),
  },
});

/** Gives `actor` (of `ioCallMachine`, not started yet) its call's I/O. */
export function bindCallIo(actor: Actor<typeof ioCallMachine>, io: CallIo): void {
  ios.set(actor.system, io);
}
