import { describe, expect, it } from 'vitest';
import { DEFAULT_FOLLOW_POLICY, startFollow } from '../../machines/tasks/task-follow.js';
import {
  type ListenFact,
  type ListenFollowStep,
  listenFollowStep,
  MAX_LISTEN_BREAKS,
  startListenFollow,
} from '../../machines/tasks/task-follow-listen.js';

/**
 * When the client reads a followed task from a task listen and when it polls
 * (machines/tasks/task-follow-listen.ts), row by row.
 */

const policy = { ...DEFAULT_FOLLOW_POLICY, retryDelayMs: 100, maxPollMs: 1_000 };
const handle = { resultType: 'task', taskId: 't', status: 'working', pollIntervalMs: 500 };
const start = (listen = true) => startListenFollow(startFollow('t', false, handle, policy), listen, policy);
const run = (step: ListenFollowStep, ...facts: ListenFact[]) =>
  facts.reduce((s, f) => listenFollowStep(s.state, f, policy), step);
const ack = (taskIds: string[]): ListenFact => ({ kind: 'listen-ack', taskIds, at: 0 });
const notice = (task: Record<string, unknown>): ListenFact => ({ kind: 'listen-notice', task, at: 0 });
const broke = (refused = false): ListenFact => ({ kind: 'listen-end', refused, at: 0 });

describe('listen or poll', () => {
  it('asked to listen: the listen opens at once, not after the poll interval', () => {
    expect(start().action).toEqual({ kind: 'listen', afterMs: 0 });
  });

  it('no acknowledgement within the request timeout: a break (re-opened after the backoff); repeated, the follow polls', () => {
    const quiet: ListenFact = { kind: 'listen-quiet', at: 0 };
    expect(run(start(), quiet).action).toEqual({ kind: 'listen', afterMs: 100 });
    const silent = Array.from({ length: MAX_LISTEN_BREAKS + 1 }, () => quiet);
    const polled = run(start(), ...silent);
    expect(polled.state.mode).toBe('polling');
    expect(polled.action).toEqual({ kind: 'get', afterMs: 0 });
  });

  it('not asked: every step is the poll follow’s (a tasks/get after the interval)', () => {
    expect(start(false).action).toEqual({ kind: 'get', afterMs: 500 });
    expect(run(start(false), broke()).action.kind).toBe('get');
  });

  it('acknowledged for the task: notifications are read; a terminal one ends the follow with its result', () => {
    const open = run(start(), ack(['t']));
    expect(open.action).toEqual({ kind: 'await-notice', withinMs: 1_000 });
    expect(run(open, notice({ taskId: 't', status: 'working' })).action).toEqual({
      kind: 'await-notice',
      withinMs: 1_000,
    });
    const done = run(open, notice({ taskId: 't', status: 'completed', result: { content: [] } }));
    expect(done.action).toEqual({ kind: 'end', outcome: { kind: 'completed', result: { content: [] } } });
  });

  it('an acknowledgement without the task, or a refused listen: polled at once, for the rest of the follow', () => {
    for (const first of [ack([]), ack(['other']), broke(true)]) {
      const polled = run(start(), first);
      expect(polled.action).toEqual({ kind: 'get', afterMs: 0 });
      expect(polled.state.mode).toBe('polling');
      const next = run(polled, {
        kind: 'answer',
        status: 200,
        result: { taskId: 't', status: 'working' },
        at: 0,
      });
      expect(next.action.kind).toBe('get');
    }
  });

  it('a break is re-opened after the doubling backoff; a notification between breaks resets the count', () => {
    const open = run(start(), ack(['t']));
    expect(run(open, broke()).action).toEqual({ kind: 'listen', afterMs: 100 });
    expect(run(open, broke(), ack(['t']), broke()).action).toEqual({ kind: 'listen', afterMs: 200 });
    const reset = run(open, broke(), ack(['t']), notice({ taskId: 't', status: 'working' }), broke());
    expect(reset.action).toEqual({ kind: 'listen', afterMs: 100 });
  });

  it(`${MAX_LISTEN_BREAKS + 1} breaks in a row with no notification: polled for good`, () => {
    let s = run(start(), ack(['t']));
    for (let i = 0; i < MAX_LISTEN_BREAKS; i++) s = run(s, broke(), ack(['t']));
    const last = run(s, broke());
    expect(last.state.mode).toBe('polling');
    expect(last.action).toEqual({ kind: 'get', afterMs: 0 });
  });

  it('a listen silent for maxPollMs is re-opened at once, without counting as a break', () => {
    const open = run(start(), ack(['t']), broke());
    const quiet = run(open, ack(['t']), { kind: 'listen-quiet', at: 0 });
    expect(quiet.action).toEqual({ kind: 'listen', afterMs: 0 });
    expect(quiet.state.breaks).toBe(0);
  });

  it('a break is never the task’s end: no outcome is decided by it', () => {
    const s = run(start(), ack(['t']), broke(), broke(), broke(), broke(), broke());
    expect(s.action.kind).not.toBe('end');
  });
});
