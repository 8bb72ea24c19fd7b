import { describe, expect, it } from 'vitest';
import { transition } from 'xstate';
import { pureTransition } from '../../machines/pure-transition.js';
import {
  type KeyedRequestEvent,
  keyedRequestMachine,
  type RecordedOutcome,
} from '../../machines/server/keyed-request.machine.js';

/**
 * `pureTransition` (the hot path's step of keyedRequestMachine) answers exactly what xstate's own
 * `transition` answers, in every state, for every event, with and without watchers.
 */
const outcome: RecordedOutcome = { kind: 'result', result: { content: [{ type: 'text', text: 'x' }] } };
const states = [
  'running',
  { finished: 'committed' },
  { finished: 'answered' },
  'refused',
  'cancelled',
  'outcomeUnknown',
] as const;
const events: KeyedRequestEvent[] = [
  {
    type: 'reissue.arrived',
    attacher: 'b',
    fingerprint: 'f',
    resume: { kind: 'replay', stream: 1, afterSeq: 2 },
  },
  {
    type: 'reissue.arrived',
    attacher: 'b',
    fingerprint: 'other',
    resume: { kind: 'replay', stream: 1, afterSeq: 0 },
  },
  { type: 'stream.closed', attacher: 'a' },
  { type: 'cancel.requested' },
  { type: 'tool.finished', outcome },
  { type: 'tool.refused', outcome: { kind: 'error', error: { code: -32602, message: 'no' } } },
  { type: 'memo.expired' },
  { type: 'instance.died' },
];

const snapshot = (value: (typeof states)[number], attached: string[]) =>
  keyedRequestMachine.resolveState({
    value,
    context: { memoKey: 'k', fingerprint: 'f', attached, outcome: value === 'running' ? undefined : outcome },
  });

/** What a step decides: the state, the context, and the actions (their types and emitted events). */
const decided = ([next, actions]: ReturnType<typeof transition<typeof keyedRequestMachine>>) => ({
  value: next.value,
  status: next.status,
  context: next.context,
  actions: actions.map((a) => ({ type: a.type, params: (a as { params?: unknown }).params })),
});

describe('pureTransition', () => {
  for (const value of states)
    for (const attached of [[], ['a']])
      it(`${JSON.stringify(value)} with ${attached.length} watcher(s): as xstate.transition`, () => {
        for (const event of events) {
          const ours = decided(pureTransition(keyedRequestMachine, snapshot(value, attached), event));
          const theirs = decided(transition(keyedRequestMachine, snapshot(value, attached), event));
          expect(ours, `${event.type}`).toEqual(theirs);
        }
      });

  it('each step has its own actions: a later step does not add to an earlier one', () => {
    const [, first] = pureTransition(keyedRequestMachine, snapshot('running', ['a']), {
      type: 'tool.finished',
      outcome,
    });
    const before = first.length;
    pureTransition(keyedRequestMachine, snapshot('running', ['a']), { type: 'instance.died' });
    expect(before).toBeGreaterThan(0);
    expect(first.length).toBe(before);
  });
});
