/** The pure core: machines and decision functions. Imports nothing but xstate. */
export * from './advertisement.js';
export * from './backoff.js';
export * from './client/cursor.js';
export type { Exchange, IoEvent, NetworkFault } from './client/io.js';
export * from './client/ledger.js';
export * from './client/session.machine.js';
export * from './client/stream.machine.js';
export * from './codes.js';
export * from './decide.js';
export * from './event-id.js';
export * from './jsonrpc.js';
export * from './server/admission.js';
export * from './server/limits.js';
export * from './server/message-shape.js';
export * from './server/retention.js';
export * from './server/routing.js';
export * from './server/session.machine.js';
export * from './validity.js';
