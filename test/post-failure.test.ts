import { describe, expect, it } from 'vitest';
import { decidePostFailure, type PostFacts, type PostFailure } from '../machines/client/post-failure.js';
import { terminateAccepted } from '../machines/client/terminate-answer.js';
import { ReconnectReason } from '../machines/codes.js';

const none: PostFacts = { initialize: false, serverDeduplicates: false, readOnly: false };
const failure = (over: Partial<PostFailure>): PostFailure => ({
  reason: ReconnectReason.reset,
  kind: 'request',
  hasCursor: false,
  facts: none,
  ...over,
});
const mayHaveRun = [
  ReconnectReason.reset,
  ReconnectReason.timeout,
  ReconnectReason.stall,
  ReconnectReason.serverError,
  ReconnectReason.throttled,
];

describe('what happens when a POST fails (decidePostFailure)', () => {
  it('a refused connection never carried the request: always re-sent, call or notification', () => {
    for (const kind of ['request', 'message'] as const)
      expect(decidePostFailure(failure({ reason: ReconnectReason.refused, kind }))).toBe('resend');
  });

  it.each(mayHaveRun)('%s: a call with side effects is never re-sent; its outcome is unknown', (reason) => {
    expect(decidePostFailure(failure({ reason }))).toBe('outcome-unknown');
  });

  it.each(mayHaveRun)('%s: re-sent to a de-duplicating server, for a read, and for initialize', (reason) => {
    expect(decidePostFailure(failure({ reason, facts: { ...none, serverDeduplicates: true } }))).toBe(
      'resend',
    );
    expect(decidePostFailure(failure({ reason, facts: { ...none, readOnly: true } }))).toBe('resend');
    expect(decidePostFailure(failure({ reason, facts: { ...none, initialize: true } }))).toBe('resend');
  });

  it('a notification that may have arrived is never sent twice, whatever the server advertises', () => {
    const all: PostFacts = { initialize: false, serverDeduplicates: true, readOnly: true };
    expect(decidePostFailure(failure({ kind: 'message', facts: all }))).toBe('outcome-unknown');
  });

  it('a call whose stream delivered an event id is resumed, not re-sent', () => {
    for (const reason of [ReconnectReason.refused, ...mayHaveRun])
      expect(decidePostFailure(failure({ reason, hasCursor: true }))).toBe('resume');
  });

  it('a 401/403 never ran: once the provider has a token, a call or notification goes again, same id', () => {
    for (const kind of ['request', 'message'] as const)
      expect(decidePostFailure(failure({ reason: 'unauthorized', kind }))).toBe('resend');
  });

  it('a resume answered 401 resumes again with the same cursor once authorized, never re-sends', () => {
    expect(decidePostFailure(failure({ reason: 'unauthorized', hasCursor: true }))).toBe('resume');
  });
});

describe('the answer to terminateSession (terminateAccepted)', () => {
  it('a 2xx or a 405 (the server does not let clients end sessions) is done; anything else fails', () => {
    for (const status of [200, 202, 204, 405]) expect(terminateAccepted(status)).toBe(true);
    for (const status of [301, 400, 401, 404, 500, 503]) expect(terminateAccepted(status)).toBe(false);
  });
});
