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
import { formatEventId, parseEventId } from '../machines/event-id.js';
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
  /** Per attempt: progress events the running body emits while nobody is attached. */
  readonly eventsWhileCut: readonly number[];
  readonly extension: boolean;
  readonly readOnly: boolean;
}

interface Outcome {
  /** How many times the tool body ran. */
  readonly executions: number;
  readonly final: StatelessDecision | 'hang';
  readonly attempts: number;
  /** 410 answers (each costs a re-issue). */
  readonly evictions: number;
  /** Events the body emitted, and what the client made of them (extension only: unkeyed events have no ids). */
  readonly events: {
    readonly emitted: number;
    readonly seen: number;
    readonly reportedLost: number;
    readonly unflaggedLost: number;
    readonly duplicates: number;
  };
}

const FP = 'charge(5)';
const KEY = 'k-1';
const EPOCH = 'k1';
const RESULT = { resultType: 'complete', content: [] };
/** A tiny retention bound, so evictions happen. */
const MAX_EVENTS = 2;

function run(
  s: Scenario,
  server: AnyStateMachine = keyedRequestMachine,
  table = STATELESS_DECISION_TABLE,
): Outcome {
  let executions = 0;
  let work: Actor<AnyStateMachine> | undefined;
  let alive = true;
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
  const running = () => work !== undefined && alive && work.getSnapshot().value === 'running';
  const finish = () => {
    if (running()) work?.send({ type: 'tool.finished', outcome: { kind: 'result', result: RESULT } });
  };
  const answerFor = (attacher: string) => answers.filter((a) => a.attacher === attacher).at(-1)?.answer;

  // The key's event log (dense sequence numbers, the newest MAX_EVENTS retained) and the client's view of it.
  let head = 0;
  const oldest = () => Math.max(1, head - MAX_EVENTS + 1);
  let maxSeen = 0;
  const ev = { seen: 0, reportedLost: 0, unflaggedLost: 0, duplicates: 0 };
  let lastEventId: string | undefined;
  const receive = (seq: number) => {
    if (seq <= maxSeen) ev.duplicates++;
    else {
      ev.unflaggedLost += seq - maxSeen - 1;
      maxSeen = seq;
      ev.seen++;
      lastEventId = formatEventId({ epoch: EPOCH, stream: 1, seq });
    }
  };
  /** The server streams what it still retains after `afterSeq`. */
  const replay = (afterSeq: number) => {
    for (let seq = Math.max(afterSeq + 1, oldest()); seq <= head; seq++) receive(seq);
  };

  let attempts = 0;
  let evictions = 0;
  let headerRetried = false;
  let ranBefore = false;
  for (let i = 0; i < 16; i++) {
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
      let first: KeyedAnswer | undefined;
      if (!work) {
        // The memo is durable here, so it is complete for the whole window.
        const isReissue = i > 0;
        const admitted = admitUnknownKey(
          isReissue,
          Number.POSITIVE_INFINITY,
          DEFAULT_CONTINUITY_SETTINGS.memoWindowMs,
        );
        if (admitted.kind !== 'execute') throw new Error('a durable memo never loses a key');
        work = startWork(attacher);
        first = { kind: 'attach', afterSeq: 0 };
      } else {
        const window = {
          oldest: oldest(),
          head,
          appendedAt: Array.from({ length: head - oldest() + 1 }, () => 0),
          finished: false,
        };
        const resume = keyedResume(lastEventId, { epoch: EPOCH, stream: 1, window });
        work.send({ type: 'reissue.arrived', attacher, fingerprint: FP, resume });
        first = answerFor(attacher);
      }
      const bytesArrive = fault === 'none' || fault === 'cut-mid-stream' || fault === 'instance-death';
      if (bytesArrive && (first?.kind === 'attach' || first?.kind === 'recorded')) replay(first.afterSeq);
      if (fault === 'instance-death') {
        work.send({ type: 'instance.died' });
        alive = false;
      }
      if (fault === 'cut-mid-stream' && running()) {
        head++;
        // Only an attached stream carries the new event; a refused re-issue has no stream.
        if (first?.kind === 'attach') receive(head);
      }
      if (fault === 'none') finish();
      else if (fault !== 'instance-death') {
        work.send({ type: 'stream.closed', attacher });
        if (running()) head += s.eventsWhileCut[i] ?? 0;
        if (during) finish();
      }
      const a = answerFor(attacher);
      if (bytesArrive && a?.kind === 'evicted') {
        evictions++;
        const body = {
          jsonrpc: '2.0',
          id: i,
          error: { code: a.code, message: 'events evicted', data: a.resume },
        };
        end = { kind: 'http-status', status: 410, body };
      } else if (fault === 'none' || fault === 'instance-death') {
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
    const events = { emitted: head, ...ev };
    if (d.action !== 'reissue' && d.action !== 'backoff-reissue')
      return { executions, final: d, attempts, evictions, events };
    if (d.refreshToolList) headerRetried = true;
    ranBefore ||= mayHaveRun(end);
    if (d.gap) {
      // The client reports the gap to the application and resumes after it.
      const after = d.carry?.lastEventId ? parseEventId(d.carry.lastEventId)?.seq : undefined;
      if (after === undefined || d.gap.lostCount === null) throw new Error('a 410 of this server is exact');
      ev.reportedLost += d.gap.lostCount;
      maxSeen = after;
      lastEventId = d.carry?.lastEventId ?? undefined;
    }
    attempts++;
  }
  return { executions, final: 'hang', attempts, evictions, events: { emitted: head, ...ev } };
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
  const e = o.events;
  if (e.unflaggedLost > 0) return `${e.unflaggedLost} events lost without a report`;
  if (e.duplicates > 0) return `${e.duplicates} events delivered twice`;
  if (s.extension && o.final.action === 'deliver' && e.seen + e.reportedLost !== e.emitted) {
    return `a result with ${e.emitted - e.seen - e.reportedLost} events unaccounted for`;
  }
  const faulty = s.faults.filter((f) => f !== 'none').length + o.evictions;
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
  eventsWhileCut: fc.array(fc.nat(3), { maxLength: 6 }),
  extension: fc.boolean(),
  readOnly: fc.boolean(),
});

describe('one call through faults: the decision table and the keyed-request machine together', () => {
  it('the issue incident: a cut during a charge with the extension → one charge, the real result', () => {
    const o = run({
      faults: ['cut-mid-stream', 'cut-before-response'],
      finishesDuringFault: [false, true],
      eventsWhileCut: [],
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
      eventsWhileCut: [],
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
      eventsWhileCut: [],
      extension: false,
      readOnly: true,
    });
    expect(o.final).toEqual({ action: 'deliver', reason: 'answered' });
  });

  it('the instance dies during a keyed charge → outcome unknown, with the key, and no second run', () => {
    const o = run({
      faults: ['cut-mid-stream', 'instance-death'],
      finishesDuringFault: [],
      eventsWhileCut: [],
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

  it('events evicted while the stream was cut: the re-issue learns the exact count and resumes after it', () => {
    const o = run({
      faults: ['cut-mid-stream', 'stall'],
      finishesDuringFault: [false, true],
      eventsWhileCut: [3, 0],
      extension: true,
      readOnly: false,
    });
    expect(o.executions).toBe(1);
    expect(o.final).toEqual({ action: 'deliver', reason: 'answered' });
    expect(o.evictions).toBe(1);
    // Event 1 seen before the cut; 2 evicted and reported (the log keeps 2); 3 and 4 replayed.
    expect(o.events).toEqual({ emitted: 4, seen: 3, reportedLost: 1, unflaggedLost: 0, duplicates: 0 });
  });

  it('the generators reach evictions and keyed results', () => {
    const outs = fc.sample(scenarioArb, { numRuns: 2_000, seed: 13 }).map((sc) => run(sc));
    const evictedThenDelivered = outs.filter(
      (o) => o.evictions > 0 && o.final !== 'hang' && o.final.action === 'deliver',
    );
    expect(evictedThenDelivered.length).toBeGreaterThan(20);
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
    // The design note's second incident, on 2026-07-28: an evicted cursor silently resumes at what is left.
    [
      'a server that attaches past an evicted cursor',
      keyedRequestMachine.provide({ guards: { cannotResume: () => false } }),
      STATELESS_DECISION_TABLE,
      /lost without a report/,
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
