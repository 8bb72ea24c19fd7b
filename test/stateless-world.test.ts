import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { type Actor, type AnyStateMachine, createActor, emit, enqueueActions } from 'xstate';
import {
  DEFAULT_STATELESS_POLICY,
  decideStatelessEnd,
  mayHaveRun,
  STATELESS_DECISION_TABLE,
  type StatelessCase,
  type StatelessDecision,
  type StatelessRow,
  type StatelessStreamEnd,
} from '../machines/client/stateless-decide.js';
import { ContinuityErrorCode, DEFAULT_CONTINUITY_SETTINGS } from '../machines/continuity-extension.js';
import { formatEventId } from '../machines/event-id.js';
import {
  admitUnknownKey,
  type KeyedAnswer,
  type KeyedRequestEmitted,
  keyedRequestMachine,
  keyedResume,
} from '../machines/server/keyed-request.machine.js';

/**
 * The client's decision table and the server's keyed-request machine, run together over one call in a
 * small simulated world (no I/O, no timers): each attempt meets one fault, chosen by fast-check. This is
 * the model's first end-to-end check; the full simulated world (properties/) is to gain 2026-07-28 later.
 */
type Fault =
  /** The stream stays up until the answer. */
  | 'none'
  /** Nothing reaches the server. */
  | 'refused'
  /** 503 before anything runs. */
  | 'unavailable'
  /** The request arrives (and runs); the connection is cut before any response byte. */
  | 'cut-before-response'
  /** The request arrives; one progress event reaches the client, then the cut. */
  | 'cut-mid-stream'
  /** The request arrives; no byte comes; the client closes after its stall timeout. */
  | 'stall'
  /** The request arrives; the instance running it dies before it finishes. */
  | 'instance-death';

interface Scenario {
  readonly faults: readonly Fault[];
  /** Per attempt: the body finishes while the stream is broken (else it is still running). */
  readonly finishesDuringFault: readonly boolean[];
  readonly extension: boolean;
  readonly readOnly: boolean;
}

interface Outcome {
  /** How many times the tool body ran. */
  readonly executions: number;
  readonly final: StatelessDecision | 'hang';
  readonly attempts: number;
}

const FP = 'charge(5)';
const KEY = 'k-1';
const EPOCH = 'k1';
const RESULT = { resultType: 'complete', content: [] };

function run(
  s: Scenario,
  server: AnyStateMachine = keyedRequestMachine,
  table = STATELESS_DECISION_TABLE,
): Outcome {
  let executions = 0;
  let work: Actor<AnyStateMachine> | undefined;
  let alive = true;
  let head = 0;
  const answers: Array<{ attacher: string; answer: KeyedAnswer }> = [];
  const startWork = (attacher: string) => {
    const actor = createActor(server, { input: { memoKey: `3:bob|${KEY}`, fingerprint: FP, attacher } });
    actor.on('*', (e) => {
      const ev = e as KeyedRequestEmitted;
      if (ev.type === 'keyed.start') executions++;
      if (ev.type === 'keyed.abort') alive = false;
      if (ev.type === 'keyed.answer') answers.push({ attacher: ev.attacher, answer: ev.answer });
    });
    actor.start();
    return actor;
  };
  const finish = () => {
    if (work && alive && work.getSnapshot().value === 'running') {
      work.send({ type: 'tool.finished', outcome: { kind: 'result', result: RESULT } });
    }
  };
  const answerFor = (attacher: string) => answers.filter((a) => a.attacher === attacher).at(-1)?.answer;

  let attempts = 0;
  let lastEventId: string | undefined;
  let headerRetried = false;
  let ranBefore = false;
  for (let i = 0; i < 12; i++) {
    const fault = s.faults[i] ?? 'none';
    const during = s.finishesDuringFault[i] ?? false;
    const attacher = `a${i}`;
    let end: StatelessStreamEnd;
    if (fault === 'refused') end = { kind: 'refused' };
    else if (fault === 'unavailable') end = { kind: 'http-status', status: 503, retryAfterMs: 100 };
    else if (!s.extension) {
      // The spec's server: every request runs; a cut cancels it, after the side effect in the worst case.
      executions++;
      if (fault === 'none') end = { kind: 'result', resultType: 'complete' };
      else if (fault === 'instance-death' || fault === 'cut-mid-stream') end = { kind: 'cut-mid-stream' };
      else end = { kind: endKind(fault) };
    } else {
      const isReissue = i > 0 && work !== undefined;
      if (!work) {
        // The memo is durable here, so it is complete for the whole window.
        if (
          admitUnknownKey(isReissue, Number.POSITIVE_INFINITY, DEFAULT_CONTINUITY_SETTINGS.memoWindowMs)
            .kind !== 'execute'
        ) {
          throw new Error('a durable memo never loses a key');
        }
        work = startWork(attacher);
      } else {
        const window = {
          oldest: 1,
          head,
          appendedAt: Array.from({ length: head }, () => 0),
          finished: false,
        };
        const resume = keyedResume(lastEventId, { epoch: EPOCH, stream: 1, window });
        work.send({ type: 'reissue.arrived', attacher, fingerprint: FP, resume });
      }
      if (fault === 'instance-death') {
        work.send({ type: 'instance.died' });
        alive = false;
      }
      if (fault === 'cut-mid-stream' && work.getSnapshot().value === 'running') {
        head++;
        lastEventId = formatEventId({ epoch: EPOCH, stream: 1, seq: head });
      }
      if (fault === 'none') finish();
      else if (fault !== 'instance-death') {
        work.send({ type: 'stream.closed', attacher });
        if (during) finish();
      }
      const a = answerFor(attacher);
      if (fault === 'none' || fault === 'instance-death') {
        if (a?.kind === 'outcome' || a?.kind === 'recorded') end = { kind: 'result', resultType: 'complete' };
        else if (a?.kind === 'outcome-unknown')
          end = { kind: 'error-response', code: ContinuityErrorCode.OUTCOME_UNKNOWN };
        else if (a?.kind === 'cancelled')
          end = { kind: 'error-response', code: ContinuityErrorCode.CANCELLED };
        // Attached to work that will never finish: the stream goes silent and the client's stall timer fires.
        else end = { kind: 'stalled' };
      } else end = { kind: endKind(fault) };
    }
    const d = decideStatelessEnd(
      end,
      {
        tool: s.readOnly ? { readOnlyHint: true } : undefined,
        extension: s.extension ? { memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs } : undefined,
        idempotencyKey: s.extension ? KEY : undefined,
        lastEventId,
        attempts,
        mayHaveRunBefore: ranBefore,
        headerMismatchRetried: headerRetried,
        elapsedMs: i * 1_000,
        jitterSeed: i,
      },
      DEFAULT_STATELESS_POLICY,
      table,
    );
    if (d.action !== 'reissue' && d.action !== 'backoff-reissue') return { executions, final: d, attempts };
    if (d.refreshToolList) headerRetried = true;
    ranBefore ||= mayHaveRun(end);
    if (d.carry) lastEventId = d.carry.lastEventId ?? undefined;
    attempts++;
  }
  return { executions, final: 'hang', attempts };
}

function endKind(fault: 'cut-before-response' | 'cut-mid-stream' | 'stall') {
  return fault === 'stall' ? ('stalled' as const) : fault;
}

/** The first broken rule of one run, or undefined. */
function brokenRule(s: Scenario, o: Outcome): string | undefined {
  if (o.final === 'hang') return 'the call never ended';
  if (!s.readOnly && o.executions > 1) return `a charge ran ${o.executions} times`;
  if (o.final.action === 'deliver' && o.executions === 0) return 'a result from nothing';
  if (o.final.action === 'fail' && o.executions > 0) return 'a definite failure for a call that ran';
  const faulty = s.faults.filter((f) => f !== 'none').length;
  const safe = s.extension || s.readOnly;
  if (safe && !s.faults.includes('instance-death') && faulty <= DEFAULT_STATELESS_POLICY.maxReissues) {
    if (o.final.action !== 'deliver') return `no result through ${faulty} faults (${o.final.reason})`;
  }
  return undefined;
}

const faultArb = fc.constantFrom<Fault>(
  'none',
  'refused',
  'unavailable',
  'cut-before-response',
  'cut-mid-stream',
  'stall',
  'instance-death',
);
const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  faults: fc.array(faultArb, { maxLength: 6 }),
  finishesDuringFault: fc.array(fc.boolean(), { maxLength: 6 }),
  extension: fc.boolean(),
  readOnly: fc.boolean(),
});

describe('one call through faults: the decision table and the keyed-request machine together', () => {
  it('the issue incident: a cut during a charge with the extension → one charge, the real result', () => {
    const o = run({
      faults: ['cut-mid-stream', 'cut-before-response'],
      finishesDuringFault: [false, true],
      extension: true,
      readOnly: false,
    });
    expect(o.executions).toBe(1);
    expect(o.final).toEqual({ action: 'deliver', reason: 'answered' });
    expect(o.attempts).toBe(2);
  });

  it('the same cut without the extension → one charge and outcome unknown at once, never a second charge', () => {
    const o = run({
      faults: ['cut-mid-stream'],
      finishesDuringFault: [true],
      extension: false,
      readOnly: false,
    });
    expect(o.executions).toBe(1);
    expect(o.final).toEqual({ action: 'outcome-unknown', reason: 'cut_mid_stream' });
  });

  it('a read-only tool without the extension is re-issued through the same cuts and succeeds', () => {
    const o = run({
      faults: ['cut-mid-stream', 'stall'],
      finishesDuringFault: [],
      extension: false,
      readOnly: true,
    });
    expect(o.final).toEqual({ action: 'deliver', reason: 'answered' });
  });

  it('the instance dies during a keyed charge → outcome unknown, with the key, and no second run', () => {
    const o = run({
      faults: ['cut-mid-stream', 'instance-death'],
      finishesDuringFault: [],
      extension: true,
      readOnly: false,
    });
    expect(o.executions).toBe(1);
    expect(o.final).toEqual({
      action: 'outcome-unknown',
      reason: 'server_outcome_unknown',
      idempotencyKey: KEY,
    });
  });

  test.prop([scenarioArb], { numRuns: 2_000 })(
    'at most one charge, no hang, honest endings, and a result whenever the faults leave room',
    (s) => {
      expect(brokenRule(s, run(s))).toBeUndefined();
    },
  );

  const blindTable = (cases: StatelessCase[]): Readonly<Record<StatelessCase, StatelessRow>> => {
    const t = { ...STATELESS_DECISION_TABLE };
    for (const c of cases) t[c] = { action: 'backoff-reissue', reason: t[c].reason };
    return t;
  };
  const MUTANTS: Array<[string, AnyStateMachine, Readonly<Record<StatelessCase, StatelessRow>>, RegExp]> = [
    // What the spec asks of a client without the extension: re-issue whatever broke.
    [
      'a client that re-issues every broken stream',
      keyedRequestMachine,
      blindTable(['cut-before-response', 'cut-mid-stream', 'stalled']),
      /a charge ran [2-9] times/,
    ],
    [
      'a server that runs a re-issue again',
      keyedRequestMachine.provide({ actions: { attachToRunning: emit({ type: 'keyed.start' }) } }),
      STATELESS_DECISION_TABLE,
      /a charge ran [2-9] times/,
    ],
    [
      'a server for which a closed stream cancels the keyed work',
      keyedRequestMachine.provide({
        actions: { detach: enqueueActions(({ enqueue }) => enqueue.emit({ type: 'keyed.abort' })) },
      }),
      STATELESS_DECISION_TABLE,
      /no result through/,
    ],
  ];

  it.each(MUTANTS)('catches the mutant: %s', (_name, server, table, rule) => {
    const out = fc.check(
      fc.property(scenarioArb, (s) => brokenRule(s, run(s, server, table)) === undefined),
      { numRuns: 2_000, seed: 3 },
    );
    expect(out.failed).toBe(true);
    // Caught for the right reason, not by an exception of the simulation.
    const [scenario] = out.counterexample as [Scenario];
    expect(brokenRule(scenario, run(scenario, server, table))).toMatch(rule);
  });
});
