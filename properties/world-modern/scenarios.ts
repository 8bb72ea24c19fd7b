import type { CommandModern, ModernWorldConfig } from './world.js';
import { DEFAULT_WORLD_MODERN } from './world.js';

/**
 * Directed worlds for what the last hop, the application and the credentials bring (link.ts, the cancel
 * command, two principals): each is judged by every property like a random world, and a mutant hunt tries
 * them first (mutants-modern.test.ts).
 */
export interface ModernScenarioNamed {
  readonly name: string;
  readonly config: ModernWorldConfig;
  readonly commands: readonly CommandModern[];
}

const world = (over: Partial<ModernWorldConfig>): ModernWorldConfig => ({ ...DEFAULT_WORLD_MODERN, ...over });

/** Five charges at once, alice's and bob's in turn with two principals: alice's third key meets a bound of two. */
const FIVE_CHARGES: readonly CommandModern[] = [
  ...Array.from({ length: 5 }, (): CommandModern => ({ kind: 'call', tool: 'charge' })),
  { kind: 'advance', ms: 3_000 },
];

export const PORT_SCENARIOS_MODERN: readonly ModernScenarioNamed[] = [
  {
    name: "a charge's stream trickles (never completing its message): the stall timer ends the attempt, the re-issue gets the result",
    config: world({}),
    commands: [
      { kind: 'call', tool: 'charge' },
      { kind: 'advance', ms: 100 },
      { kind: 'trickle', pick: 0 },
      { kind: 'advance', ms: 10_000 },
    ],
  },
  {
    name: 'a slow link: each answer takes 8 s, 64 KiB every 2 s: the calls are alive and get their results',
    config: world({ slowLink: true }),
    commands: [
      { kind: 'call', tool: 'charge' },
      { kind: 'call', tool: 'lookup' },
      { kind: 'advance', ms: 20_000 },
    ],
  },
  {
    name: 'the application aborts a charge and a lookup in flight: both end as aborted',
    config: world({}),
    commands: [
      { kind: 'call', tool: 'charge' },
      { kind: 'call', tool: 'report' },
      { kind: 'advance', ms: 200 },
      { kind: 'cancel', pick: 0 },
      { kind: 'cancel', pick: 0 },
      { kind: 'advance', ms: 3_000 },
    ],
  },
  {
    name: 'a fleet of two: the application aborts a keyed charge; its cancel reaches the other instance, the running one aborts the body at its lease tick',
    config: world({ instances: 2 }),
    commands: [
      { kind: 'call', tool: 'charge' },
      { kind: 'advance', ms: 200 },
      { kind: 'cancel', pick: 0 },
      { kind: 'advance', ms: 3_000 },
    ],
  },
  {
    name: "two principals: bob's key is one alice used; each runs its own call, alice's reuse is refused",
    config: world({ principals: 2 }),
    commands: [
      { kind: 'call', tool: 'charge' },
      { kind: 'callReusingKey', tool: 'charge', pick: 0 },
      { kind: 'callReusingKey', tool: 'charge', pick: 0 },
      { kind: 'advance', ms: 3_000 },
    ],
  },
  {
    name: 'two principals under a bound of two keys each: only the principal with a third key is refused (429)',
    config: world({ principals: 2, memoWindowMs: 8_000, maxKeysPerPrincipal: 2 }),
    commands: FIVE_CHARGES,
  },
  {
    name: 'no authenticate, two addresses under a bound of two keys each: only the address with a third key is refused (429)',
    config: world({ principals: 2, memoWindowMs: 8_000, maxKeysPerAddress: 2 }),
    commands: FIVE_CHARGES,
  },
];
