import { describe, expect, it } from 'vitest';
import { authorizationResultOf } from '../../machines/client/authorization.js';
import {
  closeDeadlineMs,
  DEFAULT_CLOSE_TIMEOUT_MS,
  deletesOnClose,
  resumesFrom,
  settledByMessage,
} from '../../machines/client/closing.js';
import {
  cursorFileSizeRefusal,
  joinedRecord,
  MAX_CURSOR_FILE_BYTES,
  newToken,
  recordOfCursorFile,
  tokenMove,
} from '../../machines/client/cursor.js';
import {
  DRAIN_MS,
  EXCHANGE_START,
  type ExchangeFact,
  type ExchangeState,
  exchangeStep,
  stopPlan,
} from '../../machines/client/exchange-core.js';
import type { IoEvent, SseEvent } from '../../machines/client/io.js';
import { MAX_TIMER_MS, STALL_PROGRESS_BYTES } from '../../machines/client/limits.js';
import { progressStep } from '../../machines/client/progress.js';

/** Runs facts through the 2025 exchange core: its last state and every event it produced. */
function run(facts: readonly ExchangeFact[]): { state: ExchangeState; events: IoEvent[] } {
  let state = EXCHANGE_START;
  const events: IoEvent[] = [];
  for (const fact of facts) {
    const step = exchangeStep(state, fact);
    state = step.state;
    events.push(...step.events);
  }
  return { state, events };
}

const sse = { kind: 'headers', status: 200, contentType: 'text/event-stream' } as const;
const json = { kind: 'headers', status: 200, contentType: 'application/json' } as const;
const event: SseEvent = { type: 'sse.event', id: '1', data: '{}' };

describe('the progress rule (one for both eras)', () => {
  it('incomplete bytes prove life once STALL_PROGRESS_BYTES have arrived, then count again from 0', () => {
    const half = STALL_PROGRESS_BYTES / 2;
    expect(progressStep(0, half - 1, false)).toEqual({ partial: half - 1, alive: false });
    expect(progressStep(half, half - 1, false)).toEqual({ partial: STALL_PROGRESS_BYTES - 1, alive: false });
    expect(progressStep(half, half, false)).toEqual({ partial: 0, alive: true });
  });
  it('a chunk that completes a unit starts the count over (the unit itself is the proof of life)', () => {
    expect(progressStep(STALL_PROGRESS_BYTES - 1, 10, true)).toEqual({ partial: 0, alive: false });
  });
});

describe('the 2025 exchange core', () => {
  it('a 200 event stream opens a stream; anything else is read as one body (headers are proof of life)', () => {
    expect(run([sse]).events).toEqual([{ type: 'http.stream' }]);
    expect(run([{ ...sse, contentType: 'Text/Event-Stream; charset=utf-8' }]).state.reading).toBe('stream');
    expect(run([{ ...sse, status: 201 }]).events).toEqual([{ type: 'sse.activity' }]);
    expect(run([json]).state.reading).toBe('body');
  });
  it('a body ends in one http.response carrying the headers it came with', () => {
    const head = { ...json, status: 404, sessionId: 's1', wwwAuthenticate: 'Bearer' } as const;
    const { events, state } = run([head, { kind: 'chunk', bytes: 10 }, { kind: 'body', body: { a: 1 } }]);
    expect(events.at(-1)).toEqual({
      type: 'http.response',
      status: 404,
      sessionId: 's1',
      body: { a: 1 },
      wwwAuthenticate: 'Bearer',
      advertisement: undefined,
    });
    expect(state.finished).toBe(true);
  });
  it('a slow large body is alive every STALL_PROGRESS_BYTES; a trickle is not', () => {
    const big: ExchangeFact = { kind: 'chunk', bytes: STALL_PROGRESS_BYTES / 2 };
    expect(run([json, big, big, big]).events).toEqual([{ type: 'sse.activity' }, { type: 'sse.activity' }]);
    const trickle: ExchangeFact = { kind: 'chunk', bytes: 10 };
    expect(run([sse, trickle, trickle, trickle]).events).toEqual([{ type: 'http.stream' }]);
  });
  it("one chunk's units are one event: messages (with the retry), else the retry, else proof of life", () => {
    expect(run([sse, { kind: 'chunk', bytes: 5, events: [event], retryMs: 7 }]).events[1]).toEqual({
      type: 'sse.events',
      events: [event],
      retryMs: 7,
    });
    expect(run([sse, { kind: 'chunk', bytes: 5, retryMs: 7 }]).events[1]).toEqual({
      type: 'sse.retry',
      ms: 7,
    });
    expect(run([sse, { kind: 'chunk', bytes: 5, comment: true }]).events[1]).toEqual({
      type: 'sse.activity',
    });
  });
  it('failures are named: the fault as seen, no token = refused (nothing sent), over the cap = reset', () => {
    const failed = (failure: Extract<ExchangeFact, { kind: 'failed' }>['failure']) =>
      run([{ kind: 'failed', failure }]).events;
    expect(failed({ kind: 'network', fault: 'timeout' })).toEqual([{ type: 'net.failed', fault: 'timeout' }]);
    expect(failed({ kind: 'no-token' })).toEqual([{ type: 'net.failed', fault: 'refused' }]);
    expect(failed({ kind: 'over-cap' })).toEqual([{ type: 'net.failed', fault: 'reset' }]);
    expect(run([sse, { kind: 'ended' }]).events.at(-1)).toEqual({ type: 'net.ended' });
  });
  it("stopping: nothing once finished, a POST's stream drained for DRAIN_MS, everything else aborted", () => {
    expect(stopPlan(run([sse]).state, 'POST')).toEqual({ kind: 'drain', wakeInMs: DRAIN_MS });
    expect(stopPlan(run([sse]).state, 'GET')).toEqual({ kind: 'abort' });
    expect(stopPlan(run([json]).state, 'POST')).toEqual({ kind: 'abort' });
    expect(stopPlan(EXCHANGE_START, 'POST')).toEqual({ kind: 'abort' });
    expect(stopPlan(run([sse, { kind: 'ended' }]).state, 'POST')).toEqual({ kind: 'none' });
  });
});

describe("the 2025 transport's closing and cursor rules", () => {
  it('close() waits the option, else the default, within what a timer takes', () => {
    expect(closeDeadlineMs(undefined)).toBe(DEFAULT_CLOSE_TIMEOUT_MS);
    expect(closeDeadlineMs(300)).toBe(300);
    expect(closeDeadlineMs(-1)).toBe(0);
    expect(closeDeadlineMs(2 ** 40)).toBe(MAX_TIMER_MS);
  });
  it('DELETE on close unless turned off or the session was terminated already', () => {
    expect(deletesOnClose(undefined, false)).toBe(true);
    expect(deletesOnClose(false, false)).toBe(false);
    expect(deletesOnClose(true, true)).toBe(false);
  });
  it('a cancellation settles the call it names; a resumption token applies to requests only', () => {
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 4 } } as const;
    expect(settledByMessage(cancel)).toBe(4);
    expect(settledByMessage({ jsonrpc: '2.0', method: 'notifications/progress' })).toBeUndefined();
    expect(resumesFrom({ jsonrpc: '2.0', id: 1, method: 'tools/call' }, 't')).toBe('t');
    expect(resumesFrom(cancel, 't')).toBeUndefined();
  });
  it('a joined session is a record without streams; nothing to join, nothing restored', () => {
    expect(joinedRecord('http://x/', 's')).toEqual({ serverUrl: 'http://x/', sessionId: 's', streams: {} });
    expect(joinedRecord('http://x/', undefined)).toBeUndefined();
  });
  it('a token is reported once per new event id, and forgotten when its stream leaves the record', () => {
    const record = { sessionId: 's', streams: { a: { kind: 'request' as const, lastEventId: '5' } } };
    expect(tokenMove(record, 'a', '4')).toEqual({ kind: 'report', token: '5' });
    expect(tokenMove(record, 'a', '5')).toEqual({ kind: 'stay' });
    expect(tokenMove(record, 'b', '5')).toEqual({ kind: 'forget' });
    expect(tokenMove(null, 'a', undefined)).toEqual({ kind: 'forget' });
    expect(newToken(undefined, '5')).toEqual({ kind: 'stay' });
  });
  it('a cursor file is read only at a size a record can have, and only in version 1', () => {
    expect(cursorFileSizeRefusal(MAX_CURSOR_FILE_BYTES)).toBeUndefined();
    expect(cursorFileSizeRefusal(MAX_CURSOR_FILE_BYTES + 1)).toMatch(/more than a cursor record/);
    expect(recordOfCursorFile({ version: 1, record: null })).toEqual({ record: null });
    expect(recordOfCursorFile({ version: 2 })).toEqual({ refusal: expect.stringMatching(/version 2/) });
    expect(recordOfCursorFile(null)).toHaveProperty('refusal');
  });
  it("the SDK's auth() result: AUTHORIZED goes on, a redirect waits for the user, a throw failed", () => {
    expect(authorizationResultOf('AUTHORIZED')).toBe('authorized');
    expect(authorizationResultOf('REDIRECT')).toBe('needs-user');
    expect(authorizationResultOf('threw')).toBe('failed');
  });
});
