import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { type AnyStateMachine, createActor, emit, enqueueActions } from 'xstate';
import { ContinuityErrorCode } from '../machines/continuity-extension.js';
import {
  admitUnknownKey,
  type KeyedRequestEmitted,
  type KeyedRequestEvent,
  keyedRequestMachine,
  keyedResume,
  type RecordedOutcome,
} from '../machines/server/keyed-request.machine.js';
import type { ResumeAnswer } from '../machines/server/retention.js';

const FP = '["tools/call",{"arguments":{"amount":5},"name":"charge"}]';
const OTHER_FP = '["tools/call",{"arguments":{"amount":6},"name":"charge"}]';
const replay = (afterSeq: number): ResumeAnswer => ({ kind: 'replay', stream: 1, afterSeq });
const gone: ResumeAnswer = {
  kind: 'gone',
  reason: 'resume_window_exceeded',
  stream: 1,
  requestedId: 'k1-1-2',
  oldestId: 'k1-1-10',
  headId: 'k1-1-12',
  lostCount: 7,
  resumeAfter: 'k1-1-9',
  streamComplete: false,
};
const charged: RecordedOutcome = { kind: 'result', result: { resultType: 'complete', content: [] } };
const refusedOutcome: RecordedOutcome = { kind: 'error', error: { code: -32020, message: 'HeaderMismatch' } };

function keyed(machine: AnyStateMachine = keyedRequestMachine) {
  const actor = createActor(machine, { input: { memoKey: '3:bob|k-1', fingerprint: FP, attacher: 'a1' } });
  const emitted: KeyedRequestEmitted[] = [];
  actor.on('*', (e) => emitted.push(e as KeyedRequestEmitted));
  actor.start();
  const send = (e: KeyedRequestEvent) => {
    const from = emitted.length;
    actor.send(e);
    return emitted.slice(from);
  };
  const reissue = (attacher: string, resume: ResumeAnswer = replay(0), fingerprint = FP) =>
    send({ type: 'reissue.arrived', attacher, fingerprint, resume });
  return {
    actor,
    emitted,
    send,
    reissue,
    value: () => actor.getSnapshot().value,
    attached: () => actor.getSnapshot().context.attached as string[],
  };
}

describe('keyed request machine (2026-07-28 continuity extension), one test per transition', () => {
  it('start: the body starts once and the first attempt watches it', () => {
    const k = keyed();
    expect(k.value()).toBe('running');
    expect(k.emitted).toEqual([{ type: 'keyed.start' }]);
    expect(k.attached()).toEqual(['a1']);
  });

  it('running + re-issue (same request): attaches after its last event id, never starts again', () => {
    const k = keyed();
    expect(k.reissue('a2', replay(4))).toEqual([
      { type: 'keyed.answer', attacher: 'a2', answer: { kind: 'attach', afterSeq: 4 } },
    ]);
    expect(k.attached()).toEqual(['a1', 'a2']);
    expect(k.emitted.filter((e) => e.type === 'keyed.start')).toHaveLength(1);
  });

  it('running + re-issue with other arguments: refused with -32010, the work untouched', () => {
    const k = keyed();
    expect(k.reissue('a2', replay(0), OTHER_FP)).toEqual([
      {
        type: 'keyed.answer',
        attacher: 'a2',
        answer: { kind: 'refused', code: ContinuityErrorCode.KEY_REUSED },
      },
    ]);
    expect(k.value()).toBe('running');
    expect(k.attached()).toEqual(['a1']);
  });

  it('running + re-issue whose events were evicted: 410 with the exact lost count, not attached', () => {
    const k = keyed();
    expect(k.reissue('a2', gone)).toEqual([
      {
        type: 'keyed.answer',
        attacher: 'a2',
        answer: { kind: 'evicted', code: ContinuityErrorCode.EVENTS_EVICTED, resume: gone },
      },
    ]);
    expect(k.attached()).toEqual(['a1']);
  });

  it('running + re-issue with a cursor this log never issued: invalid cursor', () => {
    const k = keyed();
    const invalid: ResumeAnswer = { kind: 'invalid', reason: 'foreign_cursor', requestedId: 'zz-9-9' };
    expect(k.reissue('a2', invalid)[0]).toMatchObject({
      answer: { kind: 'invalid-cursor', resume: invalid },
    });
  });

  it('running + stream closed: a transport fact, the work goes on and nothing is aborted', () => {
    const k = keyed();
    expect(k.send({ type: 'stream.closed', attacher: 'a1' })).toEqual([]);
    expect(k.value()).toBe('running');
    expect(k.attached()).toEqual([]);
  });

  it('running + tool finished while watched: answered, the outcome goes to every watcher, memo armed', () => {
    const k = keyed();
    k.reissue('a2');
    expect(k.send({ type: 'tool.finished', outcome: charged })).toEqual([
      { type: 'keyed.answer', attacher: 'a1', answer: { kind: 'outcome', outcome: charged } },
      { type: 'keyed.answer', attacher: 'a2', answer: { kind: 'outcome', outcome: charged } },
      { type: 'keyed.memo-armed' },
    ]);
    expect(k.value()).toEqual({ finished: 'answered' });
  });

  it('running + tool finished with nobody watching: committed (recorded, not yet delivered)', () => {
    const k = keyed();
    k.send({ type: 'stream.closed', attacher: 'a1' });
    expect(k.send({ type: 'tool.finished', outcome: charged })).toEqual([{ type: 'keyed.memo-armed' }]);
    expect(k.value()).toEqual({ finished: 'committed' });
    expect(k.actor.getSnapshot().context.outcome).toEqual(charged);
  });

  it('committed + re-issue: the recorded outcome after its last event id → answered', () => {
    const k = keyed();
    k.send({ type: 'stream.closed', attacher: 'a1' });
    k.send({ type: 'tool.finished', outcome: charged });
    expect(k.reissue('a2', replay(3))).toEqual([
      { type: 'keyed.answer', attacher: 'a2', answer: { kind: 'recorded', afterSeq: 3, outcome: charged } },
    ]);
    expect(k.value()).toEqual({ finished: 'answered' });
  });

  it('committed + evicted re-issue: 410, stays committed (the outcome was not delivered)', () => {
    const k = keyed();
    k.send({ type: 'stream.closed', attacher: 'a1' });
    k.send({ type: 'tool.finished', outcome: charged });
    expect(k.reissue('a2', gone)[0]).toMatchObject({ answer: { kind: 'evicted' } });
    expect(k.value()).toEqual({ finished: 'committed' });
  });

  it('answered + re-issue: the recorded outcome again (the client may not have received it)', () => {
    const k = keyed();
    k.send({ type: 'tool.finished', outcome: charged });
    expect(k.reissue('a3', replay(5))[0]).toMatchObject({ answer: { kind: 'recorded', afterSeq: 5 } });
    expect(k.value()).toEqual({ finished: 'answered' });
  });

  it('finished + re-issue with other arguments: refused, the recorded outcome is not given away', () => {
    const k = keyed();
    k.send({ type: 'tool.finished', outcome: charged });
    expect(k.reissue('a2', replay(0), OTHER_FP)[0]).toMatchObject({ answer: { kind: 'refused' } });
  });

  it('finished + explicit cancel or instance death: too late, the recorded outcome stands', () => {
    const k = keyed();
    k.send({ type: 'tool.finished', outcome: charged });
    expect(k.send({ type: 'cancel.requested' })).toEqual([]);
    expect(k.send({ type: 'instance.died' })).toEqual([]);
    expect(k.value()).toEqual({ finished: 'answered' });
  });

  it('running + memo expiry: ignored, running work is never forgotten', () => {
    const k = keyed();
    expect(k.send({ type: 'memo.expired' })).toEqual([]);
    expect(k.value()).toBe('running');
  });

  it('finished + memo expiry: forgotten (the record is deleted) and the actor stops', () => {
    const k = keyed();
    k.send({ type: 'tool.finished', outcome: charged });
    expect(k.send({ type: 'memo.expired' })).toEqual([{ type: 'keyed.forget' }]);
    expect(k.value()).toBe('forgotten');
    expect(k.actor.getSnapshot().status).toBe('done');
  });

  it('running + explicit cancel: the body is aborted, watchers told, cancelled', () => {
    const k = keyed();
    expect(k.send({ type: 'cancel.requested' })).toEqual([
      { type: 'keyed.abort' },
      {
        type: 'keyed.answer',
        attacher: 'a1',
        answer: { kind: 'cancelled', code: ContinuityErrorCode.CANCELLED },
      },
      { type: 'keyed.memo-armed' },
    ]);
    expect(k.value()).toBe('cancelled');
  });

  it('cancelled + re-issue: told it was cancelled, never run again; a late finish changes nothing', () => {
    const k = keyed();
    k.send({ type: 'cancel.requested' });
    expect(k.send({ type: 'tool.finished', outcome: charged })).toEqual([]);
    expect(k.reissue('a2')[0]).toMatchObject({ answer: { kind: 'cancelled', code: -32013 } });
    expect(k.reissue('a3', replay(0), OTHER_FP)[0]).toMatchObject({ answer: { kind: 'refused' } });
    expect(k.value()).toBe('cancelled');
    expect(k.send({ type: 'memo.expired' })).toEqual([{ type: 'keyed.forget' }]);
  });

  it('running + instance death: outcome unknown for every watcher, and for every later re-issue', () => {
    const k = keyed();
    k.reissue('a2');
    expect(k.send({ type: 'instance.died' })).toEqual([
      { type: 'keyed.answer', attacher: 'a1', answer: { kind: 'outcome-unknown', code: -32012 } },
      { type: 'keyed.answer', attacher: 'a2', answer: { kind: 'outcome-unknown', code: -32012 } },
      { type: 'keyed.memo-armed' },
    ]);
    expect(k.value()).toBe('outcomeUnknown');
    expect(k.reissue('a3')[0]).toMatchObject({ answer: { kind: 'outcome-unknown' } });
    expect(k.send({ type: 'memo.expired' })).toEqual([{ type: 'keyed.forget' }]);
  });

  it('running + refused before the tool ran: the watchers get the refusal; a re-issue starts over (nothing ran)', () => {
    const refusal: RecordedOutcome = { kind: 'error', error: { code: -32020, message: 'HeaderMismatch' } };
    const k = keyed();
    k.reissue('a2');
    expect(k.send({ type: 'tool.refused', outcome: refusal })).toEqual([
      { type: 'keyed.answer', attacher: 'a1', answer: { kind: 'outcome', outcome: refusal } },
      { type: 'keyed.answer', attacher: 'a2', answer: { kind: 'outcome', outcome: refusal } },
      { type: 'keyed.memo-armed' },
    ]);
    expect(k.value()).toBe('refused');
    expect(k.reissue('a3')).toEqual([
      { type: 'keyed.answer', attacher: 'a3', answer: { kind: 'start-over' } },
    ]);
    // Other arguments under the same key are still another request: refused, as in every state.
    expect(k.reissue('a4', replay(0), OTHER_FP)[0]).toMatchObject({ answer: { kind: 'refused' } });
    // Too late for a finish, a cancel or a death: nothing was running.
    expect(k.send({ type: 'tool.finished', outcome: charged })).toEqual([]);
    expect(k.send({ type: 'cancel.requested' })).toEqual([]);
    expect(k.send({ type: 'instance.died' })).toEqual([]);
    expect(k.value()).toBe('refused');
    expect(k.send({ type: 'memo.expired' })).toEqual([{ type: 'keyed.forget' }]);
  });
});

describe('keyedResume: a re-issue last event id against the key log', () => {
  const window = (oldest: number, head: number) => ({
    oldest,
    head,
    appendedAt: Array.from({ length: head - oldest + 1 }, () => 0),
    finished: false,
  });

  it('no event seen: replay everything retained', () => {
    expect(keyedResume(undefined, { epoch: 'k1', stream: 1, window: window(1, 4) })).toEqual(replay(0));
  });

  it('no event seen but the first events were evicted: gone, with exactly how many', () => {
    expect(keyedResume(undefined, { epoch: 'k1', stream: 1, window: window(4, 6) })).toMatchObject({
      kind: 'gone',
      lostCount: 3,
      resumeAfter: 'k1-1-3',
    });
  });

  it('a cursor inside the window replays after it; another log cursor is invalid', () => {
    expect(keyedResume('k1-1-3', { epoch: 'k1', stream: 1, window: window(2, 6) })).toEqual(replay(3));
    expect(keyedResume('k9-1-3', { epoch: 'k1', stream: 1, window: window(2, 6) }).kind).toBe('invalid');
    expect(keyedResume('k1-2-3', { epoch: 'k1', stream: 1, window: window(2, 6) }).kind).toBe('invalid');
  });
});

describe('admitUnknownKey: a keyed request the memo has no record of', () => {
  it('a first attempt runs', () => {
    expect(admitUnknownKey(false, 0, 60_000)).toEqual({ kind: 'execute' });
  });
  it('a re-issue runs only when the memo has been complete for a whole window', () => {
    expect(admitUnknownKey(true, 60_000, 60_000)).toEqual({ kind: 'execute' });
    expect(admitUnknownKey(true, 59_999, 60_000)).toEqual({
      kind: 'outcome-unknown',
      code: ContinuityErrorCode.OUTCOME_UNKNOWN,
    });
  });
});

// ---- Property over random event sequences, and mutants it catches ----

type Step =
  | { kind: 'reissue'; attacher: string; same: boolean; evicted: boolean }
  | { kind: 'close'; attacher: string }
  | { kind: 'cancel' }
  | { kind: 'finish' }
  /** The server's checks refused the request before the tool ran. */
  | { kind: 'refuse' }
  | { kind: 'expire' }
  | { kind: 'die' };

const attacherArb = fc.constantFrom('a1', 'a2', 'a3', 'a4');
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('reissue' as const),
      attacher: attacherArb,
      same: fc.boolean(),
      evicted: fc.boolean(),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('close' as const), attacher: attacherArb }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'cancel' as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'finish' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'refuse' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'expire' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'die' as const }) },
);

function toEvent(step: Step): KeyedRequestEvent {
  switch (step.kind) {
    case 'reissue':
      return {
        type: 'reissue.arrived',
        attacher: step.attacher,
        fingerprint: step.same ? FP : OTHER_FP,
        resume: step.evicted ? gone : replay(2),
      };
    case 'close':
      return { type: 'stream.closed', attacher: step.attacher };
    case 'cancel':
      return { type: 'cancel.requested' };
    case 'finish':
      return { type: 'tool.finished', outcome: charged };
    case 'refuse':
      return { type: 'tool.refused', outcome: refusedOutcome };
    case 'expire':
      return { type: 'memo.expired' };
    case 'die':
      return { type: 'instance.died' };
  }
}

/**
 * Returns the first broken rule, or undefined. The body starts exactly once; nothing is aborted unless a
 * cancel was asked for; every re-issue is answered at once, with a refusal when its request differs, and
 * otherwise with: attach (work running), the recorded outcome (only after the body finished), a
 * cancellation (only after one was asked for) or outcome unknown (only after the instance died).
 */
function brokenRule(machine: AnyStateMachine, steps: readonly Step[]): string | undefined {
  const k = keyed(machine);
  let finished = false;
  let cancelAsked = false;
  let died = false;
  let refused = false;
  let ended = false;
  for (const step of steps) {
    if (k.actor.getSnapshot().status === 'done') return undefined;
    const out = k.send(toEvent(step));
    if (out.some((e) => e.type === 'keyed.start')) return 'the body started a second time';
    if (step.kind === 'cancel') cancelAsked = true;
    if (out.some((e) => e.type === 'keyed.abort') && !cancelAsked)
      return 'aborted without an explicit cancel';
    for (const e of out) {
      if (e.type !== 'keyed.answer') continue;
      const a = e.answer;
      if (a.kind === 'start-over' && !refused) return 'a start-over after the tool may have run';
      if (a.kind === 'outcome' && (refused || (step.kind === 'refuse' && !ended))) continue;
      if ((a.kind === 'recorded' || a.kind === 'outcome') && !(finished || step.kind === 'finish')) {
        return 'an outcome before the body finished';
      }
      if (a.kind === 'cancelled' && !cancelAsked) return 'a cancellation nobody asked for';
      if (a.kind === 'outcome-unknown' && !(died || step.kind === 'die')) return 'unknown without a death';
    }
    if (step.kind === 'reissue') {
      const answers = out.filter((e) => e.type === 'keyed.answer' && e.attacher === step.attacher);
      if (answers.length !== 1) return 'a re-issue not answered exactly once';
      const a = (answers[0] as Extract<KeyedRequestEmitted, { type: 'keyed.answer' }>).answer;
      if (!step.same && a.kind !== 'refused') return 'another request under the same key was not refused';
      if (step.same && a.kind === 'refused') return 'the same request was refused';
      if (a.kind === 'attach' && ended) return 'attached to work that had ended';
      if (refused && step.same && a.kind !== 'start-over') return 'a refused key did not start over';
    }
    // Work ended only while running: the first of finish, cancel, death decides.
    if (
      !ended &&
      (step.kind === 'finish' || step.kind === 'cancel' || step.kind === 'die' || step.kind === 'refuse')
    ) {
      ended = true;
      finished = step.kind === 'finish';
      died = step.kind === 'die';
      refused = step.kind === 'refuse';
    }
    if (ended && k.attached().length > 0) return 'a watcher left waiting on ended work';
  }
  return undefined;
}

describe('keyed request property', () => {
  test.prop([fc.array(stepArb, { maxLength: 30 })], { numRuns: 2_000 })(
    'never a second execution; every re-issue gets the outcome, a refusal, its cancellation or outcome unknown',
    (steps) => {
      expect(brokenRule(keyedRequestMachine, steps)).toBeUndefined();
    },
  );

  const MUTANTS: Array<[string, AnyStateMachine]> = [
    // The 2026-07-28 server without the extension: a re-issue is a new request and runs again.
    [
      'a re-issue of running work executes again',
      keyedRequestMachine.provide({ actions: { attachToRunning: emit({ type: 'keyed.start' }) } }),
    ],
    [
      'a re-issue of finished work executes again',
      keyedRequestMachine.provide({ actions: { answerRecorded: emit({ type: 'keyed.start' }) } }),
    ],
    [
      'a refused key is answered the refusal again instead of running',
      keyedRequestMachine.provide({
        actions: { startOver: keyedRequestMachine.implementations.actions.answerRecorded as never },
      }),
    ],
    [
      'work that finished starts over as if it had been refused',
      keyedRequestMachine.provide({
        actions: { answerRecorded: keyedRequestMachine.implementations.actions.startOver as never },
      }),
    ],
    [
      'the key is not checked against the request',
      keyedRequestMachine.provide({ guards: { isOtherRequest: () => false } }),
    ],
    // The spec's rule applied to keyed requests: closing the stream cancels the work.
    [
      'a closed stream cancels the work',
      keyedRequestMachine.provide({
        actions: { detach: enqueueActions(({ enqueue }) => enqueue.emit({ type: 'keyed.abort' })) },
      }),
    ],
  ];

  it.each(MUTANTS)('catches the mutant: %s', (_name, machine) => {
    const out = fc.check(
      fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => brokenRule(machine, steps) === undefined),
      { numRuns: 2_000, seed: 5 },
    );
    expect(out.failed).toBe(true);
  });
});
