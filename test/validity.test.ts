import { describe, expect, it } from 'vitest';
import type { ReconnectPolicy } from '../machines/backoff.js';
import { assessContinuity, type ServerAdvertisement } from '../machines/validity.js';

const policy: ReconnectPolicy = {
  initialDelayMs: 100,
  maxDelayMs: 1_000,
  factor: 2,
  maxRetries: 3,
  jitter: 'full',
};
// worst case: 100 + 200 + 400 = 700 ms, plus stall detection.
const server: ServerAdvertisement = {
  retentionMs: 10_000,
  idleTtlMs: 60_000,
  gapSignalling: true,
  duplicateRequestProtection: true,
};

describe('assessContinuity (the design note conditions of validity)', () => {
  it('guaranteed: durable cursor, gap signalling, retention beyond the worst-case reconnect', () => {
    const a = assessContinuity({ policy, cursor: 'durable', server, stallTimeoutMs: 300 });
    expect(a).toEqual({
      level: 'guaranteed',
      worstCaseReconnectMs: 1_000,
      retentionMarginMs: 9_000,
      reasons: [],
      misconfigured: false,
    });
  });

  it('none: no cursor kept (condition 1 fails outright)', () => {
    expect(assessContinuity({ policy, cursor: 'none', server }).level).toBe('none');
  });

  it('best-effort: cursor only in memory', () => {
    const a = assessContinuity({ policy, cursor: 'memory', server });
    expect(a.level).toBe('best-effort');
    expect(a.reasons.join()).toMatch(/condition 1/);
    expect(a.misconfigured).toBe(false);
  });

  it('best-effort: a server that advertises nothing (the official SDK server)', () => {
    const a = assessContinuity({ policy, cursor: 'durable' });
    expect(a.level).toBe('best-effort');
    expect(a.reasons.join()).toMatch(/condition 3/);
    expect(a.reasons.join()).toMatch(/condition 2/);
  });

  it('best-effort and misconfigured: retention shorter than the worst-case reconnect', () => {
    const a = assessContinuity({ policy, cursor: 'durable', server: { ...server, retentionMs: 500 } });
    expect(a.level).toBe('best-effort');
    expect(a.retentionMarginMs).toBe(-200);
    expect(a.misconfigured).toBe(true);
  });

  it('best-effort and misconfigured: the session would expire while the client reconnects', () => {
    const a = assessContinuity({ policy, cursor: 'durable', server: { ...server, idleTtlMs: 700 } });
    expect(a.level).toBe('best-effort');
    expect(a.misconfigured).toBe(true);
  });

  it('the server retry floor counts towards the worst case', () => {
    expect(
      assessContinuity({ policy, cursor: 'durable', server, serverRetryMs: 5_000 }).worstCaseReconnectMs,
    ).toBe(15_000);
    expect(assessContinuity({ policy, cursor: 'durable', server, serverRetryMs: 5_000 }).level).toBe(
      'best-effort',
    );
  });
});
