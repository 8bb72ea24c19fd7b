import type { ModernScenario } from './arbitraries-modern.js';
import {
  type CommandModern,
  DEFAULT_WORLD_MODERN,
  GONE_FOR_GOOD_MS,
  type ModernWorldConfig,
} from './world-modern/world.js';

/**
 * Directed worlds for rows random schedules reach rarely, and the issues' incidents. Each is judged by
 * every property like a random world, and feeds the coverage table.
 */
export interface ModernDirected {
  readonly name: string;
  readonly config: ModernScenario['config'];
  readonly commands: readonly CommandModern[];
}

const world = (over: Partial<ModernWorldConfig>): ModernWorldConfig => ({ ...DEFAULT_WORLD_MODERN, ...over });
const call = (tool: 'charge' | 'meteredCharge' | 'scan' | 'lookup' | 'upsert'): CommandModern => ({
  kind: 'call',
  tool,
});
const advance = (ms: number): CommandModern => ({ kind: 'advance', ms });

/** The incident: a balancer cutting connections idle for 300 ms during a 1.5 s charge. */
export const INCIDENT_EXTENSION: ModernDirected = {
  name: 'incident: balancer cuts every 300 ms idle during a 1.5 s charge, with the extension',
  config: world({ heartbeat: false, lbIdleMs: 300, headersEarly: false }),
  commands: [call('charge'), advance(3_000)],
};

export const INCIDENT_SPEC: ModernDirected = {
  ...INCIDENT_EXTENSION,
  name: 'incident: the same balancer, a server without the extension',
  config: world({ extension: false, heartbeat: false, lbIdleMs: 300, headersEarly: false }),
};

/** Stalls past the memo window: the client stops re-issuing before the server can have forgotten the key. */
export const MEMO_WINDOW: ModernDirected = {
  name: 'stalled re-issues outlast a small memo window',
  // A balancer slower than the client's stall timer: the client ends each silent attempt itself.
  config: world({ memoWindowMs: 8_000, lbIdleMs: 5_000 }),
  commands: [call('charge'), advance(100), { kind: 'blackhole', ms: 12_000 }, advance(14_000)],
};

const declare = (tool: 'charge' | 'scan'): CommandModern => ({ kind: 'schemaChange', tool });

/** The charge starts declaring a header the application's view lacks: refused, refreshed, sent again. */
export const STALE_HEADERS: ModernDirected = {
  name: 'a stale tool list: the keyed charge is refused (400 -32020), the SDK refreshes and sends it again',
  config: world({}),
  commands: [declare('charge'), call('charge'), advance(3_000)],
};

/**
 * The refused attempt's 400 is lost (a black hole: the client's stall timer ends it), and the declaration
 * changes back meanwhile: our client re-issues the same key with the same headers, which now agree; the
 * key starts over (execute-over) and runs once. The memo never replays the refusal as an outcome.
 */
export const REFUSAL_LOST_THEN_AGREES: ModernDirected = {
  name: 'a refusal lost on its way back, the declaration changes back: the same key starts over and runs',
  config: world({}),
  commands: [
    declare('charge'),
    call('charge'),
    advance(10),
    { kind: 'blackhole', ms: 100 },
    declare('charge'),
    advance(6_000),
  ],
};

/**
 * The world fast-check shrank issue 24's findings to: one instance with a memory memo, a 300 ms idle
 * balancer, a one-event log retained 2 s, up to 10 ms of latency.
 */
const SHRUNK_SMALL_LOG = {
  memo: 'memory',
  instances: 1,
  heartbeat: false,
  lbIdleMs: 300,
  headersEarly: false,
  memoWindowMs: 8_000,
  memoOld: false,
  maxEventsPerRequest: 1,
  eventRetentionMs: 2_000,
  latencyMaxMs: 10,
  slowLink: false,
} as const;

/**
 * A 410 the network lost (issue 24, seed 1359604915): a trickle and a partition hold the metered charge's
 * re-issue; the server answers it 410 (resume after k1-1-5) on the black-holed connection, a reset cuts it,
 * and the client, which never heard that 410, re-issues from the cursor it had (k1-1-3), legally. The next
 * 410 reaches it and its re-issue carries that 410's cursor. The check once held the client to the lost one.
 */
export const LOST_410: ModernDirected = {
  name: 'a 410 lost in a partition: the next re-issue keeps the cursor it had, the 410 it hears moves it',
  config: world({
    ...SHRUNK_SMALL_LOG,
    seed: 541877249,
    principals: 2,
    maxKeysPerPrincipal: 2,
  }),
  commands: [
    call('meteredCharge'),
    advance(600),
    { kind: 'partition', ms: 300 },
    { kind: 'trickle', pick: 0 },
    advance(285),
    call('charge'),
    { kind: 'resetAll' },
    { kind: 'reset', pick: 0 },
    { kind: 'partition', ms: 100 },
  ],
};

/**
 * Issue 24, seed 90000338: the application reuses c1's key for c2 (the same charge: one operation on the
 * server, c2 attaches) and then cancels c1. Its explicit cancel cancels the key, so c2 legitimately ends
 * with the key's state, `-32013` (outcome unknown, `cancelled_on_server`). The checks once called that
 * spurious; they now excuse exactly a call whose key a sharing call's cancel cancelled.
 */
export const CANCEL_THROUGH_SHARER: ModernDirected = {
  name: "the application reuses a call's key, then cancels the first call: the second ends cancelled on the server",
  config: world({
    ...SHRUNK_SMALL_LOG,
    seed: 554616288,
    principals: 1,
  }),
  commands: [
    advance(1),
    call('charge'),
    { kind: 'resetAll' },
    { kind: 'callReusingKey', tool: 'charge', pick: 0 },
    { kind: 'cancel', pick: 0 },
  ],
};

export const DIRECTED_MODERN: readonly ModernDirected[] = [
  STALE_HEADERS,
  REFUSAL_LOST_THEN_AGREES,
  {
    name: 'a refusal lost on its way back, still declared: the same key starts over, is refused again, and the SDK sends it anew',
    config: world({ memoWindowMs: 8_000 }),
    commands: [
      declare('charge'),
      call('charge'),
      advance(10),
      { kind: 'blackhole', ms: 100 },
      advance(14_000),
    ],
  },
  {
    name: 'a proxy doubles the re-issue of a refused key: two restarts race, one wins, the other attaches',
    config: world({}),
    commands: [
      declare('charge'),
      call('charge'),
      advance(10),
      { kind: 'blackhole', ms: 100 },
      declare('charge'),
      { kind: 'duplicate' },
      advance(6_000),
    ],
  },
  {
    name: 'a duplicate attaches while the SDK refuses the first: the attached response ends with the refusal',
    config: world({}),
    commands: [declare('charge'), call('charge'), { kind: 'reset', pick: 0 }, advance(3_000)],
  },
  {
    name: 'a stale tool list without the extension: a plain 400, refreshed, sent again',
    config: world({ extension: false }),
    commands: [declare('charge'), call('charge'), declare('scan'), call('scan'), advance(3_000)],
  },
  INCIDENT_EXTENSION,
  INCIDENT_SPEC,
  MEMO_WINDOW,
  LOST_410,
  CANCEL_THROUGH_SHARER,
  {
    name: 'a cut during metered progress while a small log overflows: 410 with the exact count',
    config: world({ maxEventsPerRequest: 2 }),
    commands: [call('meteredCharge'), advance(200), { kind: 'partition', ms: 900 }, advance(3_000)],
  },
  {
    name: 'the work finishes while nobody watches; the re-issue gets the recorded outcome',
    config: world({}),
    commands: [
      call('charge'),
      advance(100),
      { kind: 'blackhole', ms: 1_700 },
      { kind: 'reset', pick: 0 },
      advance(5_000),
    ],
  },
  {
    name: 'an instance dies during a keyed charge (durable, shared memo; two instances)',
    config: world({ instances: 2 }),
    commands: [
      call('charge'),
      advance(300),
      { kind: 'instanceDies', pick: 0, downMs: 5_000 },
      advance(8_000),
    ],
  },
  {
    name: 'a re-issue attached on the other instance when the owner dies for good',
    config: world({ instances: 2 }),
    commands: [
      call('charge'),
      advance(100),
      { kind: 'reset', pick: 0 },
      advance(200),
      { kind: 'instanceDies', pick: 0, downMs: GONE_FOR_GOOD_MS },
      advance(3_000),
    ],
  },
  {
    name: 'a memory memo restarts during a keyed charge',
    config: world({ memo: 'memory' }),
    commands: [call('charge'), advance(300), { kind: 'instanceDies', pick: 0 }, advance(5_000)],
  },
  {
    name: 'the application reuses a key with other arguments',
    config: world({}),
    commands: [
      call('charge'),
      advance(2_000),
      { kind: 'callReusingKey', tool: 'upsert', pick: 0 },
      advance(1_000),
    ],
  },
  {
    name: 'an outcome-unknown entry is forgotten after its memo window',
    config: world({ memoWindowMs: 8_000 }),
    commands: [call('charge'), advance(300), { kind: 'instanceDies', pick: 0 }, advance(10_000)],
  },
  {
    name: 'throttled and failing gateways, then a read-only scan cut mid-stream without the extension',
    config: world({ extension: false }),
    commands: [
      { kind: 'serverError', count: 1, status: 429 },
      call('scan'),
      advance(1_000),
      { kind: 'serverError', count: 1, status: 500 },
      call('upsert'),
      advance(1_000),
      { kind: 'serverError', count: 1, status: 502 },
      call('charge'),
      advance(1_000),
      { kind: 'serverError', count: 1, status: 503, retryAfter: true },
      call('charge'),
      advance(2_000),
      { kind: 'upstreamReset', count: 1 },
      call('charge'),
      advance(2_000),
      call('scan'),
      advance(150),
      { kind: 'reset', pick: 0 },
      advance(1_000),
      call('lookup'),
      { kind: 'endStream', pick: 0 },
      advance(1_000),
    ],
  },
];
