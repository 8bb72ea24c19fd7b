import { describe, expect, it } from 'vitest';
import { RULES_2025 } from '../checks.js';
import { COMMON_CHECKS } from './common.js';
import type { CallTrace, Trace } from './trace.js';

/**
 * Each precise excuse, shown to fail on a hand-built record of the wrong behaviour (the bug planted in the
 * runtime would produce exactly this record), and to hold on the right one.
 */
const call = (over: Partial<CallTrace> = {}): CallTrace => ({
  key: 'c1',
  tool: 'charge',
  at: 10,
  resendable: false,
  outcomes: 1,
  abandoned: false,
  owners: ['i1'],
  ...over,
});

const trace = (over: Partial<Trace> = {}): Trace => ({
  calls: new Map(),
  executions: new Map(),
  sideEffects: new Map(),
  hung: [],
  sessionEnds: [],
  deaths: [],
  evictions: [],
  ...over,
});

const calls = (...cs: CallTrace[]) => new Map(cs.map((c) => [c.key, c]));

describe('"the server does not de-duplicate" excuses only a call that must not be re-sent', () => {
  const check = COMMON_CHECKS['re-sent when safe'];
  const unresumable = { outcome: 'unknown', reason: 'stream_unresumable', settledAt: 50 } as const;

  it('flags a read-only call that ended outcome unknown instead of being re-sent', () => {
    const t = trace({ calls: calls(call({ tool: 'lookup', resendable: true, ...unresumable })) });
    expect(check(t, RULES_2025)).toEqual([expect.stringMatching(/^c1 \(lookup\) .* allow a re-send/)]);
  });

  it('excuses a charge, and a read-only call made before the client knew the annotations', () => {
    const t = trace({
      calls: calls(call(unresumable), call({ key: 'c2', tool: 'lookup', resendable: false, ...unresumable })),
    });
    expect(check(t, RULES_2025)).toEqual([]);
  });
});

describe('an instance death excuses only the calls that instance owned', () => {
  const check = COMMON_CHECKS['deaths excuse only their own calls'];
  const lost = { outcome: 'unknown', reason: 'instance_lost', settledAt: 900 } as const;

  it('flags a call of a live instance ended because another instance died', () => {
    const t = trace({
      calls: calls(call({ owners: ['i2'], ...lost })),
      deaths: [{ instance: 'i1', at: 500 }],
    });
    expect(check(t, RULES_2025)).toEqual([expect.stringMatching(/^c1 .* no instance that ran it died/)]);
  });

  it('flags a call made after its owner died (the new incarnation is alive)', () => {
    const t = trace({ calls: calls(call({ at: 600, ...lost })), deaths: [{ instance: 'i1', at: 500 }] });
    expect(check(t, RULES_2025)).toHaveLength(1);
  });

  it('excuses a call whose owner died while it ran', () => {
    const t = trace({ calls: calls(call(lost)), deaths: [{ instance: 'i1', at: 500 }] });
    expect(check(t, RULES_2025)).toEqual([]);
  });
});

describe('a session ends only for a reason the server had, never expired while in use', () => {
  const check = COMMON_CHECKS['sessions end for a reason'];

  it('flags an expiry while a stream is attached, and an end for no known reason', () => {
    const t = trace({
      sessionEnds: [
        { sessionId: 's1', at: 100, cause: 'expired', inUse: 1 },
        { sessionId: 's2', at: 100, cause: 'tired', inUse: 0 },
      ],
    });
    expect(check(t, RULES_2025)).toEqual([
      expect.stringMatching(/^session s1 expired at 100 while in use/),
      expect.stringMatching(/^session s2 .* no reason a server has/),
    ]);
  });

  it('excuses an idle expiry, a DELETE and a shutdown while streams are attached', () => {
    const t = trace({
      sessionEnds: [
        { sessionId: 's1', at: 100, cause: 'expired', inUse: 0 },
        { sessionId: 's2', at: 100, cause: 'terminated', inUse: 2 },
        { sessionId: 's3', at: 100, cause: 'shutdown', inUse: 1 },
      ],
    });
    expect(check(t, RULES_2025)).toEqual([]);
  });
});

describe('a session expires only after going unused for its whole idle TTL', () => {
  const check = COMMON_CHECKS['expiry after the idle TTL'];
  const end = { at: 100, inUse: 0, idleTtlMs: 30_000 } as const;

  it('flags an expiry after less than the TTL unused', () => {
    const t = trace({ sessionEnds: [{ sessionId: 's1', cause: 'expired', unusedForMs: 15_000, ...end }] });
    expect(check(t, RULES_2025)).toEqual([expect.stringMatching(/^session s1 expired .* 15000 ms unused/)]);
  });

  it('excuses an expiry at the TTL, a DELETE at once, and an end whose idle clock is not known', () => {
    const t = trace({
      sessionEnds: [
        { sessionId: 's1', cause: 'expired', unusedForMs: 30_000, ...end },
        { sessionId: 's2', cause: 'terminated', unusedForMs: 0, ...end },
        { sessionId: 's3', cause: 'expired', at: 100, inUse: 0 },
      ],
    });
    expect(check(t, RULES_2025)).toEqual([]);
  });
});

describe('repeated 410s excuse nothing when the re-issue never advanced its cursor', () => {
  const check = COMMON_CHECKS['evictions advance the cursor'];

  it('flags a re-issue that carried the cursor the 410 refused', () => {
    const t = trace({
      evictions: [{ callKey: 'c1', at: 5, offered: 'k:0:7', sent: 'k:0:2', next: 'k:0:2' }],
    });
    expect(check(t, RULES_2025)).toEqual([expect.stringMatching(/^c1: after a 410 .* carried k:0:2/)]);
  });

  it('excuses a re-issue from the offered cursor, and a 410 after which the call ended', () => {
    const t = trace({
      evictions: [
        { callKey: 'c1', at: 5, offered: 'k:0:7', sent: 'k:0:2', next: 'k:0:7' },
        { callKey: 'c2', at: 5, offered: 'k:0:7', sent: null, next: undefined },
      ],
    });
    expect(check(t, RULES_2025)).toEqual([]);
  });
});

describe('a result is the real one: what the tool produced, its side effect landed exactly once', () => {
  const check = COMMON_CHECKS['honest errors'];
  const result = { outcome: 'result', settledAt: 50 } as const;

  it('flags a result whose text the tool did not produce, and a charge answered without landing once', () => {
    const t = trace({
      calls: calls(
        call({ key: 'c1', ...result, resultMismatch: '"charged c2", not "charged c1"' }),
        call({ key: 'c2', ...result, sideEffecting: true }),
        call({ key: 'c3', ...result }),
      ),
      sideEffects: new Map([['c3', 2]]),
    });
    expect(check(t, RULES_2025)).toEqual([
      'c1 (charge) answered "charged c2", not "charged c1"',
      'c2 (charge) answered with a result but ran 0 times',
      'c3 (charge) answered with a result but ran 2 times',
    ]);
  });

  it('holds for a real result of a charge that landed once, and a lookup with no side effect', () => {
    const t = trace({
      calls: calls(
        call({ key: 'c1', ...result, sideEffecting: true }),
        call({ key: 'c2', tool: 'lookup', ...result, sideEffecting: false }),
      ),
      sideEffects: new Map([['c1', 1]]),
    });
    expect(check(t, RULES_2025)).toEqual([]);
  });
});
