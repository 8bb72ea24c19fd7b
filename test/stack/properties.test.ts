import { describe, expect, it } from 'vitest';
import {
  assertStackProperties,
  judge,
  report,
  runStack,
  STACK_CHECKS,
  type StackCommand,
} from './stack-world.js';

/**
 * The model's properties (properties/checks.ts) on the real stack: SDK Client + ContinuityClientTransport
 * → FaultProxy → createContinuityServer + SDK McpServer, over loopback, in real time. fast-check generates
 * schedules of calls and faults; every run is judged by every check and a failure prints the violations and
 * the run's timeline. Environment: MCPC_STACK_RUNS (default 60, about 30 s on the 2-core CI machine under load); MCPC_STACK_SEED and MCPC_STACK_PATH replay
 * a reported failure; MCPC_STACK_SHRINK=1 shrinks it (each shrink step is a real run, so CI does not).
 */
const RUNS = Number(process.env.MCPC_STACK_RUNS ?? 60);
const SHRINK = process.env.MCPC_STACK_SHRINK === '1';

describe('the model properties hold on the real stack', () => {
  it(
    Object.keys(STACK_CHECKS).join(', '),
    () => assertStackProperties({ runs: RUNS, shrink: SHRINK }),
    Math.max(120_000, RUNS * 10_000),
  );
});

describe('the stack checks can fail', () => {
  /** A server restart while a slow charge is in flight: the old session, and the charge's outcome, are gone. */
  const restartDuringCharge: StackCommand[] = [
    { kind: 'charge', ms: 300 },
    { kind: 'wait', ms: 50 },
    { kind: 'serverRestart' },
  ];

  it('a client that re-sends every call after a session loss charges twice, and at most once says so', async () => {
    const outcome = await runStack(restartDuringCharge, { heartbeat: true }, { retryPolicy: () => true });
    const violations = judge(outcome);
    expect(violations['at most once'], report(outcome, violations)).toEqual([
      expect.stringMatching(/^c1 \(charge\) ran 2 times/),
    ]);
  });

  it('the correct client on the same schedule: outcome unknown, one charge, no violation', async () => {
    const outcome = await runStack(restartDuringCharge, { heartbeat: true });
    const violations = judge(outcome);
    expect(violations, report(outcome, violations)).toEqual({});
    expect(outcome.calls.get('c1')?.outcome?.kind).toBe('unknown');
    expect(outcome.effects.get('c1')).toBe(1);
    expect(outcome.mcpServers).toHaveLength(2);
  });
});

describe('regression: a restarted client shares no progress tokens with the dead one', () => {
  /**
   * Found by this property: a client restart with a durable cursor resumes the dead process's request
   * streams in the same session. The SDK uses its request id as progress token and a new Client numbers
   * from 0 again, so the dead process's progress reached whichever live call of the new process had the same
   * token: c1's progress arrived in c3's onprogress (both SDK id 2). It must go to onOrphanResult instead.
   */
  it('progress of the dead process call c1 never reaches the live call c3', async () => {
    const schedule: StackCommand[] = [
      { kind: 'chatty', count: 30, intervalMs: 5 }, // p1: SDK id 2 (initialize 0, tools/list 1)
      { kind: 'wait', ms: 40 }, // its stream is in the cursor file
      { kind: 'clientRestart' }, // p2 resumes c1's stream; its tools/list is id 0
      { kind: 'charge', ms: 0 }, // p2: id 1
      { kind: 'chatty', count: 5, intervalMs: 5 }, // p2: id 2, the same SDK id as c1
    ];
    const outcome = await runStack(schedule, { heartbeat: true });
    const violations = judge(outcome);
    expect(violations, report(outcome, violations)).toEqual({});
    // The schedule did what it is for: p2 resumed c1's stream and got its answer as an orphan.
    const orphaned = outcome.orphans.map((o) => JSON.stringify(o.message));
    expect(
      orphaned.some((m) => m.includes('sent 30')),
      report(outcome, {}),
    ).toBe(true);
    expect(outcome.calls.get('c3')?.outcome?.kind).toBe('result');
  });
});

describe('regression: a 404 to a re-sent POST is not proof that the call never ran', () => {
  /**
   * The charge's POST reaches the server and runs, but the connection resets before the response's first
   * byte (latency makes the window wide), so the client has no event id for it. It re-sends the POST (same
   * id, fine for the de-duplicating server) but the server has restarted meanwhile: 404. That 404 proves
   * only that the second attempt did not run; the first may have. The call must end outcome unknown with
   * one charge (it ran twice before the stream machine tracked `mayHaveRun`).
   */
  it('re-POST after a reset hits the restarted server: one charge, outcome unknown', async () => {
    const schedule: StackCommand[] = [
      { kind: 'latency', ms: 50 },
      { kind: 'charge', ms: 0 }, // reaches the server after 50 ms and runs; its first byte needs 50 more
      { kind: 'wait', ms: 60 },
      { kind: 'resetAll' }, // no byte of the response reached the client: it re-sends the POST
      { kind: 'serverRestart' }, // the re-sent POST gets 404
    ];
    for (let attempt = 0; attempt < 3; attempt++) {
      const outcome = await runStack(schedule, { heartbeat: true });
      const violations = judge(outcome);
      expect(violations, report(outcome, violations)).toEqual({});
      expect(outcome.calls.get('c1')?.outcome?.kind).toBe('unknown');
    }
  });
});
