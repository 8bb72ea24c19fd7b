import fc from 'fast-check';
import { TOOL_NAMES } from './world/tools.js';
import type { Command, WorldConfig } from './world/world.js';

/** Random fault schedules. Picks are positions (`nat`), so commands stay valid while shrinking. */
export const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...TOOL_NAMES).map((tool) => ({ kind: 'call', tool }) as const) },
  {
    weight: 5,
    arbitrary: fc.integer({ min: 1, max: 6_000 }).map((ms) => ({ kind: 'advance', ms }) as const),
  },
  { weight: 2, arbitrary: fc.nat(7).map((pick) => ({ kind: 'reset', pick }) as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'resetAll' } as const) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 4 }).map((count) => ({ kind: 'serverError', count }) as const),
  },
  { weight: 1, arbitrary: fc.nat(7).map((pick) => ({ kind: 'endStream', pick }) as const) },
  { weight: 1, arbitrary: fc.nat(7).map((pick) => ({ kind: 'stall', pick }) as const) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 100, max: 20_000 }).map((ms) => ({ kind: 'partition', ms }) as const),
  },
  { weight: 1, arbitrary: fc.boolean().map((durable) => ({ kind: 'serverRestart', durable }) as const) },
  { weight: 1, arbitrary: fc.boolean().map((durable) => ({ kind: 'clientRestart', durable }) as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'serverNotify' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'closeAndReconnect' } as const) },
);

export const scheduleArb = fc.array(commandArb, { minLength: 1, maxLength: 24 });

export const worldConfigArb: fc.Arbitrary<WorldConfig> = fc.record({
  heartbeat: fc.boolean(),
  maxEventsPerStream: fc.integer({ min: 2, max: 12 }),
  retentionMs: fc.constantFrom(5_000, 60_000),
  idleTtlMs: fc.constantFrom(30_000, 120_000),
  coalesce: fc.boolean(),
});

export const scenarioArb = fc.record({ config: worldConfigArb, commands: scheduleArb });
