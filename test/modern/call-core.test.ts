import { describe, expect, it } from 'vitest';
import {
  ATTEMPT_START,
  type AttemptFact,
  type AttemptState,
  attemptStep,
  CALL_CORE_RULES,
  callEnding,
  callInput,
} from '../../machines/client/call-core.js';
import { STALL_PROGRESS_BYTES } from '../../machines/client/limits.js';
import type { ModernCallOutput } from '../../machines/client/modern-call.machine.js';
import { DEFAULT_MODERN_CALL_POLICY } from '../../machines/client/modern-call-decide.js';

/** Runs facts through the core from a fresh attempt; the machine events' types and ends, in order. */
function run(facts: readonly AttemptFact[], state: AttemptState = ATTEMPT_START) {
  const out: string[] = [];
  for (const f of facts) {
    const step = attemptStep(state, f, 0);
    state = step.state;
    for (const e of step.events) out.push(e.type === 'attempt.ended' ? `ended:${e.end.kind}` : e.type);
  }
  return out;
}

const request = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 't' } } as const;

describe('the 2026 client core: one call', () => {
  it('keys a call only with the extension learnt and allowed, and not a read-only one', () => {
    let keys = 0;
    const route = {
      request,
      extension: { memoWindowMs: 600_000 },
      useExtension: true,
      policy: DEFAULT_MODERN_CALL_POLICY,
      newKey: () => `k${++keys}`,
      stallTimeoutMs: 30_000,
      startedAt: 0,
      jitterSeed: 1,
    };
    expect(callInput(route)).toMatchObject({ idempotencyKey: 'k1', extension: { memoWindowMs: 600_000 } });
    const readOnly = callInput({ ...route, tool: { readOnlyHint: true } });
    expect(readOnly.idempotencyKey).toBeUndefined();
    expect(readOnly.extension).toBeUndefined();
    expect(callInput({ ...route, useExtension: false }).idempotencyKey).toBeUndefined();
    // No key is made for a call that sends none.
    expect(keys).toBe(1);
  });

  it('names a failure by whether response bytes came: refused, cut before the response, cut mid-stream', () => {
    expect(run([{ kind: 'failed', fault: 'refused' }])).toEqual(['ended:refused']);
    expect(run([{ kind: 'failed', fault: 'reset' }])).toEqual(['ended:cut-before-response']);
    expect(run([{ kind: 'headers' }, { kind: 'failed', fault: 'refused' }])).toEqual([
      'attempt.activity',
      'ended:cut-mid-stream',
    ]);
  });

  it('the progress rule: bytes that complete nothing prove life only every STALL_PROGRESS_BYTES', () => {
    const trickle: AttemptFact = { kind: 'bytes', bytes: 10, completed: false };
    const responded = { responded: true, partial: 0 };
    expect(
      run(
        Array.from({ length: 100 }, () => trickle),
        responded,
      ),
    ).toEqual([]);
    const big: AttemptFact = { kind: 'bytes', bytes: STALL_PROGRESS_BYTES / 2, completed: false };
    expect(run([big, big, big], responded)).toEqual(['attempt.activity']);
    // A completed unit (an event, a keep-alive) starts the count over.
    expect(run([big, { kind: 'bytes', bytes: 1, completed: true }, big], responded)).toEqual([]);
    expect(run([{ kind: 'keep-alive' }], responded)).toEqual(['attempt.activity']);
  });

  it('reads a JSON answer that is a message as a message, then the end; any other answer as an end kept raw', () => {
    const answer = (status: number, body: unknown): AttemptFact => ({
      kind: 'answer',
      status,
      contentType: 'application/json',
      body,
      retryAfter: null,
      wallMs: 0,
    });
    const message = { jsonrpc: '2.0', id: 7, result: {} };
    expect(run([answer(200, message)])).toEqual(['attempt.message', 'ended:ended-without-answer']);
    expect(attemptStep(ATTEMPT_START, answer(200, message), 0).keepRaw).toBeUndefined();
    expect(run([answer(503, undefined)])).toEqual(['ended:http-status']);
    expect(attemptStep(ATTEMPT_START, answer(503, undefined), 0).keepRaw).toBe(true);
    // A non-message event is a complete unit, not a message.
    expect(run([{ kind: 'event', data: { hello: 1 } }])).toEqual(['attempt.activity']);
  });

  it('the library ending: abort overrides the output; raw answer and fetch error only when kept', () => {
    const failed = {
      outcome: 'failed',
      reason: 'forbidden',
      attempts: 0,
      end: { kind: 'http-status', status: 403 },
      response: { jsonrpc: '2.0', id: 7, error: { code: 1, message: 'x' } },
    } as ModernCallOutput;
    const facts = { aborted: false, streamOpen: false, rawAnswer: true, fetchError: false };
    expect(callEnding(failed, facts)).toBe('raw-answer');
    expect(callEnding(failed, { ...facts, aborted: true })).toBe('abort');
    expect(callEnding(failed, { ...facts, rawAnswer: false })).toBe('final');
    expect(callEnding(failed, { ...facts, streamOpen: true })).toBe('final');
    const refused = { ...failed, end: { kind: 'refused' } } as ModernCallOutput;
    expect(callEnding(refused, facts)).toBe('final');
    expect(callEnding(refused, { ...facts, fetchError: true }, CALL_CORE_RULES)).toBe('fetch-error');
  });
});
