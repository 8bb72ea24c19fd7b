import fc from 'fast-check';
import { type ModernTool, TOOL_NAMES_MODERN } from './world-modern/tools.js';
import { type CommandModern, GONE_FOR_GOOD_MS, type ModernWorldConfig } from './world-modern/world.js';

/** Random fault schedules for the 2026-07-28 world. Picks are positions, so commands stay valid while shrinking. */
export const callArbModern: fc.Arbitrary<CommandModern> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.constantFrom(...TOOL_NAMES_MODERN).map((tool) => ({ kind: 'call', tool }) as const),
  },
  // The charges, more often: they are what "at most once" is about.
  {
    weight: 3,
    arbitrary: fc.constantFrom('charge', 'meteredCharge').map((tool) => ({ kind: 'call', tool }) as const),
  },
);

const advanceArb = fc
  .oneof(
    // Short steps land faults inside an attempt (between the request running and its first byte).
    { weight: 4, arbitrary: fc.integer({ min: 1, max: 80 }) },
    { weight: 4, arbitrary: fc.integer({ min: 1, max: 3_000 }) },
    // Past a small memo window.
    { weight: 1, arbitrary: fc.integer({ min: 5_000, max: 20_000 }) },
  )
  .map((ms) => ({ kind: 'advance', ms }) as const);

export const commandArbModern: fc.Arbitrary<CommandModern> = fc.oneof(
  { weight: 5, arbitrary: callArbModern },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...TOOL_NAMES_MODERN), fc.nat(5))
      .map(([tool, pick]) => ({ kind: 'callReusingKey', tool, pick }) as const),
  },
  { weight: 6, arbitrary: advanceArb },
  { weight: 4, arbitrary: fc.nat(5).map((pick) => ({ kind: 'reset', pick }) as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'resetAll' } as const) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 3 }), fc.constantFrom(503, 503, 429, 500, 502), fc.boolean())
      .map(([count, status, retryAfter]) => ({ kind: 'serverError', count, status, retryAfter }) as const),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 2 }).map((count) => ({ kind: 'upstreamReset', count }) as const),
  },
  { weight: 1, arbitrary: fc.nat(5).map((pick) => ({ kind: 'endStream', pick }) as const) },
  { weight: 1, arbitrary: fc.nat(5).map((pick) => ({ kind: 'stall', pick }) as const) },
  {
    weight: 2,
    arbitrary: fc.integer({ min: 100, max: 12_000 }).map((ms) => ({ kind: 'partition', ms }) as const),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 500, max: 12_000 }).map((ms) => ({ kind: 'blackhole', ms }) as const),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'duplicate' } as const) },
  // A tool starts or stops declaring an `Mcp-Param-*` header: the application's view goes stale.
  {
    weight: 1,
    arbitrary: fc
      .constantFrom<ModernTool>('charge', 'meteredCharge', 'charge', 'scan', 'upsert')
      .map((tool) => ({ kind: 'schemaChange', tool }) as const),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.nat(1), fc.constantFrom(0, 0, 1_500, 6_000, GONE_FOR_GOOD_MS))
      .map(([pick, downMs]) => ({ kind: 'instanceDies', pick, downMs }) as const),
  },
  // A connection whose message never completes while a few bytes keep coming (the progress rule's case).
  { weight: 1, arbitrary: fc.nat(5).map((pick) => ({ kind: 'trickle', pick }) as const) },
  // The application aborts a call it made.
  { weight: 1, arbitrary: fc.nat(5).map((pick) => ({ kind: 'cancel', pick }) as const) },
);

/** Up to 24 commands with at least one call (without one, "at most once" and "no hang" are vacuous). */
export const scheduleArbModern: fc.Arbitrary<CommandModern[]> = fc
  .tuple(callArbModern, fc.array(commandArbModern, { maxLength: 23, size: 'max' }), fc.nat())
  .map(([call, rest, at]) => {
    const i = at % (rest.length + 1);
    return [...rest.slice(0, i), call, ...rest.slice(i)];
  });

export const worldConfigArbModern: fc.Arbitrary<ModernWorldConfig> = fc
  .record({
    extension: fc.boolean(),
    memo: fc.constantFrom('memory', 'durable'),
    instances: fc.constantFrom(1, 2),
    heartbeat: fc.boolean(),
    // The longest is longer than the client's stall timeout: a silent connection is then the client's to end.
    lbIdleMs: fc.constantFrom(300, 2_500, 5_000),
    headersEarly: fc.boolean(),
    // A small window so memo expiry and the client's window rule happen inside a world.
    memoWindowMs: fc.constantFrom(8_000, 600_000),
    memoOld: fc.boolean(),
    maxEventsPerRequest: fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }) },
      { weight: 1, arbitrary: fc.constant(20) },
    ),
    eventRetentionMs: fc.constantFrom(2_000, 600_000),
    latencyMaxMs: fc.constantFrom(1, 10, 40),
    seed: fc.nat(),
    // Sometimes answers take longer than the stall timeout to arrive, steadily (link.ts).
    slowLink: fc.oneof(
      { weight: 5, arbitrary: fc.constant(false) },
      { weight: 1, arbitrary: fc.constant(true) },
    ),
    // Sometimes two applications with their own credentials share the server (and, by chance, keys).
    principals: fc.constantFrom<1 | 2>(1, 1, 2),
    // Sometimes a bound on keys the calls reach (past it a new key is refused: 429): per principal, or per
    // address on a server without `authenticate`.
    bounded: fc.oneof(
      { weight: 6, arbitrary: fc.constant(false as const) },
      { weight: 1, arbitrary: fc.constant('principal' as const) },
      { weight: 1, arbitrary: fc.constant('address' as const) },
    ),
  })
  .map(
    ({ bounded, ...c }): ModernWorldConfig => ({
      ...c,
      instances: c.memo === 'memory' ? 1 : c.instances,
      // A bound is about what one principal (address) may take from another: bounded worlds have two.
      ...(bounded === 'principal' ? { maxKeysPerPrincipal: 2, principals: 2 as const } : {}),
      ...(bounded === 'address' ? { maxKeysPerAddress: 2, principals: 2 as const } : {}),
    }),
  );

/** A charge that reports progress, its stream cut after some of it, while a small log overflows. */
export const evictionArbModern: fc.Arbitrary<CommandModern[]> = fc
  .tuple(
    fc.integer({ min: 100, max: 700 }),
    fc.integer({ min: 300, max: 2_000 }),
    fc.array(commandArbModern, { maxLength: 10, size: 'max' }),
  )
  .map(([wait, cut, rest]) => [
    { kind: 'call', tool: 'meteredCharge' } as const,
    { kind: 'advance', ms: wait } as const,
    { kind: 'partition', ms: cut } as const,
    ...rest,
  ]);

export const scenarioArbModern = fc.record({
  config: worldConfigArbModern,
  commands: fc.oneof(
    { weight: 6, arbitrary: scheduleArbModern },
    { weight: 1, arbitrary: evictionArbModern },
  ),
});

export type ModernScenario = { readonly config: ModernWorldConfig; readonly commands: CommandModern[] };
