import { describe, expect, it } from 'vitest';
import { JsonRpcCode } from '../../machines/codes.js';
import {
  type AdmissionPolicy,
  admitHttp,
  hostAllowed,
  hostName,
  mediaType,
} from '../../machines/server/admission.js';
import {
  admitNewSession,
  DEFAULT_SERVER_LIMITS,
  resolveLimits,
  tooManyOpenRequests,
} from '../../machines/server/limits.js';

const policy: AdmissionPolicy = { maxBodyBytes: 1024 };
const post = {
  method: 'POST',
  accept: 'application/json, text/event-stream',
  contentType: 'application/json',
  origin: null,
  host: 'localhost:3000',
  protocolVersion: null,
  sessionId: null,
  localBind: true,
};

describe('Host and Content-Type are read exactly', () => {
  it.each([
    ['localhost:3000', 'localhost'],
    ['[::1]:8080', '[::1]'],
    ['127.0.0.1', '127.0.0.1'],
    ['my_service:80', 'my_service'],
    ['[::1]evil', undefined],
    ['127.0.0.1:abc', undefined],
    ['127.0.0.1:99999', undefined],
    ['localhost:3000/x', undefined],
    ['a b', undefined],
    ['', undefined],
  ])('hostName(%j) = %j', (host, name) => {
    expect(hostName(host)).toBe(name);
  });

  it('a loopback bind takes loopback names only, exactly', () => {
    for (const host of ['localhost:1', '127.0.0.1:1', '[::1]:1', 'LOCALHOST:1']) {
      expect(hostAllowed(host, policy, true)).toBe(true);
    }
    for (const host of ['[::1]evil', 'localhost.evil', '127.0.0.1evil', '127.0.0.1.evil:1', null]) {
      expect(hostAllowed(host, policy, true)).toBe(false);
    }
  });

  it('a malformed Host is 400 before anything else; a foreign one 403', () => {
    expect(admitHttp({ ...post, host: '127.0.0.1:abc' }, policy)).toMatchObject({
      status: 400,
      reason: 'malformed_host',
    });
    expect(admitHttp({ ...post, host: 'localhost.evil' }, policy)).toMatchObject({ status: 403 });
    // Not on a loopback bind, any well-formed Host is taken, and a missing one (HTTP/1.0) too.
    expect(admitHttp({ ...post, host: 'example.com', localBind: false }, policy)).toEqual({ ok: true });
    expect(admitHttp({ ...post, host: null, localBind: false }, policy)).toEqual({ ok: true });
  });

  it('Content-Type: the media type must be application/json; parameters are fine', () => {
    expect(mediaType('Application/JSON; charset=utf-8')).toBe('application/json');
    expect(admitHttp({ ...post, contentType: 'application/json; charset=utf-8' }, policy)).toEqual({
      ok: true,
    });
    for (const contentType of ['application/jsonfoo', 'application/json-seq', 'text/plain', null]) {
      expect(admitHttp({ ...post, contentType }, policy)).toMatchObject({ status: 415 });
    }
  });
});

describe('limits', () => {
  it('defaults, and options that override them', () => {
    expect(resolveLimits()).toEqual(DEFAULT_SERVER_LIMITS);
    expect(resolveLimits({ maxSessions: 5, retryAfterSeconds: 0 })).toMatchObject({
      maxSessions: 5,
      retryAfterSeconds: 0,
    });
    expect(() => resolveLimits({ maxJsonDepth: 0 })).toThrow(RangeError);
    expect(() => resolveLimits({ maxSessionsPerPrincipal: Number.NaN })).toThrow(RangeError);
  });

  it('a full server answers 503, a principal over its share 429; both with Retry-After', () => {
    const limits = resolveLimits({ maxSessions: 10, maxSessionsPerPrincipal: 3, retryAfterSeconds: 9 });
    expect(admitNewSession({ sessions: 9, sessionsOfPrincipal: 2 }, limits)).toEqual({ ok: true });
    expect(admitNewSession({ sessions: 10, sessionsOfPrincipal: 0 }, limits)).toMatchObject({
      ok: false,
      status: 503,
      code: JsonRpcCode.LIMIT_EXCEEDED,
      reason: 'max_sessions',
      retryAfterSeconds: 9,
    });
    expect(admitNewSession({ sessions: 5, sessionsOfPrincipal: 3 }, limits)).toMatchObject({
      status: 429,
      reason: 'max_sessions_per_principal',
    });
    expect(tooManyOpenRequests(limits)).toMatchObject({ status: 429, reason: 'max_open_request_streams' });
  });
});
