import { describe, expect, it } from 'vitest';
import { classifyClose, gapFromBody } from '../machines/decide.js';

/** The design note's decision boundary, row by row. */
describe('classifyClose', () => {
  /** @spec design-note "Connection reset / timeout / 5xx → reconnect with Last-Event-ID" */
  it.each(['reset', 'timeout', 'stall', 'refused'] as const)('network %s → reconnect', (fault) => {
    expect(classifyClose({ kind: 'network', fault })).toEqual({ action: 'reconnect', reason: fault });
  });

  it.each([500, 502, 503, 504, 599])('HTTP %i → reconnect (server error)', (status) => {
    expect(classifyClose({ kind: 'http-status', status })).toEqual({
      action: 'reconnect',
      reason: 'server_error',
    });
  });

  it.each([408, 425, 429])('HTTP %i → reconnect (throttled), not a session fact', (status) => {
    expect(classifyClose({ kind: 'http-status', status })).toEqual({
      action: 'reconnect',
      reason: 'throttled',
    });
  });

  /** @spec transports#resumability-and-redelivery — a closed connection is polling, not termination */
  it('end of stream without a close event → reconnect', () => {
    expect(classifyClose({ kind: 'end-of-stream' })).toEqual({
      action: 'reconnect',
      reason: 'end_of_stream',
    });
  });

  /** @spec transports#session-management item 4: 404 → start a new session */
  it('404 → session terminated', () => {
    expect(classifyClose({ kind: 'http-status', status: 404 })).toEqual({ action: 'session-terminated' });
  });

  it.each([409, 410])('HTTP %i → events lost, with the server details', (status) => {
    const body = {
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32052,
        message: 'x',
        data: {
          reason: 'resume_window_exceeded',
          requestedId: 'e1-1-3',
          oldestId: 'e1-1-10',
          headId: 'e1-1-14',
          lostCount: 6,
          resumeAfter: 'e1-1-9',
          streamComplete: false,
        },
      },
    };
    expect(classifyClose({ kind: 'http-status', status, body })).toEqual({
      action: 'events-lost',
      gap: {
        reason: 'resume_window_exceeded',
        requestedId: 'e1-1-3',
        oldestId: 'e1-1-10',
        headId: 'e1-1-14',
        lostCount: 6,
        resumeAfter: 'e1-1-9',
        streamComplete: false,
      },
    });
  });

  it('a 409 that reports no loss is a conflict (the SDK server still holds the old connection): reconnect', () => {
    const body = {
      jsonrpc: '2.0',
      id: null,
      error: { code: -32000, message: 'Conflict: Stream already has an active connection' },
    };
    expect(classifyClose({ kind: 'http-status', status: 409, body })).toEqual({
      action: 'reconnect',
      reason: 'conflict',
    });
    expect(classifyClose({ kind: 'http-status', status: 409 })).toEqual({
      action: 'reconnect',
      reason: 'conflict',
    });
  });

  it('a 410 without a body is still a gap, of unknown size', () => {
    expect(gapFromBody(undefined)).toEqual({
      reason: 'resume_window_exceeded',
      requestedId: undefined,
      oldestId: undefined,
      headId: undefined,
      lostCount: null,
      resumeAfter: undefined,
      streamComplete: false,
    });
    expect(gapFromBody({ error: { data: { lostCount: -1 } } }).lostCount).toBeNull();
    expect(gapFromBody({ error: { data: { lostCount: 1.5 } } }).lostCount).toBeNull();
  });

  it('event: close → stop', () => {
    expect(classifyClose({ kind: 'close-event', reason: 'terminated' })).toEqual({
      action: 'stop',
      reason: 'close_event',
    });
  });

  it('204 and 405 → stop (EventSource semantics; no standalone stream offered)', () => {
    expect(classifyClose({ kind: 'http-status', status: 204 })).toEqual({
      action: 'stop',
      reason: 'no_content',
    });
    expect(classifyClose({ kind: 'http-status', status: 405 })).toEqual({
      action: 'stop',
      reason: 'not_offered',
    });
  });

  it.each([400, 401, 403, 406, 413, 418, 302, 200])(
    'HTTP %i → refuse to guess, with status and body',
    (status) => {
      expect(classifyClose({ kind: 'http-status', status, body: 'why' })).toEqual({
        action: 'refuse',
        status,
        body: 'why',
      });
    },
  );

  it('is total: every status from 100 to 599 gets exactly one decision', () => {
    for (let status = 100; status < 600; status++) {
      const d = classifyClose({ kind: 'http-status', status });
      expect(['reconnect', 'session-terminated', 'events-lost', 'stop', 'refuse']).toContain(d.action);
    }
  });
});

describe('admitCaller', () => {
  it('a stopping server answers 503 before anything else; an unknown caller 401', async () => {
    const { admitCaller } = await import('../machines/server/admission.js');
    expect(admitCaller({ stopping: true, authRequired: true, authenticated: false })).toMatchObject({
      ok: false,
      status: 503,
    });
    expect(admitCaller({ stopping: false, authRequired: true, authenticated: false })).toMatchObject({
      ok: false,
      status: 401,
    });
    expect(admitCaller({ stopping: false, authRequired: true, authenticated: true })).toEqual({ ok: true });
    expect(admitCaller({ stopping: false, authRequired: false, authenticated: false })).toEqual({ ok: true });
  });
});
