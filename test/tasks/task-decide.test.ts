import { describe, expect, it } from 'vitest';
import { ContinuityErrorCode } from '../../machines/continuity-extension.js';
import { stepTaskStatus, type TaskStatus } from '../../machines/tasks/task.machine.js';
import {
  ACK,
  answerGet,
  answerReissue,
  decideCancel,
  decideRunEnd,
  decideUpdate,
  declaresTasks,
  newTaskRecord,
  taskCallOf,
  taskFinished,
  taskFor,
  taskIdOf,
} from '../../machines/tasks/task-decide.js';
import {
  createTaskResult,
  detailedTask,
  outstanding,
  purgeAtOf,
  type TaskRecord,
  taskExpired,
} from '../../machines/tasks/task-record.js';

const T0 = Date.UTC(2026, 6, 28, 10, 0, 0);
const caps = {
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};
const call = (name: string, meta: unknown = caps) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name, arguments: { amount: 5 }, _meta: meta },
});
const fresh = (over: Partial<TaskRecord> = {}): TaskRecord => ({
  ...newTaskRecord({
    taskId: 't1',
    principal: 'bob',
    keyRef: '3:bob|k',
    fingerprint: 'fp',
    request: { name: 'charge', arguments: { amount: 5 } },
    now: T0,
    ttlMs: 60_000,
    pollIntervalMs: 500,
    keepExpiredMs: 30_000,
  }),
  ...over,
});
const asking = (): TaskRecord =>
  decideRunEnd(
    fresh(),
    {
      kind: 'result',
      result: {
        resultType: 'input_required',
        inputRequests: { a: { method: 'elicitation/create' }, b: { method: 'elicitation/create' } },
        requestState: 's1',
      },
    },
    T0 + 10,
  ) as TaskRecord;

describe('task status machine', () => {
  const rows: Array<[TaskStatus, Parameters<typeof stepTaskStatus>[1]['type'], TaskStatus]> = [
    ['working', 'run.inputRequired', 'input_required'],
    ['working', 'run.completed', 'completed'],
    ['working', 'run.failed', 'failed'],
    ['working', 'cancel', 'cancelled'],
    ['working', 'input.complete', 'working'],
    ['input_required', 'input.complete', 'working'],
    ['input_required', 'cancel', 'cancelled'],
    ['input_required', 'run.failed', 'failed'],
    ['input_required', 'run.completed', 'input_required'],
    ['completed', 'cancel', 'completed'],
    ['completed', 'run.failed', 'completed'],
    ['cancelled', 'run.completed', 'cancelled'],
    ['failed', 'cancel', 'failed'],
  ];
  it.each(rows)('%s + %s → %s', (from, type, to) => {
    const step = stepTaskStatus(from, { type } as Parameters<typeof stepTaskStatus>[1]);
    expect(step.status).toBe(to);
    expect(step.changed).toBe(from !== to);
  });
});

describe('which calls become tasks', () => {
  const isTaskTool = (n: string) => n === 'charge';
  it('a declared call of a task-capable tool becomes a task with its name and arguments', () => {
    expect(taskCallOf(call('charge'), isTaskTool)).toEqual({
      name: 'charge',
      arguments: { amount: 5 },
      meta: caps,
    });
  });
  it('a tool the application did not mark is served as before', () => {
    expect(taskCallOf(call('echo'), isTaskTool)).toBeUndefined();
  });
  it('a client that did not declare the extension on this request never gets a task', () => {
    expect(taskCallOf(call('charge', {}), isTaskTool)).toBeUndefined();
    expect(
      declaresTasks({ _meta: { 'io.modelcontextprotocol/clientCapabilities': { extensions: {} } } }),
    ).toBe(false);
  });
  it('a notification or another method is not a creation', () => {
    const { id: _id, ...note } = call('charge');
    expect(taskCallOf(note, isTaskTool)).toBeUndefined();
    expect(taskCallOf({ ...call('charge'), method: 'prompts/get' }, isTaskTool)).toBeUndefined();
  });
  it('reads a task id only as a non-empty string', () => {
    expect(taskIdOf({ taskId: 'x' })).toBe('x');
    expect(taskIdOf({ taskId: '' })).toBeUndefined();
    expect(taskIdOf({ taskId: 3 })).toBeUndefined();
    expect(taskIdOf(undefined)).toBeUndefined();
  });
});

describe('creation and re-issue', () => {
  it('a new task is working, round 0, version 1, purged keepExpiredMs after its TTL', () => {
    const r = fresh();
    expect(r).toMatchObject({ status: 'working', round: 0, version: 1, purgeAt: T0 + 90_000 });
    expect(purgeAtOf(T0, null, 5)).toBeNull();
  });
  it('the handle is a CreateTaskResult with resultType task and ISO times', () => {
    expect(createTaskResult(fresh())).toEqual({
      resultType: 'task',
      taskId: 't1',
      status: 'working',
      createdAt: new Date(T0).toISOString(),
      lastUpdatedAt: new Date(T0).toISOString(),
      ttlMs: 60_000,
      pollIntervalMs: 500,
    });
  });
  it('a re-issue of the key with the same request gets the SAME task handle, with its current status', () => {
    const done = decideRunEnd(fresh(), { kind: 'result', result: { content: [] } }, T0 + 5) as TaskRecord;
    expect(answerReissue(fresh(), 'fp', T0 + 1)).toEqual({
      kind: 'result',
      result: createTaskResult(fresh()),
    });
    const again = answerReissue(done, 'fp', T0 + 10);
    expect(again.kind === 'result' && again.result.taskId).toBe('t1');
    expect(again.kind === 'result' && again.result.status).toBe('completed');
  });
  it('the same key with another request is refused with KEY_REUSED (409), no task made', () => {
    expect(answerReissue(fresh(), 'other', T0 + 1)).toMatchObject({
      kind: 'error',
      status: 409,
      error: { code: ContinuityErrorCode.KEY_REUSED },
    });
  });
  it('a re-issue after the TTL is answered expired, not with a second task', () => {
    expect(answerReissue(fresh(), 'fp', T0 + 60_000)).toMatchObject({
      kind: 'error',
      error: { code: -32602, message: expect.stringContaining('expired') },
    });
  });
});

describe('tasks/get, tasks/update, tasks/cancel: which task', () => {
  it('an unknown id and another principal’s task are answered the same: not found (-32602)', () => {
    const unknown = taskFor(undefined, 'bob', T0, 'Failed to retrieve task');
    const foreign = taskFor(fresh(), 'eve', T0, 'Failed to retrieve task');
    expect(unknown).toEqual(foreign);
    expect(unknown).toMatchObject({
      kind: 'reply',
      reply: { error: { code: -32602, message: expect.stringContaining('not found') } },
    });
  });
  it('past createdAt + ttlMs the task is expired (not failed); just before, it is served', () => {
    expect(taskFor(fresh(), 'bob', T0 + 59_999, 'x').kind).toBe('task');
    expect(taskFor(fresh(), 'bob', T0 + 60_000, 'x')).toMatchObject({
      reply: { error: { message: 'x: Task has expired' } },
    });
    expect(taskExpired(fresh({ ttlMs: null }), T0 + 1e12)).toBe(false);
  });
  it('get inlines result, error or the outstanding input requests; resultType complete', () => {
    expect(answerGet(fresh())).toEqual({ kind: 'result', result: detailedTask(fresh()) });
    expect(detailedTask(fresh())).toMatchObject({ resultType: 'complete', status: 'working' });
    expect(detailedTask(fresh())).not.toHaveProperty('result');
    const done = decideRunEnd(
      fresh(),
      { kind: 'result', result: { resultType: 'complete', content: [1], isError: true } },
      T0,
    ) as TaskRecord;
    expect(detailedTask(done)).toMatchObject({
      status: 'completed',
      result: { content: [1], isError: true },
    });
    const failed = decideRunEnd(
      fresh(),
      { kind: 'error', error: { code: -32603, message: 'boom' } },
      T0,
    ) as TaskRecord;
    expect(detailedTask(failed)).toMatchObject({
      status: 'failed',
      error: { code: -32603, message: 'boom' },
      statusMessage: 'boom',
    });
    expect(detailedTask(asking())).toMatchObject({
      status: 'input_required',
      inputRequests: { 'r0.a': {}, 'r0.b': {} },
    });
  });
});

describe('run ends', () => {
  it('input_required opens a round under task-unique keys, keeping requestState', () => {
    const r = asking();
    expect(r).toMatchObject({ status: 'input_required', round: 0, requestState: 's1', version: 2 });
    expect(Object.keys(r.inputRequests ?? {})).toEqual(['r0.a', 'r0.b']);
  });
  it('a lost run fails the task with an internal error, never completes it', () => {
    expect(decideRunEnd(fresh(), { kind: 'lost', why: 'stream broke' }, T0)).toMatchObject({
      status: 'failed',
      error: { code: -32603 },
    });
  });
  it('an answer after a cancel (or a second answer) changes nothing', () => {
    const cancelled = decideCancel(fresh(), T0).next as TaskRecord;
    expect(decideRunEnd(cancelled, { kind: 'result', result: {} }, T0 + 1)).toBeUndefined();
    const done = decideRunEnd(fresh(), { kind: 'result', result: {} }, T0) as TaskRecord;
    expect(
      decideRunEnd(done, { kind: 'error', error: { code: 1, message: 'late' } }, T0 + 1),
    ).toBeUndefined();
    expect(taskFinished(done)).toBe(true);
    expect(taskFinished(fresh())).toBe(false);
  });
});

describe('tasks/update: each input key answered once', () => {
  it('a partial answer is kept; the task stays input_required with fewer outstanding', () => {
    const change = decideUpdate(asking(), { 'r0.a': { action: 'accept' } }, T0 + 20);
    expect(change.rerun).toBeUndefined();
    expect(change.next?.status).toBe('input_required');
    expect(outstanding(change.next as TaskRecord)).toEqual({ 'r0.b': { method: 'elicitation/create' } });
  });
  it('the last answer of the round resumes the run with the answers under the run’s own keys', () => {
    const half = decideUpdate(asking(), { 'r0.a': { action: 'accept' } }, T0 + 20).next as TaskRecord;
    const change = decideUpdate(half, { 'r0.b': { action: 'decline' } }, T0 + 30);
    expect(change.next).toMatchObject({ status: 'working', round: 1, version: half.version + 1 });
    expect(change.next).not.toHaveProperty('inputRequests');
    expect(change.rerun).toEqual({
      name: 'charge',
      arguments: { amount: 5 },
      inputResponses: { a: { action: 'accept' }, b: { action: 'decline' } },
      requestState: 's1',
    });
  });
  it('a retried update (keys already answered), unknown keys and older rounds change nothing', () => {
    const half = decideUpdate(asking(), { 'r0.a': { action: 'accept' } }, T0 + 20).next as TaskRecord;
    expect(decideUpdate(half, { 'r0.a': { action: 'decline' } }, T0 + 21)).toEqual({});
    expect(decideUpdate(half, { nope: 1, 'r9.a': 2 }, T0 + 21)).toEqual({});
    expect(decideUpdate(fresh(), { 'r0.a': 1 }, T0)).toEqual({});
    expect(decideUpdate(asking(), 'not an object', T0)).toEqual({});
  });
  it('the next round’s keys differ from the last one’s, so an old answer never answers a new question', () => {
    const resumed = decideUpdate(asking(), { 'r0.a': 1, 'r0.b': 2 }, T0).next as TaskRecord;
    const again = decideRunEnd(
      resumed,
      { kind: 'result', result: { resultType: 'input_required', inputRequests: { a: {} } } },
      T0 + 1,
    ) as TaskRecord;
    expect(Object.keys(again.inputRequests ?? {})).toEqual(['r1.a']);
    expect(decideUpdate(again, { 'r0.a': 1 }, T0 + 2)).toEqual({});
  });
});

describe('tasks/cancel', () => {
  it('a working or input_required task is cancelled at once and its run stopped', () => {
    expect(decideCancel(fresh(), T0 + 1)).toMatchObject({
      next: { status: 'cancelled', version: 2 },
      abort: true,
    });
    const c = decideCancel(asking(), T0 + 1);
    expect(c.next?.status).toBe('cancelled');
    expect(c.next).not.toHaveProperty('inputRequests');
  });
  it('a terminal task is left as it is (cancellation is cooperative); the reply is an empty ack', () => {
    const done = decideRunEnd(fresh(), { kind: 'result', result: {} }, T0) as TaskRecord;
    expect(decideCancel(done, T0 + 1)).toEqual({});
    expect(ACK).toEqual({ kind: 'result', result: { resultType: 'complete' } });
  });
});
