/**
 * What a stream does when the server asks for authorization (a 401, or a 403 `insufficient_scope`). An
 * expired or missing token is a fact about the transport: it never ends the session, never loses an
 * event, and never makes a call's outcome unknown. The server refused the request before it reached the
 * session, so it did not run: once the application's `OAuthClientProvider` has a token, the same request
 * goes again (the same JSON-RPC id, or the same `Last-Event-ID`), see the unauthorized row of
 * `decidePostFailure` (post-failure.ts).
 *
 * The authorization itself (discovery, registration, PKCE, refresh, scope step-up) is the SDK's `auth()`,
 * run by the runtime; this module only decides when to ask for it and what its result means.
 */

/** A challenge the server sent: the status and its `WWW-Authenticate` header. */
export interface AuthChallenge {
  readonly status: 401 | 403;
  readonly wwwAuthenticate?: string;
}

/**
 * What the runtime's authorization (the SDK's `auth()`) came to. `authorized`: the provider has a token to
 * send. `needs-user`: the provider was sent to the authorization page (`redirectToAuthorization`); only
 * the application's `finishAuth(code)` can go on. `failed`: it threw (or there is no provider).
 */
export type AuthorizationResult = 'authorized' | 'needs-user' | 'failed';

/**
 * Authorizations a stream may run without progress in between (a message delivered, an event id moved):
 * the first answers an expired token (a refresh), the second a token the server still refuses (a fresh
 * authorization, or a scope step-up). A server that refuses every token gets no more: no 401 loop.
 */
export const MAX_AUTHORIZATIONS = 2;

/** The `error` parameter of a Bearer `WWW-Authenticate` header (RFC 6750 §3), if it has one. */
export function bearerError(wwwAuthenticate: string | undefined): string | undefined {
  if (!wwwAuthenticate || !/^\s*bearer\b/i.test(wwwAuthenticate)) return undefined;
  return /(?:^|[\s,])error\s*=\s*"?([^",\s]+)"?/i.exec(wwwAuthenticate)?.[1];
}

/**
 * The challenge in a response, if it is one: any 401, and a 403 whose Bearer error is
 * `insufficient_scope` (a scope step-up, as the SDK transport does). Any other 403 is a plain refusal.
 */
export function challengeOf(status: number, wwwAuthenticate: string | undefined): AuthChallenge | undefined {
  if (status === 401) return { status, wwwAuthenticate };
  if (status === 403 && bearerError(wwwAuthenticate) === 'insufficient_scope')
    return { status, wwwAuthenticate };
  return undefined;
}

/**
 * A 401 or 403 proves the attempt did not run: authorization is checked before a request reaches its
 * session (as a 404 proves it, and unlike any other status).
 */
export function provesNotRun(status: number): boolean {
  return status === 401 || status === 403 || status === 404;
}

/** What a stream knows when a challenge arrives. */
export interface ChallengeFacts {
  /** The application handed the transport an `authProvider`. */
  readonly providerConfigured: boolean;
  /** Authorizations this stream ran since it last made progress. */
  readonly authorizations: number;
}

/**
 * `authorize`: run the provider's authorization, then send the same request again. `unauthorized`: no
 * provider, or the bound is reached; the stream does what `afterUnauthorized` says.
 */
export function decideChallenge(facts: ChallengeFacts): 'authorize' | 'unauthorized' {
  return facts.providerConfigured && facts.authorizations < MAX_AUTHORIZATIONS ? 'authorize' : 'unauthorized';
}

/** What a stream knows when authorization could not give it a token. */
export interface UnauthorizedFacts {
  readonly kind: 'request' | 'standalone' | 'message';
  /** The stream has an event id: it carries a call that ran (or the standalone stream's events). */
  readonly hasCursor: boolean;
  /** Some earlier attempt of this stream may have reached the session. */
  readonly mayHaveRun: boolean;
}

/**
 * `reject`: the request (or notification) provably never ran and there is no stream to keep: it ends with
 * the SDK's `UnauthorizedError` (as the SDK transport's `send` does), and the application may send it again
 * after `finishAuth`. `wait`: the stream carries a call that may have run, or the standalone stream: it waits,
 * unchanged, for the application's `finishAuth(code)` and then resumes (same Last-Event-ID) or re-sends (same
 * id); its call stays answerable instead of ending as outcome unknown. (Without a provider a challenge is
 * not one: the status is an error like any other, -32053, as before.)
 */
export function afterUnauthorized(facts: UnauthorizedFacts): 'reject' | 'wait' {
  if (facts.kind === 'message') return 'reject';
  if (facts.kind === 'request' && !facts.hasCursor && !facts.mayHaveRun) return 'reject';
  return 'wait';
}

/**
 * What one run of the SDK's `auth()` means to the stream machine: `AUTHORIZED` (a token is ready, the
 * request goes again), a redirect (the user must authorize: the stream waits), or a throw (`failed`).
 */
export function authorizationResultOf(sdk: 'AUTHORIZED' | 'REDIRECT' | 'threw'): AuthorizationResult {
  return sdk === 'AUTHORIZED' ? 'authorized' : sdk === 'REDIRECT' ? 'needs-user' : 'failed';
}
