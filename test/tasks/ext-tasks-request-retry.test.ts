import { describe, expect, it } from 'vitest';
import { DEFAULT_FOLLOW_POLICY, type FollowPolicy } from '../../machines/tasks/task-follow.js';
import {
  type RequestRetryStep,
  requestAnswer,
  requestStep,
  startRequest,
  taskRequestOf,
  withCompleteResult,
} from '../../machines/tasks/task-request-retry.js';

/**
 * Rows for `machines/tasks/task-request-retry.ts`: what our ext-tasks dispatcher does with one `tasks/*`
 * request. A fault or a "not served" status is sent again (never handed to ext-tasks, whose polling loop
 * would read it as a failed task); any other answer is handed back as it came; unreachable for
 * `giveUpAfterMs` is OUTCOME_UNKNOWN with the task id.
 */

const policy: FollowPolicy = { ...DEFAULT_FOLLOW_POLICY, retryDelayMs: 100, giveUpAfterMs: 1_000 };
const get = { kind: 'get', afterMs: 0 } as const;

function sendState(step: RequestRetryStep) {
  if (step.kind !== 'send') throw new Error(`expected a send, got ${step.kind}`);
  return step;
}

describe('one tasks/* request for ext-tasks', () => {
  it('is sent at once', () => {
    expect(startRequest('t1', get, policy)).toMatchObject({ kind: 'send', afterMs: 0 });
  });

  it.each([
    ['a fault', { kind: 'fault', at: 0 }],
    ['a 503 without a JSON-RPC error', { kind: 'answer', status: 503, at: 0 }],
    ['a 429', { kind: 'answer', status: 429, at: 0 }],
    ['a 502', { kind: 'answer', status: 502, at: 0 }],
  ] as const)('%s: sent again after a backoff that doubles', (_name, fact) => {
    const first = sendState(requestStep(sendState(startRequest('t1', get, policy)).state, fact, policy));
    const second = sendState(requestStep(first.state, { ...fact, at: 10 }, policy));
    expect(first.afterMs).toBeGreaterThanOrEqual(100);
    expect(second.afterMs).toBeGreaterThan(first.afterMs);
  });

  it.each([
    ['a result', { kind: 'answer', status: 200, result: { taskId: 't1', status: 'working' }, at: 0 }],
    [
      'a JSON-RPC error (not found)',
      { kind: 'answer', status: 200, error: { code: -32602, message: 'x' }, at: 0 },
    ],
    ['a 400', { kind: 'answer', status: 400, at: 0 }],
    [
      'a 500 carrying a JSON-RPC error',
      { kind: 'answer', status: 500, error: { code: -32603, message: 'x' }, at: 0 },
    ],
  ] as const)('%s: answered, handed back', (_name, fact) => {
    const start = sendState(startRequest('t1', get, policy));
    expect(requestStep(start.state, fact, policy)).toEqual({ kind: 'answered' });
  });

  it('faults for giveUpAfterMs: unreachable, OUTCOME_UNKNOWN with the task id (never a failed task)', () => {
    let step: RequestRetryStep = startRequest('t1', get, policy);
    for (let at = 0; step.kind === 'send' && at <= 2_000; at += 100)
      step = requestStep(step.state, { kind: 'fault', at }, policy);
    expect(step).toEqual({ kind: 'unreachable' });
    expect(requestAnswer(step as { kind: 'unreachable' }, { kind: 'fault', at: 0 }, 't1')).toEqual({
      kind: 'error',
      error: {
        code: -32050,
        message: 'Task unreachable: it may still be running',
        data: { reason: 'task_unreachable', taskId: 't1' },
      },
    });
  });

  it('a result is handed back as it came; a completed task’s result gains resultType "complete"', () => {
    const working = { taskId: 't1', status: 'working' };
    expect(
      requestAnswer({ kind: 'answered' }, { kind: 'answer', status: 200, result: working, at: 0 }, 't1'),
    ).toEqual({
      kind: 'result',
      result: working,
    });
    const done = { taskId: 't1', status: 'completed', result: { content: [] } };
    expect(withCompleteResult(done)).toEqual({ ...done, result: { resultType: 'complete', content: [] } });
    const marked = { ...done, result: { resultType: 'complete', content: [] } };
    expect(withCompleteResult(marked)).toBe(marked);
  });

  it('reads tasks/get, tasks/update and tasks/cancel naming a task; nothing else', () => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' };
    expect(taskRequestOf({ method: 'tasks/get', params: { taskId: 't1', _meta: meta } })).toEqual({
      taskId: 't1',
      meta,
      request: get,
    });
    expect(
      taskRequestOf({ method: 'tasks/update', params: { taskId: 't1', inputResponses: { a: 1 } } }),
    ).toMatchObject({ request: { kind: 'update', inputResponses: { a: 1 } } });
    expect(taskRequestOf({ method: 'tasks/cancel', params: { taskId: 't1' } })).toMatchObject({
      request: { kind: 'cancel' },
    });
    expect(taskRequestOf({ method: 'tools/call', params: { name: 'x' } })).toBeUndefined();
    expect(taskRequestOf({ method: 'tasks/get', params: {} })).toBeUndefined();
  });
});
