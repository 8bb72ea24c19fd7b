import { describe, expect, it } from 'vitest';
import { createActor, fromCallback, SimulatedClock } from 'xstate';
import {
  type AttemptInput,
  type ModernCallEvent,
  type ModernCallInput,
  type ModernCallOutput,
  modernCallMachine,
} from '../../machines/client/modern-call.machine.js';
import {
  DEFAULT_MODERN_CALL_POLICY,
  ModernCallReason,
  type ModernCallStreamEnd,
} from '../../machines/client/modern-call-decide.js';
import { JsonRpcCode } from '../../machines/codes.js';
import {
  CANCEL_METHOD,
  CONTINUITY_EXTENSION,
  ContinuityErrorCode,
  ContinuityMeta,
} from '../../machines/continuity-extension.js';
import type { JsonRpcMessage, JsonRpcNotification, JsonRpcRequest } from '../../machines/jsonrpc.js';

/**
 * The call machine on its own: each test plays the server, attempt by attempt, through the `exchange`
 * seam, on a simulated clock. Every row kind of the table is reached through the machine (deliver,
 * re-issue, backoff re-issue, refresh then re-issue, resume after a gap, outcome unknown, fail).
 */

const CHARGE: JsonRpcRequest = {
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/call',
  params: { name: 'charge', arguments: { cents: 100 }, _meta: { progressToken: 7 } },
};

interface Harness {
  readonly attempts: AttemptInput[];
  readonly delivered: JsonRpcMessage[];
  readonly cancels: JsonRpcRequest[];
  readonly gaps: unknown[];
  readonly clock: SimulatedClock;
  send(e: ModernCallEvent): void;
  /** Simulated time: advances timers (backoff, stall). */
  advance(ms: number): void;
  output(): ModernCallOutput | undefined;
}

function start(input: Partial<ModernCallInput> = {}): Harness {
  const clock = new SimulatedClock();
  const h: Harness = {
    attempts: [],
    delivered: [],
    cancels: [],
    gaps: [],
    clock,
    send: (e) => actor.send(e),
    advance: (ms) => clock.increment(ms),
    output: () => actor.getSnapshot().output,
  };
  const machine = modernCallMachine.provide({
    actors: {
      exchange: fromCallback<ModernCallEvent, AttemptInput>(({ input: a }) => {
        h.attempts.push(a);
      }),
    },
    actions: {
      deliver: (_, { message }) => h.delivered.push(message),
      sendCancel: (_, { request }) => h.cancels.push(request),
      reportGap: (_, { gap }) => h.gaps.push(gap),
    },
  });
  const actor = createActor(machine, {
    clock,
    input: { request: CHARGE, stallTimeoutMs: 0, startedAt: 0, jitterSeed: 1, ...input },
  });
  actor.start();
  return h;
}

const metaOf = (r: JsonRpcRequest) => (r.params?._meta ?? {}) as Record<string, unknown>;
const current = (h: Harness) => h.attempts[h.attempts.length - 1] as AttemptInput;
const progress = (token: string | number, n: number): JsonRpcNotification => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { progressToken: token, progress: n },
});
const result = (id: string | number) => ({
  jsonrpc: '2.0' as const,
  id,
  result: { resultType: 'complete', content: [{ type: 'text', text: 'ok' }] },
});
const ended = (end: ModernCallStreamEnd, at = 10): ModernCallEvent => ({ type: 'attempt.ended', at, end });
const EXT = { memoWindowMs: 86_400_000 };

describe('the stateless call machine', () => {
  it('delivers the answer with the application id, progress first', () => {
    const h = start();
    expect(current(h).request.id).toBe(7);
    h.send({ type: 'attempt.message', at: 1, message: progress(7, 1) });
    h.send({ type: 'attempt.message', at: 2, message: result(7) });
    expect(h.output()?.outcome).toBe('answered');
    expect(h.delivered).toEqual([progress(7, 1), { ...result(7), id: 7 }]);
  });

  it('a cut of a charge without the extension is outcome unknown at once, with no re-issue', () => {
    const h = start();
    h.send({ type: 'attempt.message', at: 1, message: progress(7, 1) });
    h.send(ended({ kind: 'cut-mid-stream' }));
    const out = h.output();
    expect(out).toMatchObject({ outcome: 'outcome-unknown', reason: ModernCallReason.cutMidStream });
    expect(h.attempts).toHaveLength(1);
    const last = h.delivered.at(-1) as { id: number; error: { code: number; data: unknown } };
    expect(last.id).toBe(7);
    expect(last.error.code).toBe(JsonRpcCode.OUTCOME_UNKNOWN);
    expect(last.error.data).toEqual({ reason: ModernCallReason.cutMidStream });
  });

  it('a read-only tool is re-issued with a new id and a new progress token; its progress reaches the app as the original token', () => {
    const h = start({ tool: { readOnlyHint: true } });
    h.send(ended({ kind: 'cut-before-response' }));
    // The first re-issue after a transport cut goes at once (delay 0), on the next timer tick.
    h.advance(0);
    expect(h.attempts).toHaveLength(2);
    const re = current(h).request;
    expect(re.id).not.toBe(7);
    expect(metaOf(re).progressToken).toBe(re.id);
    h.send({ type: 'attempt.message', at: 20, message: progress(re.id, 1) });
    h.send({ type: 'attempt.message', at: 21, message: result(re.id) });
    expect(h.output()).toMatchObject({ outcome: 'answered', attempts: 1 });
    expect(h.delivered).toEqual([progress(7, 1), { ...result(re.id), id: 7 }]);
  });

  it('an answer to another id is not the call answer and is never delivered', () => {
    const h = start();
    h.send({ type: 'attempt.message', at: 1, message: result(99) });
    expect(h.output()).toBeUndefined();
    expect(h.delivered).toEqual([]);
  });

  it('a refused connection is re-issued after a backoff delay, then fails as unreachable when the budget runs out', () => {
    const h = start({ policy: undefined });
    for (let i = 0; i < DEFAULT_MODERN_CALL_POLICY.maxReissues; i++) {
      h.send(ended({ kind: 'refused' }));
      expect(h.output()).toBeUndefined();
      h.advance(60_000);
      expect(h.attempts).toHaveLength(i + 2);
    }
    h.send(ended({ kind: 'refused' }));
    expect(h.output()).toMatchObject({ outcome: 'failed', reason: ModernCallReason.unreachable });
    expect(h.delivered.at(-1)).toMatchObject({ id: 7, error: { code: JsonRpcCode.REQUEST_FAILED } });
  });

  it('a refusal after an attempt that may have run is outcome unknown, not a failure', () => {
    const h = start({ tool: { idempotentHint: true } });
    h.send(ended({ kind: 'cut-mid-stream' }));
    h.advance(0);
    h.send(ended({ kind: 'http-status', status: 401 }));
    expect(h.output()).toMatchObject({ outcome: 'outcome-unknown', reason: ModernCallReason.unauthorized });
  });

  it('a definite refusal on the first attempt fails with the server error', () => {
    const h = start();
    h.send(
      ended({
        kind: 'http-status',
        status: 404,
        body: { jsonrpc: '2.0', id: 7, error: { code: -32601, message: 'Method not found' } },
      }),
    );
    expect(h.output()).toMatchObject({ outcome: 'failed', status: 404, code: -32601 });
    expect(h.delivered).toEqual([
      { jsonrpc: '2.0', id: 7, error: { code: -32601, message: 'Method not found' } },
    ]);
  });

  it('a 503 is re-issued after at least Retry-After', () => {
    const h = start();
    h.send(ended({ kind: 'http-status', status: 503, retryAfterMs: 2_000 }));
    h.advance(1_999);
    expect(h.attempts).toHaveLength(1);
    h.advance(1);
    expect(h.attempts).toHaveLength(2);
  });

  it('a header mismatch fails at once with the server’s answer: nothing ran, nothing is re-sent', () => {
    const h = start();
    const mismatch = { jsonrpc: '2.0', id: 7, error: { code: -32020, message: 'HeaderMismatch' } };
    h.send(ended({ kind: 'http-status', status: 400, body: mismatch }));
    h.advance(1_000);
    expect(h.attempts).toHaveLength(1);
    expect(h.output()).toMatchObject({ outcome: 'failed', reason: ModernCallReason.headerMismatch });
  });

  it('stall detection counts as a cut (and is outcome unknown for a charge)', () => {
    const h = start({ stallTimeoutMs: 5_000 });
    h.advance(4_000);
    h.send({ type: 'attempt.activity', at: 4_000 });
    h.advance(4_000);
    expect(h.output()).toBeUndefined();
    h.advance(1_000);
    expect(h.output()).toMatchObject({ outcome: 'outcome-unknown', reason: ModernCallReason.stalled });
  });

  it('an input_required result is delivered (the next round is the application)', () => {
    const h = start();
    h.send({
      type: 'attempt.message',
      at: 1,
      message: { jsonrpc: '2.0', id: 7, result: { resultType: 'input_required', inputRequests: {} } },
    });
    expect(h.output()).toMatchObject({ outcome: 'answered', reason: ModernCallReason.inputRequired });
  });

  it('an application cancel without the extension ends as outcome unknown and sends no notification', () => {
    const h = start();
    h.send({ type: 'app.cancel', at: 3 });
    expect(h.output()).toMatchObject({
      outcome: 'outcome-unknown',
      reason: ModernCallReason.cancelledByApplication,
    });
    expect(h.cancels).toEqual([]);
  });

  it('an unexpected status is outcome unknown', () => {
    const h = start();
    h.send(ended({ kind: 'http-status', status: 303 }));
    expect(h.output()).toMatchObject({
      outcome: 'outcome-unknown',
      reason: ModernCallReason.unexpectedStatus,
    });
  });
});

describe('the stateless call machine, with the extension', () => {
  const KEY = 'k-0b7e6c1e-5f0a-4b8e-9d4a-2f3c1a9e7d11';

  it('every attempt carries the key and declares the extension; a re-issue carries the last event id', () => {
    const h = start({ extension: EXT, idempotencyKey: KEY });
    const meta0 = metaOf(current(h).request);
    expect(meta0[ContinuityMeta.idempotencyKey]).toBe(KEY);
    expect(ContinuityMeta.lastEventId in meta0).toBe(false);
    expect(meta0['io.modelcontextprotocol/clientCapabilities']).toEqual({
      extensions: { [CONTINUITY_EXTENSION]: {} },
    });
    h.send({ type: 'attempt.message', at: 1, message: progress(7, 1), eventId: 'e1' });
    h.send(ended({ kind: 'cut-mid-stream' }));
    h.advance(0);
    const meta1 = metaOf(current(h).request);
    expect(current(h).request.id).not.toBe(7);
    expect(meta1[ContinuityMeta.idempotencyKey]).toBe(KEY);
    expect(meta1[ContinuityMeta.lastEventId]).toBe('e1');
  });

  it('a charge cut twice is re-issued, its replay never delivers a message twice, and the answer comes once', () => {
    const h = start({ extension: EXT, idempotencyKey: KEY });
    h.send({ type: 'attempt.message', at: 1, message: progress(7, 1), eventId: 'e1' });
    h.send(ended({ kind: 'cut-mid-stream' }));
    h.advance(0);
    let id = current(h).request.id;
    // The server replays from after e1, but a server (or a proxy) may resend e1 too: dropped.
    h.send({ type: 'attempt.message', at: 2, message: progress(id, 1), eventId: 'e1' });
    h.send({ type: 'attempt.message', at: 3, message: progress(id, 2), eventId: 'e2' });
    h.send(ended({ kind: 'stalled' }, 4));
    h.advance(60_000);
    expect(h.attempts).toHaveLength(3);
    id = current(h).request.id;
    expect(metaOf(current(h).request)[ContinuityMeta.lastEventId]).toBe('e2');
    h.send({ type: 'attempt.message', at: 5, message: progress(id, 2), eventId: 'e2' });
    h.send({ type: 'attempt.message', at: 6, message: progress(id, 3), eventId: 'e3' });
    h.send({ type: 'attempt.message', at: 7, message: result(id), eventId: 'e4' });
    expect(h.output()).toMatchObject({ outcome: 'answered', attempts: 2 });
    expect(h.delivered).toEqual([progress(7, 1), progress(7, 2), progress(7, 3), { ...result(id), id: 7 }]);
  });

  it('410 events evicted: the gap is reported and the re-issue resumes after resumeAfter', () => {
    const h = start({ extension: EXT, idempotencyKey: KEY });
    h.send(ended({ kind: 'cut-before-response' }));
    h.advance(0);
    h.send(
      ended({
        kind: 'http-status',
        status: 410,
        body: {
          jsonrpc: '2.0',
          id: null,
          error: {
            code: ContinuityErrorCode.EVENTS_EVICTED,
            message: 'evicted',
            data: {
              reason: 'resume_window_exceeded',
              lostCount: 3,
              resumeAfter: 'e3',
              streamComplete: false,
            },
          },
        },
      }),
    );
    h.advance(0);
    expect(h.gaps).toEqual([expect.objectContaining({ lostCount: 3, resumeAfter: 'e3' })]);
    expect(h.attempts).toHaveLength(3);
    expect(metaOf(current(h).request)[ContinuityMeta.lastEventId]).toBe('e3');
  });

  it('the server outcome unknown ends the call with the key, for reconciliation', () => {
    const h = start({ extension: EXT, idempotencyKey: KEY });
    h.send({
      type: 'attempt.message',
      at: 1,
      message: {
        jsonrpc: '2.0',
        id: 7,
        error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN, message: 'unknown' },
      },
    });
    expect(h.output()).toMatchObject({
      outcome: 'outcome-unknown',
      reason: ModernCallReason.serverOutcomeUnknown,
      idempotencyKey: KEY,
    });
    expect(h.delivered.at(-1)).toMatchObject({
      id: 7,
      error: {
        code: JsonRpcCode.OUTCOME_UNKNOWN,
        data: { reason: 'server_outcome_unknown', idempotencyKey: KEY },
      },
    });
  });

  it('409 key reused fails', () => {
    const h = start({ extension: EXT, idempotencyKey: KEY });
    h.send(
      ended({
        kind: 'http-status',
        status: 409,
        body: { jsonrpc: '2.0', id: 7, error: { code: ContinuityErrorCode.KEY_REUSED, message: 'reused' } },
      }),
    );
    expect(h.output()).toMatchObject({ outcome: 'failed', reason: ModernCallReason.keyReused });
  });

  it('an application cancel sends the explicit cancel request (§13) with the key', () => {
    const h = start({ extension: EXT, idempotencyKey: KEY });
    h.send({ type: 'app.cancel', at: 2 });
    expect(h.cancels).toEqual([
      {
        jsonrpc: '2.0',
        id: '7~cancel',
        method: CANCEL_METHOD,
        params: {
          idempotencyKey: KEY,
          _meta: {
            'io.modelcontextprotocol/clientCapabilities': { extensions: { [CONTINUITY_EXTENSION]: {} } },
          },
        },
      },
    ]);
    expect(h.output()).toMatchObject({ outcome: 'outcome-unknown', idempotencyKey: KEY });
  });

  it('past the memo window a cut charge is not re-issued', () => {
    const h = start({ extension: { memoWindowMs: 120_000 }, idempotencyKey: KEY });
    h.send(ended({ kind: 'cut-mid-stream' }, 61_000));
    expect(h.output()).toMatchObject({
      outcome: 'outcome-unknown',
      reason: ModernCallReason.memoWindowPassed,
    });
  });

  it('the re-issue budget ends as outcome unknown', () => {
    const h = start({ extension: EXT, idempotencyKey: KEY });
    const budget = DEFAULT_MODERN_CALL_POLICY.maxReissues;
    for (let i = 0; i < budget; i++) {
      h.send(ended({ kind: 'cut-mid-stream' }));
      h.advance(60_000);
    }
    h.send(ended({ kind: 'cut-mid-stream' }));
    expect(h.output()).toMatchObject({ outcome: 'outcome-unknown', reason: ModernCallReason.reissueGivenUp });
    expect(h.attempts).toHaveLength(budget + 1);
  });
});
