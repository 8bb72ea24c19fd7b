import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ContinuityMeta } from '../machines/continuity-extension.js';
import { scenarioArbModern } from './arbitraries-modern.js';
import { RUNS_MODERN, SEED_MODERN } from './budget-modern.js';
import { CHECK_NAMES_MODERN, describeVerdictModern, judgeModernWorld } from './checks-modern.js';
import {
  CANCEL_THROUGH_SHARER,
  DIRECTED_MODERN,
  INCIDENT_EXTENSION,
  INCIDENT_SPEC,
  LOST_410,
  MEMO_WINDOW,
} from './corpus-modern.js';
import { ModernCoverageTally } from './coverage-modern.js';
import { freshSeed } from './judge.js';
import { PORT_SCENARIOS_MODERN } from './world-modern/scenarios.js';
import { type ModernWorldOutcome, runScheduleModern } from './world-modern/world.js';

/**
 * The 2026-07-28 model's invariants over random fault schedules: every simulated world (the real call
 * machine on the client, the real keyed plan and machine on the server) is judged by every check. The seed
 * is printed first; on failure fast-check prints the shrunk schedule with `seed` and `path`
 * (MCPC_MODERN_SEED replays it).
 */
const seed = SEED_MODERN ?? freshSeed();
const tally = new ModernCoverageTally();

function simulate(s: {
  config: ModernWorldOutcome['config'];
  commands: Parameters<typeof runScheduleModern>[0];
}) {
  const observer = tally.observer();
  const outcome = runScheduleModern(s.commands, s.config, undefined, observer);
  observer.done();
  return outcome;
}

const callOf = (o: ModernWorldOutcome, key = 'c1') => o.recorder.calls.get(key);

describe('MCP 2026-07-28: the properties of the real client and server machines under random faults', () => {
  // A count of worlds, not a time budget: a busy machine only makes it slower.
  it(`${CHECK_NAMES_MODERN.join(', ')}: every check on each of ${RUNS_MODERN} worlds`, {
    timeout: 600_000,
  }, () => {
    console.info(
      `2026 model properties: ${RUNS_MODERN} worlds, seed ${seed} (replay: MCPC_MODERN_SEED=${seed})`,
    );
    fc.assert(
      fc.property(scenarioArbModern, (scenario) => {
        const verdict = judgeModernWorld(simulate(scenario));
        if (Object.keys(verdict).length > 0) throw new Error(describeVerdictModern(verdict));
      }),
      { numRuns: RUNS_MODERN, seed },
    );
  });

  it('every modelled decision branch is reached by some world (the random ones, and the directed corpus)', () => {
    for (const scenario of [...DIRECTED_MODERN, ...PORT_SCENARIOS_MODERN]) {
      const verdict = judgeModernWorld(simulate(scenario));
      expect(verdict, `${scenario.name}\n${describeVerdictModern(verdict)}`).toEqual({});
    }
    console.info(tally.table());
    expect(tally.unreached()).toEqual([]);
  });

  it("the issue's incident with the extension: a balancer cutting every 300 ms idle during a 1.5 s charge → one charge, the real result", () => {
    const o = runScheduleModern(INCIDENT_EXTENSION.commands, INCIDENT_EXTENSION.config);
    expect(callOf(o)?.outcome).toBe('result');
    expect(o.recorder.sideEffects.get('c1')).toBe(1);
    expect(callOf(o)?.attempts).toBeGreaterThan(1);
  });

  it('the same balancer against a server without the extension → one charge, outcome unknown at once after the cut', () => {
    const o = runScheduleModern(INCIDENT_SPEC.commands, INCIDENT_SPEC.config);
    const c = callOf(o);
    expect(c?.outcome).toBe('unknown');
    expect(o.recorder.sideEffects.get('c1')).toBe(1);
    // The cut comes after 300 ms idle; the call ends within a few ms of it, never at a request timeout.
    expect((c?.endedAt ?? Number.POSITIVE_INFINITY) - (c?.at ?? 0)).toBeLessThan(400);
  });

  it('stalls past a small memo window: the client stops re-issuing (memo_window_passed), one charge', () => {
    const o = runScheduleModern(MEMO_WINDOW.commands, MEMO_WINDOW.config);
    expect(callOf(o)).toMatchObject({ outcome: 'unknown', reason: 'memo_window_passed' });
    expect(o.recorder.sideEffects.get('c1')).toBe(1);
  });

  it('fixed finding: a re-issue of a call no attempt of which may have run goes as a first attempt (no lastEventId), so a memo younger than its window runs it: one charge, the result', () => {
    const o = runScheduleModern(
      [
        { kind: 'partition', ms: 400 },
        { kind: 'call', tool: 'charge' },
        { kind: 'advance', ms: 5_000 },
      ],
      { ...INCIDENT_EXTENSION.config, heartbeat: true },
    );
    expect(callOf(o)?.outcome).toBe('result');
    expect(o.recorder.executions.get('c1') ?? 0).toBe(1);
    expect(o.recorder.sideEffects.get('c1')).toBe(1);
  });
  it('fixed finding (seed 90000338): a cancel through one of two calls sharing a key ends the other cancelled on the server, and that is no spurious outcome unknown', () => {
    const o = runScheduleModern(CANCEL_THROUGH_SHARER.commands, CANCEL_THROUGH_SHARER.config);
    expect(o.recorder.calls.get('c1')?.outcome).toBe('aborted');
    expect(o.recorder.calls.get('c2')).toMatchObject({ outcome: 'unknown', reason: 'cancelled_on_server' });
    expect(o.recorder.cancels).toEqual([expect.objectContaining({ callKey: 'c1', stateSent: 'cancelled' })]);
    expect(judgeModernWorld(o)).toEqual({});
  });
  it('fixed finding (seed 1359604915): a 410 the partition lost holds the client to nothing; the 410 it heard moves its cursor', () => {
    const o = runScheduleModern(LOST_410.commands, LOST_410.config);
    const sent: string[] = [];
    for (const c of o.recorder.closedByClient.keys()) {
      const meta = (c.exchange.body as { params?: { _meta?: Record<string, unknown> } }).params?._meta;
      const cursor = meta?.[ContinuityMeta.lastEventId];
      if (typeof cursor === 'string') sent.push(cursor);
    }
    // Two re-issues went out from the cursor the client had (the first one's 410 never reached it); the
    // one 410 it heard is the only one judged, and its re-issue carried that 410's resumeAfter.
    expect(sent.filter((c) => c === 'k1-1-3').length).toBe(2);
    expect(o.recorder.evictions).toEqual([
      expect.objectContaining({ offered: 'k1-1-6', sent: 'k1-1-3', next: 'k1-1-6' }),
    ]);
    expect(judgeModernWorld(o)).toEqual({});
  });
});
