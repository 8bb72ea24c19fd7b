import fc from 'fast-check';
import { TOOL_NAMES } from './world/tools.js';
import type { Command, WorldConfig } from './world/world.js';

/** Random fault schedules. Picks are positions (`nat`), so commands stay valid while shrinking. */
export const callArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...TOOL_NAMES).map((tool) => ({ kind: 'call', tool }) as const) },
  // The tools that charge and that overflow a small log, more often.
  {
    weight: 2,
    arbitrary: fc.constantFrom('charge', 'chatty', 'slow').map((tool) => ({ kind: 'call', tool }) as const),
  },
);

export const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 5, arbitrary: callArb },
  {
    weight: 5,
    arbitrary: fc
      .oneof(
        // Short steps land faults inside a request's life (between its run and its first byte, mid-stream).
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 6_000 }),
      )
      .map((ms) => ({ kind: 'advance', ms }) as const),
  },
  { weight: 3, arbitrary: fc.nat(7).map((pick) => ({ kind: 'reset', pick }) as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'resetAll' } as const) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 4 }).map((count) => ({ kind: 'serverError', count }) as const),
  },
  { weight: 1, arbitrary: fc.nat(7).map((pick) => ({ kind: 'endStream', pick }) as const) },
  { weight: 1, arbitrary: fc.nat(7).map((pick) => ({ kind: 'stall', pick }) as const) },
  {
    weight: 2,
    arbitrary: fc.integer({ min: 100, max: 20_000 }).map((ms) => ({ kind: 'partition', ms }) as const),
  },
  { weight: 1, arbitrary: fc.boolean().map((durable) => ({ kind: 'serverRestart', durable }) as const) },
  { weight: 1, arbitrary: fc.boolean().map((durable) => ({ kind: 'clientRestart', durable }) as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'serverNotify' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'closeAndReconnect' } as const) },
);

/**
 * Up to 40 commands, drawn across the whole range (`size: 'max'`; the default size stops near 10), with
 * at least one call: a schedule without one makes "at most once" and "no hang" vacuous.
 */
export const scheduleArb: fc.Arbitrary<Command[]> = fc
  .tuple(callArb, fc.array(commandArb, { maxLength: 39, size: 'max' }), fc.nat())
  .map(([call, rest, at]) => {
    const i = at % (rest.length + 1);
    return [...rest.slice(0, i), call, ...rest.slice(i)];
  });

export const worldConfigArb: fc.Arbitrary<WorldConfig> = fc.record({
  heartbeat: fc.boolean(),
  // Small logs most of the time, so a resume after an absence often gets a 410 with an exact count.
  maxEventsPerStream: fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: 2, max: 4 }) },
    { weight: 1, arbitrary: fc.integer({ min: 5, max: 12 }) },
  ),
  retentionMs: fc.constantFrom(5_000, 60_000),
  idleTtlMs: fc.constantFrom(30_000, 120_000),
  coalesce: fc.boolean(),
  latencyMaxMs: fc.constantFrom(1, 10, 40),
  seed: fc.nat(),
  dedupe: fc.boolean(),
  replayOverlap: fc.constantFrom(0, 0, 1, 3),
});

export const scenarioArb = fc.record({ config: worldConfigArb, commands: scheduleArb });
