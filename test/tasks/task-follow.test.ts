import { describe, expect, it } from 'vitest';
import {
  DEFAULT_FOLLOW_POLICY,
  type FollowFact,
  type FollowStep,
  followAnswer,
  followStep,
  startFollow,
  taskHandleOf,
} from '../../machines/tasks/task-follow.js';

/** One row per decision of the client's task follow (machines/tasks/task-follow.ts). */
const policy = {
  ...DEFAULT_FOLLOW_POLICY,
  minPollMs: 100,
  retryDelayMs: 200,
  maxPollMs: 5_000,
  giveUpAfterMs: 10_000,
};
const handle = { resultType: 'task', taskId: 't1', status: 'working', pollIntervalMs: 1_000 };
const ok = (result: unknown, at = 0): FollowFact => ({ kind: 'answer', status: 200, result, at });
const fault = (at: number): FollowFact => ({ kind: 'fault', at });
const task = (over: Record<string, unknown>) => ({
  resultType: 'complete',
  taskId: 't1',
  pollIntervalMs: 1_000,
  ...over,
});
const run = (s: FollowStep, ...facts: FollowFact[]) =>
  facts.reduce((x, f) => followStep(x.state, f, policy), s);
const begin = () => startFollow('t1', true, handle, policy);

describe('the client follows a task', () => {
  it('a handle: the first tasks/get waits the server’s pollIntervalMs', () => {
    expect(begin().action).toEqual({ kind: 'get', afterMs: 1_000 });
    expect(taskHandleOf(handle)).toBe('t1');
    expect(taskHandleOf({ resultType: 'complete', taskId: 't1' })).toBeUndefined();
  });

  it('a journaled id (restart): tasks/get at once', () => {
    expect(startFollow('t1', false, undefined, policy).action).toEqual({ kind: 'get', afterMs: 0 });
  });

  it('a pollIntervalMs below the floor or above the cap is clamped', () => {
    expect(startFollow('t1', true, { ...handle, pollIntervalMs: 1 }, policy).action).toMatchObject({
      afterMs: 100,
    });
    expect(startFollow('t1', true, { ...handle, pollIntervalMs: 1e9 }, policy).action).toMatchObject({
      afterMs: 5_000,
    });
  });

  it('a failed tasks/get is retried with a doubling backoff, never read as a failed task', () => {
    const s = run(begin(), fault(0), fault(1), fault(2), fault(3));
    expect(s.action).toEqual({ kind: 'get', afterMs: 1_600 });
    expect(run(begin(), { kind: 'answer', status: 503, at: 0 }).action).toEqual({
      kind: 'get',
      afterMs: 1_000,
    });
  });

  it('unreachable for giveUpAfterMs: outcome unknown (the task may be running), not failed', () => {
    const s = run(begin(), fault(0), fault(5_000), fault(10_000));
    expect(s.action).toEqual({ kind: 'end', outcome: { kind: 'unknown', reason: 'task_unreachable' } });
  });

  it('a success in between restarts the give-up clock', () => {
    const s = run(begin(), fault(0), ok(task({ status: 'working' }), 6_000), fault(9_000), fault(15_000));
    expect(s.action.kind).toBe('get');
  });

  it('terminal statuses: the result, the task’s own error, cancelled', () => {
    expect(run(begin(), ok(task({ status: 'completed', result: { content: [] } }))).action).toEqual({
      kind: 'end',
      outcome: { kind: 'completed', result: { content: [] } },
    });
    const error = { code: -32000, message: 'card declined' };
    expect(run(begin(), ok(task({ status: 'failed', error }))).action).toEqual({
      kind: 'end',
      outcome: { kind: 'failed', error },
    });
    expect(run(begin(), ok(task({ status: 'cancelled' }))).action).toEqual({
      kind: 'end',
      outcome: { kind: 'cancelled' },
    });
  });

  it('a terminal handle (a re-issue of a finished keyed task) is read with tasks/get for its result', () => {
    expect(startFollow('t1', true, { ...handle, status: 'completed' }, policy).action).toEqual({
      kind: 'get',
      afterMs: 0,
    });
  });

  it('expired reads as expired; not found as outcome unknown; -32021 as outcome unknown, never failed', () => {
    const err = (code: number, message: string): FollowFact => ({
      kind: 'answer',
      status: 200,
      error: { code, message },
      at: 0,
    });
    expect(run(begin(), err(-32602, 'Failed to retrieve task: Task has expired')).action).toEqual({
      kind: 'end',
      outcome: { kind: 'expired' },
    });
    expect(run(begin(), err(-32602, 'Failed to retrieve task: Task not found')).action).toMatchObject({
      outcome: { kind: 'unknown', reason: 'task_not_found' },
    });
    expect(run(begin(), err(-32021, 'Missing required client capability')).action).toMatchObject({
      outcome: { kind: 'unknown', reason: 'refused_200' },
    });
  });

  it('input: each key handed once; a lost update ack re-sends the answer instead of asking again', () => {
    const asking = ok(task({ status: 'input_required', inputRequests: { 'r0.a': {}, 'r0.b': {} } }));
    let s = run(begin(), asking);
    expect(s.action).toEqual({ kind: 'ask', inputRequests: { 'r0.a': {}, 'r0.b': {} } });
    s = run(s, { kind: 'answers', responses: { 'r0.a': 1, 'r0.b': 2, other: 3 }, at: 0 });
    expect(s.action).toEqual({ kind: 'update', inputResponses: { 'r0.a': 1, 'r0.b': 2 }, afterMs: 0 });
    s = run(s, fault(1));
    expect(s.action).toMatchObject({ kind: 'update', inputResponses: { 'r0.a': 1, 'r0.b': 2 } });
    // The server took it after all (the retry's ack said so) and moved on.
    s = run(s, ok({ resultType: 'complete' }));
    expect(s.action).toEqual({ kind: 'get', afterMs: 0 });
    expect(run(s, asking).action).toEqual({ kind: 'get', afterMs: 1_000 });
  });

  it('an unacked answer still outstanding on the server is re-sent, not asked again', () => {
    const asking = ok(task({ status: 'input_required', inputRequests: { 'r0.a': {} } }));
    let s = run(begin(), asking, { kind: 'answers', responses: { 'r0.a': 1 }, at: 0 }, fault(1));
    // A tasks/get (a restarted exchange) still lists the key: the answer goes again.
    s = followStep({ ...s.state, pending: { kind: 'get', afterMs: 0 } }, asking, policy);
    expect(s.action).toEqual({ kind: 'update', inputResponses: { 'r0.a': 1 }, afterMs: 0 });
  });

  it('input without a handler ends as input-unanswerable, with the requests', () => {
    const s = followStep(
      startFollow('t1', false, undefined, policy).state,
      ok(task({ status: 'input_required', inputRequests: { 'r0.a': {} } })),
      policy,
    );
    expect(s.action).toEqual({
      kind: 'end',
      outcome: { kind: 'input-unanswerable', inputRequests: { 'r0.a': {} } },
    });
  });

  it('the application cancels: tasks/cancel, retried after a fault, then cancelled', () => {
    let s = run(begin(), { kind: 'app-cancel', at: 0 });
    expect(s.action).toEqual({ kind: 'cancel', afterMs: 0 });
    s = run(s, fault(1));
    expect(s.action.kind).toBe('cancel');
    expect(run(s, ok({ resultType: 'complete' })).action).toEqual({
      kind: 'end',
      outcome: { kind: 'cancelled' },
    });
  });

  it('the answers the SDK gets: result with resultType complete; unknown as -32050 with the task id', () => {
    expect(followAnswer(3, 't1', { kind: 'completed', result: { content: [] } })).toEqual({
      jsonrpc: '2.0',
      id: 3,
      result: { resultType: 'complete', content: [] },
    });
    expect(followAnswer(3, 't1', { kind: 'unknown', reason: 'task_unreachable' })).toMatchObject({
      error: { code: -32050, data: { taskId: 't1', reason: 'task_unreachable' } },
    });
  });
});
