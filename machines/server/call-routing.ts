import { admitCaller, type PostedMessage } from './admission.js';
import { type ErrorReply, SESSION_NOT_FOUND } from './replies.js';

/**
 * Which session operation an admitted HTTP call is, once its body (POST) is admitted and its session
 * looked up. The runtime's handler and the simulated world's server both route here.
 */
export type CallRoute =
  | { readonly kind: 'create-session' }
  | { readonly kind: 'request' }
  | { readonly kind: 'accept' }
  | { readonly kind: 'delete' }
  | { readonly kind: 'standalone' }
  | { readonly kind: 'resume'; readonly lastEventId: string }
  /** No such session for this caller: 404. `resume` when it was a resume (counted by the metrics). */
  | { readonly kind: 'not-found'; readonly resume: boolean };

/** Whether the call is about an existing session (to look up) rather than creating one. */
export const namesSession = (method: string, posted: PostedMessage['kind'] | undefined): boolean =>
  !(method === 'POST' && posted === 'initialize');

export function routeCall(call: {
  readonly method: string;
  /** POST: what the admitted body is. */
  readonly posted?: PostedMessage['kind'];
  /** The session the call names exists and belongs to the caller (looked up when {@link namesSession}). */
  readonly sessionFound: boolean;
  readonly lastEventId: string | null;
}): CallRoute {
  if (!namesSession(call.method, call.posted)) return { kind: 'create-session' };
  if (!call.sessionFound) {
    return { kind: 'not-found', resume: call.method === 'GET' && call.lastEventId !== null };
  }
  if (call.method === 'POST') return { kind: call.posted === 'request' ? 'request' : 'accept' };
  if (call.method === 'DELETE') return { kind: 'delete' };
  return call.lastEventId === null
    ? { kind: 'standalone' }
    : { kind: 'resume', lastEventId: call.lastEventId };
}

/**
 * A call reached a session that ended while it was on its way: gone (404), or released by a stopping
 * process (durable log), which answers as it answers every call while it stops (`admitCaller`).
 */
export function sessionUnavailable(released: boolean): ErrorReply {
  const caller = admitCaller({ stopping: released, authRequired: false, authenticated: true });
  return caller.ok
    ? SESSION_NOT_FOUND
    : { status: caller.status, code: caller.code, message: caller.message };
}
