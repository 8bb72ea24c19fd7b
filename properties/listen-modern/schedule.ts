import fc from 'fast-check';
import type { ListenLogLimits } from '../../machines/server/listen-log.js';

/**
 * The schedules of the listen world (world.ts): what the server's application publishes, and what the
 * world breaks, as data, so fast-check can generate, shrink and print them. Every schedule ends in
 * quiescence (no more faults nor publishes, run until the client is acknowledged again and idle).
 */

/** The changes the application can publish: the three lists, and updates of three resources. */
export const CHANGES = [
  { kind: 'tools_list_changed' },
  { kind: 'prompts_list_changed' },
  { kind: 'resources_list_changed' },
  { kind: 'resource_updated', uri: 'file:///a' },
  { kind: 'resource_updated', uri: 'file:///b' },
  /** Never subscribed by any filter the arbitrary draws: a change the filter rejects. */
  { kind: 'resource_updated', uri: 'file:///never' },
] as const;

export type ListenCommand =
  /** The application publishes `CHANGES[change]` (nothing, while the server is down). */
  | { readonly kind: 'publish'; readonly change: number }
  | { readonly kind: 'advance'; readonly ms: number }
  /**
   * The world waits for the client's next connection (the application holding a stream), lets `afterMs`
   * pass (so a cut lands in any phase: request on the wire, subscription pending, ack in flight, streaming),
   * then cuts it: a reset, or (after the headers) a clean end.
   */
  | { readonly kind: 'cut'; readonly clean: boolean; readonly afterMs: number }
  /**
   * Like `cut`, but the connection goes silent instead: everything on it is swallowed and nobody is told.
   * Only the client's stall timer (the keep-alives stop) ends it.
   */
  | { readonly kind: 'blackhole'; readonly afterMs: number }
  /**
   * The server restarts: every stream is cut, a new log (a new epoch) serves after `downMs`; with
   * `withoutExtension` it comes back as a version without the listen part (a rolling deploy, a rollback).
   */
  | { readonly kind: 'restart'; readonly downMs: number; readonly withoutExtension?: boolean };

export interface ListenWorldConfig {
  readonly filter: {
    readonly toolsListChanged?: boolean;
    readonly promptsListChanged?: boolean;
    readonly resourcesListChanged?: boolean;
    readonly resourceSubscriptions?: readonly string[];
  };
  readonly limits: ListenLogLimits;
  /** The first server run serves the listen part (its bus numbers changes, its acks carry positions). */
  readonly extension: boolean;
  /** Each frame and request takes 1..latencyMaxMs on the wire. */
  readonly latencyMaxMs: number;
  /** The SDK subscribes a stream 0..subscribeGapMaxMs after its request arrived (its own awaits). */
  readonly subscribeGapMaxMs: number;
  readonly seed: number;
}

export interface ListenScenario {
  readonly config: ListenWorldConfig;
  readonly commands: readonly ListenCommand[];
}

/** Limits no world reaches: every gap must be exact unless the server restarted. */
export const BIG_LIMITS: ListenLogLimits = { retentionMs: 1_000_000_000, maxChanges: 1_000_000 };

const filterArb = fc
  .record({
    tools: fc.boolean(),
    prompts: fc.boolean(),
    resources: fc.boolean(),
    a: fc.boolean(),
    b: fc.boolean(),
  })
  .map(({ tools, prompts, resources, a, b }) => {
    const uris = [...(a ? ['file:///a'] : []), ...(b ? ['file:///b'] : [])];
    const none = !tools && !prompts && !resources && uris.length === 0;
    return {
      ...(tools || none ? { toolsListChanged: true } : {}),
      ...(prompts ? { promptsListChanged: true } : {}),
      ...(resources ? { resourcesListChanged: true } : {}),
      ...(uris.length > 0 ? { resourceSubscriptions: uris } : {}),
    };
  });

const limitsArb: fc.Arbitrary<ListenLogLimits> = fc.oneof(
  fc.constant(BIG_LIMITS),
  fc.record({ retentionMs: fc.integer({ min: 10, max: 150 }), maxChanges: fc.constant(1_000_000) }),
  fc.record({ retentionMs: fc.constant(1_000_000_000), maxChanges: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ retentionMs: fc.integer({ min: 20, max: 400 }), maxChanges: fc.integer({ min: 1, max: 6 }) }),
);

export const listenConfigArb: fc.Arbitrary<ListenWorldConfig> = fc.record({
  filter: filterArb,
  limits: limitsArb,
  extension: fc.nat(5).map((n) => n > 0),
  latencyMaxMs: fc.integer({ min: 1, max: 8 }),
  subscribeGapMaxMs: fc.integer({ min: 0, max: 30 }),
  seed: fc.integer({ min: 1, max: 0x7fffffff }),
});

const commandArb = (restarts: boolean): fc.Arbitrary<ListenCommand> =>
  fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('publish' as const), change: fc.nat(5) }) },
    {
      weight: 5,
      // Mostly short steps, so cuts land inside the short windows (an ack in flight, a subscription pending).
      arbitrary: fc.record({
        kind: fc.constant('advance' as const),
        ms: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 60 })),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('cut' as const),
        clean: fc.boolean(),
        afterMs: fc.integer({ min: 0, max: 40 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('blackhole' as const),
        afterMs: fc.integer({ min: 0, max: 40 }),
      }),
    },
    {
      weight: restarts ? 1 : 0,
      arbitrary: fc.record({
        kind: fc.constant('restart' as const),
        downMs: fc.integer({ min: 0, max: 60 }),
        withoutExtension: fc.nat(5).map((n) => n === 0),
      }),
    },
  );

/** A world: a config, and up to 60 commands (a third of the worlds never restart the server). */
export const listenScenarioArb: fc.Arbitrary<ListenScenario> = fc
  .tuple(listenConfigArb, fc.nat(2))
  .chain(([config, r]) =>
    fc.record({
      config: fc.constant(config),
      commands: fc.array(commandArb(r > 0), { maxLength: 60, size: 'large' }),
    }),
  );
