import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import {
  caseOf,
  DEFAULT_MODERN_CALL_POLICY,
  decideModernCallEnd,
  keysCall,
  MODERN_CALL_DECISION_TABLE,
  type ModernCallCase,
  type ModernCallContext,
  type ModernCallDecision,
  type ModernCallPolicy,
  type ModernCallRow,
  type ModernCallStreamEnd,
  mayHaveRun,
  safeReissueBasis,
} from '../machines/client/modern-call-decide.js';
import { ContinuityErrorCode } from '../machines/continuity-extension.js';

const err = (code: number, data?: unknown) => ({
  jsonrpc: '2.0',
  id: 1,
  error: { code, message: 'x', data },
});
const status = (s: number, body?: unknown, retryAfterMs?: number): ModernCallStreamEnd => ({
  kind: 'http-status',
  status: s,
  body,
  retryAfterMs,
});
const evictedData = {
  reason: 'resume_window_exceeded',
  lostCount: 7,
  resumeAfter: 'k1-1-9',
  streamComplete: false,
};

/** One observed end per row of the table. A `Record`, so a row added without an example fails to compile. */
const EXAMPLE: Record<ModernCallCase, ModernCallStreamEnd> = {
  refused: { kind: 'refused' },
  'cut-before-response': { kind: 'cut-before-response' },
  'cut-mid-stream': { kind: 'cut-mid-stream' },
  'ended-without-answer': { kind: 'ended-without-answer' },
  stalled: { kind: 'stalled' },
  'cancelled-by-application': { kind: 'cancelled-by-application' },
  'result-complete': { kind: 'result', resultType: 'complete' },
  'result-input-required': { kind: 'result', resultType: 'input_required' },
  'error-response': { kind: 'error-response', code: -32602 },
  'malformed-response': { kind: 'malformed-response' },
  'ext-key-reused': status(409, err(ContinuityErrorCode.KEY_REUSED)),
  'ext-events-evicted': status(410, err(ContinuityErrorCode.EVENTS_EVICTED, evictedData)),
  'ext-outcome-unknown': { kind: 'error-response', code: ContinuityErrorCode.OUTCOME_UNKNOWN },
  'ext-cancelled': { kind: 'error-response', code: ContinuityErrorCode.CANCELLED },
  '400-header-mismatch': status(400, err(-32020)),
  '400-unsupported-version': status(400, err(-32022, { supported: ['2026-07-28'] })),
  '400-missing-capability': status(400, err(-32021)),
  '400-other': status(400),
  '401': status(401),
  '403': status(403),
  '404-method-not-found': status(404, err(-32601)),
  '404-other': status(404, 'Not Found'),
  '405': status(405),
  '406': status(406),
  '413': status(413),
  '415': status(415),
  '429': status(429, undefined, 2_000),
  '503': status(503, undefined, 5_000),
  '503-no-retry-after': status(503),
  '500': status(500),
  '502-504': status(504),
  'other-4xx': status(422),
  'other-5xx': status(507),
  'unexpected-status': status(303),
};

const base: ModernCallContext = {
  attempts: 0,
  mayHaveRunBefore: false,
  elapsedMs: 1_000,
  jitterSeed: 42,
};
/** A charge: no annotations, no extension. */
const plain = base;
const readOnly: ModernCallContext = { ...base, tool: { readOnlyHint: true } };
const keyed: ModernCallContext = {
  ...base,
  extension: { memoWindowMs: 86_400_000 },
  idempotencyKey: 'k-1',
  lastEventId: 'k1-1-4',
};

type Expect = ModernCallDecision['action'];
/**
 * Row by row: the action for a non-idempotent call without the extension, for a read-only tool, and for a
 * keyed call through the extension. The `why` of each is the comment on its row in the table.
 */
const ROWS: Array<[ModernCallCase, Expect, Expect, Expect]> = [
  ['refused', 'backoff-reissue', 'backoff-reissue', 'backoff-reissue'],
  ['cut-before-response', 'outcome-unknown', 'reissue', 'reissue'],
  ['cut-mid-stream', 'outcome-unknown', 'reissue', 'reissue'],
  ['ended-without-answer', 'outcome-unknown', 'reissue', 'reissue'],
  ['stalled', 'outcome-unknown', 'reissue', 'reissue'],
  ['cancelled-by-application', 'outcome-unknown', 'outcome-unknown', 'outcome-unknown'],
  ['result-complete', 'deliver', 'deliver', 'deliver'],
  ['result-input-required', 'deliver', 'deliver', 'deliver'],
  ['error-response', 'deliver', 'deliver', 'deliver'],
  ['malformed-response', 'outcome-unknown', 'reissue', 'reissue'],
  ['ext-key-reused', 'fail', 'fail', 'fail'],
  // Without the extension no key was sent, so the 410 is a plain refusal.
  ['ext-events-evicted', 'fail', 'fail', 'reissue'],
  ['ext-outcome-unknown', 'outcome-unknown', 'outcome-unknown', 'outcome-unknown'],
  ['ext-cancelled', 'outcome-unknown', 'outcome-unknown', 'outcome-unknown'],
  ['400-header-mismatch', 'fail', 'fail', 'fail'],
  ['400-unsupported-version', 'fail', 'fail', 'fail'],
  ['400-missing-capability', 'fail', 'fail', 'fail'],
  ['400-other', 'fail', 'fail', 'fail'],
  ['401', 'fail', 'fail', 'fail'],
  ['403', 'fail', 'fail', 'fail'],
  ['404-method-not-found', 'fail', 'fail', 'fail'],
  ['404-other', 'fail', 'fail', 'fail'],
  ['405', 'fail', 'fail', 'fail'],
  ['406', 'fail', 'fail', 'fail'],
  ['413', 'fail', 'fail', 'fail'],
  ['415', 'fail', 'fail', 'fail'],
  ['429', 'backoff-reissue', 'backoff-reissue', 'backoff-reissue'],
  ['503', 'backoff-reissue', 'backoff-reissue', 'backoff-reissue'],
  // A proxy's 503 (no Retry-After) may follow a reset after it forwarded the request: as a gateway error.
  ['503-no-retry-after', 'outcome-unknown', 'backoff-reissue', 'backoff-reissue'],
  ['500', 'outcome-unknown', 'backoff-reissue', 'backoff-reissue'],
  ['502-504', 'outcome-unknown', 'backoff-reissue', 'backoff-reissue'],
  ['other-4xx', 'fail', 'fail', 'fail'],
  ['other-5xx', 'outcome-unknown', 'backoff-reissue', 'backoff-reissue'],
  ['unexpected-status', 'outcome-unknown', 'outcome-unknown', 'outcome-unknown'],
];

describe('stateless decision table (2026-07-28), one test per row', () => {
  it('every row of the table has a test below, and every example lands on its row', () => {
    expect(ROWS.map(([c]) => c).sort()).toEqual(Object.keys(MODERN_CALL_DECISION_TABLE).sort());
    for (const [c, end] of Object.entries(EXAMPLE)) expect(caseOf(end)).toBe(c);
  });

  it.each(ROWS)('%s → plain: %s, read-only: %s, keyed: %s', (c, forPlain, forReadOnly, forKeyed) => {
    const end = EXAMPLE[c];
    const row = MODERN_CALL_DECISION_TABLE[c];
    const plainD = decideModernCallEnd(end, plain);
    expect(plainD.action).toBe(forPlain);
    expect(plainD.reason).toBe(row.reason);
    expect(decideModernCallEnd(end, readOnly).action).toBe(forReadOnly);
    const keyedD = decideModernCallEnd(end, keyed);
    expect(keyedD.action).toBe(forKeyed);
    // A re-issue through the extension always carries the key; one without it never does.
    if (keyedD.action === 'reissue' || keyedD.action === 'backoff-reissue') {
      expect(keyedD.newRequestId).toBe(true);
      expect(keyedD.carry?.idempotencyKey).toBe('k-1');
    }
    if (plainD.action === 'reissue' || plainD.action === 'backoff-reissue')
      expect(plainD.carry).toBeUndefined();
  });
});

describe('the details of a decision', () => {
  it('a cut with the extension re-issues at once with the same key and the last event id seen', () => {
    expect(decideModernCallEnd({ kind: 'cut-mid-stream' }, keyed)).toEqual({
      action: 'reissue',
      reason: 'cut_mid_stream',
      newRequestId: true,
      delayMs: 0,
      carry: { idempotencyKey: 'k-1', lastEventId: 'k1-1-4' },
    });
    // Nothing seen yet: the re-issue says so with null, which still marks it as a re-issue.
    const { lastEventId: _, ...nothingSeen } = keyed;
    const d = decideModernCallEnd({ kind: 'cut-before-response' }, nothingSeen);
    expect(d.action === 'reissue' && d.carry).toEqual({ idempotencyKey: 'k-1', lastEventId: null });
  });

  it('a second re-issue after a cut backs off instead of hammering', () => {
    const d = decideModernCallEnd({ kind: 'cut-mid-stream' }, { ...readOnly, attempts: 1 });
    expect(d.action).toBe('backoff-reissue');
  });

  it('without a safe basis the charge ends as outcome unknown, with its key when it had one', () => {
    const keyWithoutExtension = { ...plain, idempotencyKey: 'k-9' };
    expect(decideModernCallEnd({ kind: 'cut-mid-stream' }, keyWithoutExtension)).toEqual({
      action: 'outcome-unknown',
      reason: 'cut_mid_stream',
    });
    expect(
      decideModernCallEnd({ kind: 'error-response', code: ContinuityErrorCode.OUTCOME_UNKNOWN }, keyed),
    ).toEqual({ action: 'outcome-unknown', reason: 'server_outcome_unknown', idempotencyKey: 'k-1' });
  });

  it('the re-issue budget: an open outcome ends unknown, a never-sent request fails definitely', () => {
    const spent = { ...readOnly, attempts: DEFAULT_MODERN_CALL_POLICY.maxReissues };
    expect(decideModernCallEnd({ kind: 'stalled' }, spent)).toEqual({
      action: 'outcome-unknown',
      reason: 'reissue_given_up',
    });
    expect(decideModernCallEnd({ kind: 'refused' }, spent)).toEqual({
      action: 'fail',
      reason: 'unreachable',
    });
    expect(decideModernCallEnd(status(503, undefined, 1_000), spent)).toEqual({
      action: 'fail',
      reason: 'unavailable',
      status: 503,
    });
    // Without Retry-After the 503 may have followed the request: the spent budget is outcome unknown.
    expect(decideModernCallEnd(status(503), spent).action).toBe('outcome-unknown');
  });

  it('after an attempt that may have run, a later refusal is outcome unknown, not a definite failure', () => {
    const after = { ...keyed, attempts: 2, mayHaveRunBefore: true };
    expect(decideModernCallEnd(status(401), after)).toEqual({
      action: 'outcome-unknown',
      reason: 'unauthorized',
      idempotencyKey: 'k-1',
    });
    const spent = { ...after, attempts: DEFAULT_MODERN_CALL_POLICY.maxReissues };
    expect(decideModernCallEnd({ kind: 'refused' }, spent).action).toBe('outcome-unknown');
  });

  it('past the memo window a keyed re-issue is no longer safe: outcome unknown', () => {
    const late = { ...keyed, elapsedMs: 86_400_000 - DEFAULT_MODERN_CALL_POLICY.memoMarginMs };
    expect(decideModernCallEnd({ kind: 'cut-mid-stream' }, late)).toEqual({
      action: 'outcome-unknown',
      reason: 'memo_window_passed',
      idempotencyKey: 'k-1',
    });
    expect(
      decideModernCallEnd({ kind: 'cut-mid-stream' }, { ...late, elapsedMs: late.elapsedMs - 1 }).action,
    ).toBe('reissue');
  });

  it('Retry-After is a floor on the backoff', () => {
    const d = decideModernCallEnd(status(429, undefined, 7_000), plain);
    expect(d.action === 'backoff-reissue' && d.delayMs).toBe(7_000);
  });

  it('a Retry-After longer than the longest backoff fails now (nothing ran), or is unknown if an attempt ran', () => {
    const long = status(429, undefined, DEFAULT_MODERN_CALL_POLICY.backoff.maxDelayMs + 1);
    expect(decideModernCallEnd(long, plain)).toMatchObject({ action: 'fail', reason: 'throttled' });
    expect(decideModernCallEnd(long, { ...plain, mayHaveRunBefore: true }).action).toBe('outcome-unknown');
    const atMost = status(503, undefined, DEFAULT_MODERN_CALL_POLICY.backoff.maxDelayMs);
    expect(decideModernCallEnd(atMost, plain).action).toBe('backoff-reissue');
  });

  it('header mismatch: fail at once (nothing ran; the SDK refreshes and sends again with new headers)', () => {
    const end = EXAMPLE['400-header-mismatch'];
    expect(decideModernCallEnd(end, plain)).toEqual({
      action: 'fail',
      reason: 'header_mismatch',
      status: 400,
      code: -32020,
    });
    // After an attempt that may have run, a refusal says nothing about that attempt.
    expect(decideModernCallEnd(end, { ...plain, mayHaveRunBefore: true }).action).toBe('outcome-unknown');
  });

  it('found by the 2026 model: a keyed re-issue refused -32020 after a cut still fails at once (nothing ran under the key), so the SDK refreshes and sends it again', () => {
    // The refused attempt's 400 was lost; the re-issue under the same key started over (the key was
    // `refused`) and the SDK refused its same stale headers again. A key that ran is answered from the
    // memo, never by the SDK's checks: outcome unknown here would be spurious and stop the SDK's recovery.
    const end = EXAMPLE['400-header-mismatch'];
    expect(decideModernCallEnd(end, { ...keyed, attempts: 1, mayHaveRunBefore: true })).toEqual({
      action: 'fail',
      reason: 'header_mismatch',
      status: 400,
      code: -32020,
    });
  });

  it('an evicted resume re-issues from the oldest retained event and reports the exact gap', () => {
    const d = decideModernCallEnd(EXAMPLE['ext-events-evicted'], keyed);
    expect(d).toMatchObject({
      action: 'reissue',
      reason: 'events_evicted',
      carry: { idempotencyKey: 'k-1', lastEventId: 'k1-1-9' },
      gap: { lostCount: 7, resumeAfter: 'k1-1-9' },
    });
  });

  it('an application cancel through the extension is sent explicitly (closing is not cancelling there)', () => {
    expect(decideModernCallEnd({ kind: 'cancelled-by-application' }, keyed)).toEqual({
      action: 'outcome-unknown',
      reason: 'cancelled_by_application',
      idempotencyKey: 'k-1',
      sendExplicitCancel: true,
    });
    expect(decideModernCallEnd({ kind: 'cancelled-by-application' }, plain)).toEqual({
      action: 'outcome-unknown',
      reason: 'cancelled_by_application',
    });
  });

  it('a read-only tool is still re-issued past the memo window, as a fresh request without the key', () => {
    const late = { ...keyed, tool: { readOnlyHint: true }, elapsedMs: 86_400_000 };
    expect(decideModernCallEnd({ kind: 'cut-mid-stream' }, late)).toEqual({
      action: 'reissue',
      reason: 'cut_mid_stream',
      newRequestId: true,
      delayMs: 0,
    });
  });

  it('untrusted annotations make nothing safe; idempotentHint alone does', () => {
    const untrusting = { ...DEFAULT_MODERN_CALL_POLICY, trustToolAnnotations: false };
    expect(decideModernCallEnd({ kind: 'cut-mid-stream' }, readOnly, untrusting).action).toBe(
      'outcome-unknown',
    );
    const idempotent = { ...base, tool: { readOnlyHint: false, idempotentHint: true } };
    expect(decideModernCallEnd({ kind: 'cut-mid-stream' }, idempotent).action).toBe('reissue');
  });

  it('an older server that omits resultType is complete', () => {
    expect(decideModernCallEnd({ kind: 'result' }, plain)).toEqual({ action: 'deliver', reason: 'answered' });
  });
});

// ---- The safety property, and tables it must reject ----

const codeArb = fc.constantFrom(
  -32020,
  -32021,
  -32022,
  -32601,
  -32602,
  -32603,
  -32010,
  -32011,
  -32012,
  -32013,
);
const bodyArb = fc.option(
  codeArb.map((c) => err(c, c === ContinuityErrorCode.EVENTS_EVICTED ? evictedData : undefined)),
  { nil: undefined },
);
const endArb: fc.Arbitrary<ModernCallStreamEnd> = fc.oneof(
  fc.constantFrom<ModernCallStreamEnd>(
    { kind: 'refused' },
    { kind: 'cut-before-response' },
    { kind: 'cut-mid-stream' },
    { kind: 'ended-without-answer' },
    { kind: 'stalled' },
    { kind: 'cancelled-by-application' },
    { kind: 'malformed-response' },
    { kind: 'result' },
    { kind: 'result', resultType: 'input_required' },
  ),
  codeArb.map((code) => ({ kind: 'error-response' as const, code })),
  fc
    .tuple(
      fc.oneof(
        fc.constantFrom(400, 401, 403, 404, 405, 406, 409, 410, 413, 415, 422, 429, 500, 502, 503, 504),
        fc.integer({ min: 300, max: 599 }),
      ),
      bodyArb,
      fc.option(fc.nat(60_000), { nil: undefined }),
    )
    .map(([s, body, retryAfterMs]) => status(s, body, retryAfterMs)),
);
const hintArb = fc.option(fc.boolean(), { nil: undefined });
const ctxArb: fc.Arbitrary<ModernCallContext> = fc.record({
  tool: fc.option(fc.record({ readOnlyHint: hintArb, idempotentHint: hintArb }), { nil: undefined }),
  extension: fc.option(
    fc.record({ memoWindowMs: fc.oneof(fc.constant(86_400_000), fc.integer({ min: 1, max: 200_000 })) }),
    { nil: undefined },
  ),
  idempotencyKey: fc.option(fc.constant('k-1'), { nil: undefined }),
  lastEventId: fc.option(fc.constant('k1-1-3'), { nil: undefined }),
  attempts: fc.nat(5),
  mayHaveRunBefore: fc.boolean(),
  elapsedMs: fc.nat(200_000),
  jitterSeed: fc.nat(),
});
const policyArb: fc.Arbitrary<ModernCallPolicy> = fc.record({
  maxReissues: fc.nat(4),
  backoff: fc.constant(DEFAULT_MODERN_CALL_POLICY.backoff),
  memoMarginMs: fc.nat(10_000),
  trustToolAnnotations: fc.boolean(),
});

/**
 * No decision re-issues a call that may have run unless that is safe: the tool is read-only or idempotent
 * (and annotations are trusted), or the extension is advertised and the re-issue carries the same key.
 * And no decision waits: each is immediate, with a bounded delay.
 */
function safetyHolds(
  table: Readonly<Record<ModernCallCase, ModernCallRow>>,
  end: ModernCallStreamEnd,
  ctx: ModernCallContext,
  policy: ModernCallPolicy,
): boolean {
  const d = decideModernCallEnd(end, ctx, policy, table);
  // Honest endings: a definite failure only for a call no attempt of which may have run. A -32020 to a
  // call keyed through the extension says so itself: a key that ran is answered from the memo, never by
  // the SDK's checks.
  const keyedRefusal =
    ctx.extension !== undefined && ctx.idempotencyKey !== undefined && caseOf(end) === '400-header-mismatch';
  if (d.action === 'fail' && ((ctx.mayHaveRunBefore && !keyedRefusal) || mayHaveRun(end))) return false;
  if (d.action !== 'reissue' && d.action !== 'backoff-reissue') return true;
  const bound = Math.max(policy.backoff.maxDelayMs, end.kind === 'http-status' ? (end.retryAfterMs ?? 0) : 0);
  if (!(d.newRequestId && d.delayMs >= 0 && d.delayMs <= bound)) return false;
  if (!mayHaveRun(end)) return true;
  // Written from the rule, not from the code under test: trusted annotations, or the same key while the
  // server still remembers it.
  const t = ctx.tool;
  const annotationsSafe =
    policy.trustToolAnnotations && (t?.readOnlyHint === true || t?.idempotentHint === true);
  const extensionSafe =
    ctx.extension !== undefined &&
    ctx.idempotencyKey !== undefined &&
    d.carry?.idempotencyKey === ctx.idempotencyKey &&
    ctx.elapsedMs + policy.memoMarginMs < ctx.extension.memoWindowMs;
  return annotationsSafe || extensionSafe;
}

describe('safety property', () => {
  test.prop([endArb, ctxArb, policyArb], { numRuns: 3_000 })(
    'no re-issue of a non-idempotent call without the extension after it may have run',
    (end, ctx, policy) => {
      expect(safetyHolds(MODERN_CALL_DECISION_TABLE, end, ctx, policy)).toBe(true);
    },
  );

  it('the generators reach the region the property is about (re-issues after the request may have run)', () => {
    const samples = fc.sample(fc.tuple(endArb, ctxArb, policyArb), { numRuns: 3_000, seed: 11 });
    const risky = samples.filter(([end, ctx, policy]) => {
      const d = decideModernCallEnd(end, ctx, policy);
      return mayHaveRun(end) && (d.action === 'reissue' || d.action === 'backoff-reissue');
    });
    const unsafeBasis = samples.filter(
      ([end, ctx, policy]) => mayHaveRun(end) && safeReissueBasis(ctx, policy) === undefined,
    );
    const keyedReissues = risky.filter(([end, ctx, policy]) => {
      const d = decideModernCallEnd(end, ctx, policy);
      return (d.action === 'reissue' || d.action === 'backoff-reissue') && d.carry !== undefined;
    });
    expect(keyedReissues.length).toBeGreaterThan(50);
    expect(risky.length).toBeGreaterThan(100);
    expect(unsafeBasis.length).toBeGreaterThan(100);
  });

  const mutant = (c: ModernCallCase, row: ModernCallRow) => ({ ...MODERN_CALL_DECISION_TABLE, [c]: row });
  const MUTANTS: Array<[string, Readonly<Record<ModernCallCase, ModernCallRow>>]> = [
    // The official client's conflation: "fetch failed" before any byte read as "could not connect".
    [
      'a reset before any byte treated as refused',
      mutant('cut-before-response', { action: 'backoff-reissue', reason: 'connection_refused' }),
    ],
    ['a stall re-issued blindly', mutant('stalled', { action: 'backoff-reissue', reason: 'stalled' })],
    [
      'a gateway timeout re-issued blindly',
      mutant('502-504', { action: 'backoff-reissue', reason: 'gateway_error' }),
    ],
    [
      'an end without an answer re-issued blindly',
      mutant('ended-without-answer', { action: 'backoff-reissue', reason: 'ended_without_answer' }),
    ],
    ['a 500 re-issued blindly', mutant('500', { action: 'backoff-reissue', reason: 'server_error' })],
  ];

  it.each(MUTANTS)('catches the mutant table: %s', (_name, table) => {
    const out = fc.check(
      fc.property(endArb, ctxArb, policyArb, (end, ctx, policy) => safetyHolds(table, end, ctx, policy)),
      { numRuns: 3_000, seed: 7 },
    );
    expect(out.failed).toBe(true);
  });
});

describe('keysCall: which calls carry an idempotency key', () => {
  const ext = { memoWindowMs: 86_400_000 };
  it('only when the extension is advertised and the tool is not safe by its trusted annotations', () => {
    expect(keysCall(undefined, undefined)).toBe(false);
    expect(keysCall(undefined, ext)).toBe(true);
    expect(keysCall({}, ext)).toBe(true);
    expect(keysCall({ readOnlyHint: true }, ext)).toBe(false);
    expect(keysCall({ idempotentHint: true }, ext)).toBe(false);
    expect(keysCall({ readOnlyHint: true }, undefined)).toBe(false);
    // Hints from an untrusted server are not relied on: the key stays.
    expect(
      keysCall({ readOnlyHint: true }, ext, { ...DEFAULT_MODERN_CALL_POLICY, trustToolAnnotations: false }),
    ).toBe(true);
  });
});
