import fc from 'fast-check';
import {
  DEFAULT_FOLLOW_POLICY,
  type FollowFact,
  type FollowOutcome,
  type FollowPolicy,
  type FollowState,
  type FollowStep,
  followStep,
  startFollow,
} from '../../machines/tasks/task-follow.js';

/**
 * A simulated world for the client following a task (machines/tasks/task-follow.ts): a server task that
 * works, asks for input in rounds, and ends completed or failed; a network whose every request may be lost
 * before the server, have its answer lost after the server acted on it, or be answered 503 by a balancer.
 * The client is the pure core, on a virtual clock. After the scripted faults the network heals.
 */

export type NetFate = 'ok' | 'lostBefore' | 'lostAfter' | 'status503';

export interface FollowWorld {
  /** Input rounds the task asks before it ends; keys per round. */
  readonly rounds: readonly number[];
  /** `tasks/get` reads while working before the run reaches its next step. */
  readonly workPolls: number;
  readonly ends: 'completed' | 'failed';
  /** The fate of each request, in order; every later request is answered. */
  readonly net: readonly NetFate[];
}

export const followWorldArb: fc.Arbitrary<FollowWorld> = fc.record({
  rounds: fc.array(fc.integer({ min: 1, max: 2 }), { maxLength: 2 }),
  workPolls: fc.integer({ min: 0, max: 3 }),
  ends: fc.constantFrom<'completed' | 'failed'>('completed', 'failed'),
  net: fc.array(fc.constantFrom<NetFate>('ok', 'lostBefore', 'lostAfter', 'status503'), { maxLength: 14 }),
});

export type Step = (state: FollowState, fact: FollowFact, policy: FollowPolicy) => FollowStep;

export interface FollowRun {
  readonly outcome: FollowOutcome | undefined;
  /** The server task's final status. */
  readonly serverStatus: string;
  /** How many times the application was asked each key. */
  readonly asked: ReadonlyMap<string, number>;
  /** How many answers the server took for each key. */
  readonly taken: ReadonlyMap<string, number>;
  readonly requests: number;
}

const POLICY: FollowPolicy = { ...DEFAULT_FOLLOW_POLICY, giveUpAfterMs: 10_000_000 };

/** Runs the world with the core (or a mutant of it) to the follow's end, bounded. */
export function runFollowWorld(w: FollowWorld, step: Step = followStep): FollowRun {
  let status: 'working' | 'input_required' | 'completed' | 'failed' = 'working';
  let round = 0;
  let reads = 0;
  let open: string[] = [];
  const taken = new Map<string, number>();
  const asked = new Map<string, number>();
  let now = 0;
  let requests = 0;

  const advance = () => {
    if (status !== 'working') return;
    if (reads++ < w.workPolls) return;
    reads = 0;
    const keys = w.rounds[round];
    if (keys === undefined) {
      status = w.ends;
      return;
    }
    status = 'input_required';
    open = Array.from({ length: keys }, (_, i) => `r${round}.k${i}`);
  };
  const detailed = (): Record<string, unknown> => ({
    resultType: 'complete',
    taskId: 't',
    status,
    pollIntervalMs: 10,
    ...(status === 'input_required'
      ? { inputRequests: Object.fromEntries(open.filter((k) => !taken.has(k)).map((k) => [k, {}])) }
      : {}),
    ...(status === 'completed' ? { result: { content: [] } } : {}),
    ...(status === 'failed' ? { error: { code: -32603, message: 'boom' } } : {}),
  });
  const serve = (kind: string, responses: Readonly<Record<string, unknown>> | undefined) => {
    if (kind === 'get') {
      advance();
      return detailed();
    }
    if (kind === 'update' && status === 'input_required' && responses) {
      for (const k of Object.keys(responses))
        if (open.includes(k) && !taken.has(k)) taken.set(k, (taken.get(k) ?? 0) + 1);
      if (open.every((k) => taken.has(k))) {
        status = 'working';
        round++;
        open = [];
      }
    }
    return { resultType: 'complete' };
  };

  let s = startFollow(
    't',
    true,
    { resultType: 'task', taskId: 't', status: 'working', pollIntervalMs: 10 },
    POLICY,
  );
  for (let i = 0; i < 500; i++) {
    const a = s.action;
    if (a.kind === 'end') return { outcome: a.outcome, serverStatus: status, asked, taken, requests };
    let fact: FollowFact;
    if (a.kind === 'ask') {
      for (const k of Object.keys(a.inputRequests)) asked.set(k, (asked.get(k) ?? 0) + 1);
      fact = {
        kind: 'answers',
        responses: Object.fromEntries(Object.keys(a.inputRequests).map((k) => [k, 'yes'])),
        at: now,
      };
    } else {
      now += a.afterMs + 5;
      const fate = w.net[requests++] ?? 'ok';
      if (fate === 'lostBefore') fact = { kind: 'fault', at: now };
      else if (fate === 'status503') fact = { kind: 'answer', status: 503, at: now };
      else {
        const result = serve(a.kind, a.kind === 'update' ? a.inputResponses : undefined);
        fact =
          fate === 'lostAfter'
            ? { kind: 'fault', at: now }
            : { kind: 'answer', status: 200, result, at: now };
      }
    }
    s = step(s.state, fact, POLICY);
  }
  return { outcome: undefined, serverStatus: status, asked, taken, requests };
}

/** The follow ends; it reports the task's own end (never "failed" for a network fault); each key is asked once and taken once. */
export function honestFollow(r: FollowRun): boolean {
  if (r.outcome === undefined) return false;
  if (r.outcome.kind === 'failed' && r.serverStatus !== 'failed') return false;
  if (r.outcome.kind === 'completed' && r.serverStatus !== 'completed') return false;
  if (r.outcome.kind !== 'completed' && r.outcome.kind !== 'failed') return false;
  for (const n of r.asked.values()) if (n !== 1) return false;
  for (const n of r.taken.values()) if (n !== 1) return false;
  return true;
}

/** The ext-tasks 0.2.2 polling loop: one failed request ends the follow as a failed task. */
export const failsOnFault: Step = (state, fact, policy) =>
  fact.kind === 'fault'
    ? {
        state,
        action: {
          kind: 'end',
          outcome: { kind: 'failed', error: { code: -32603, message: 'fetch failed' } },
        },
      }
    : followStep(state, fact, policy);

/** The ext-tasks 0.2.2 update: a failed `tasks/update` frees its input keys (they may be asked again). */
export const freesKeysOnFault: Step = (state, fact, policy) => {
  if (fact.kind !== 'fault' || state.pending.kind !== 'update') return followStep(state, fact, policy);
  const freed = Object.keys(state.unacked);
  const next = { ...state, asked: state.asked.filter((k) => !freed.includes(k)), unacked: {} };
  return followStep({ ...next, pending: { kind: 'get', afterMs: 0 } }, fact, policy);
};
