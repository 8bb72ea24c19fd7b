import { describe, expect, it } from 'vitest';
import {
  afterUnauthorized,
  bearerError,
  challengeOf,
  decideChallenge,
  MAX_AUTHORIZATIONS,
  provesNotRun,
} from '../machines/client/authorization.js';

describe('authorization challenges (machines/client/authorization.ts)', () => {
  it('a 401 is a challenge; a 403 only with insufficient_scope (scope step-up); nothing else is', () => {
    expect(challengeOf(401, undefined)).toEqual({ status: 401, wwwAuthenticate: undefined });
    const stepUp = 'Bearer error="insufficient_scope", scope="mcp:write"';
    expect(challengeOf(403, stepUp)).toEqual({ status: 403, wwwAuthenticate: stepUp });
    expect(challengeOf(403, 'Bearer error="invalid_token"')).toBeUndefined();
    expect(challengeOf(403, undefined)).toBeUndefined();
    expect(challengeOf(400, 'Bearer error="insufficient_scope"')).toBeUndefined();
  });

  it('reads the Bearer error parameter, quoted or not, and only from a Bearer challenge', () => {
    expect(bearerError('Bearer realm="x", error="insufficient_scope"')).toBe('insufficient_scope');
    expect(bearerError('bearer error=invalid_token')).toBe('invalid_token');
    expect(bearerError('Basic error="insufficient_scope"')).toBeUndefined();
    expect(bearerError('Bearer resource_metadata="https://x/.well-known/oauth-protected-resource"')).toBe(
      undefined,
    );
  });

  it('a 401 or 403 (like a 404) proves the attempt never ran; other statuses do not', () => {
    for (const s of [401, 403, 404]) expect(provesNotRun(s)).toBe(true);
    for (const s of [200, 400, 409, 500, 503]) expect(provesNotRun(s)).toBe(false);
  });

  it('authorizes at most MAX_AUTHORIZATIONS times without progress, and only with a provider', () => {
    expect(decideChallenge({ providerConfigured: true, authorizations: 0 })).toBe('authorize');
    expect(decideChallenge({ providerConfigured: true, authorizations: MAX_AUTHORIZATIONS - 1 })).toBe(
      'authorize',
    );
    expect(decideChallenge({ providerConfigured: true, authorizations: MAX_AUTHORIZATIONS })).toBe(
      'unauthorized',
    );
    expect(decideChallenge({ providerConfigured: false, authorizations: 0 })).toBe('unauthorized');
  });

  it('without a token: a never-run request is rejected; a call that may have run, or a stream, waits', () => {
    expect(afterUnauthorized({ kind: 'request', hasCursor: false, mayHaveRun: false })).toBe('reject');
    expect(afterUnauthorized({ kind: 'message', hasCursor: false, mayHaveRun: true })).toBe('reject');
    expect(afterUnauthorized({ kind: 'request', hasCursor: true, mayHaveRun: true })).toBe('wait');
    expect(afterUnauthorized({ kind: 'request', hasCursor: false, mayHaveRun: true })).toBe('wait');
    expect(afterUnauthorized({ kind: 'standalone', hasCursor: false, mayHaveRun: false })).toBe('wait');
  });
});
