import { CHECKS, type CheckName } from './checks.js';
import {
  CORRECT,
  type Command,
  DEFAULT_WORLD,
  World,
  type WorldConfig,
  type WorldVariant,
} from './world/world.js';

/**
 * Bounded exhaustive exploration: every schedule up to `depth` over a small alphabet, each run from a
 * fresh world and checked against every property. Random search finds deep bugs; this leaves no shallow
 * one behind.
 */
export const ALPHABET: readonly Command[] = [
  { kind: 'call', tool: 'charge' },
  { kind: 'call', tool: 'chatty' },
  { kind: 'call', tool: 'slow' },
  { kind: 'advance', ms: 1_000 },
  { kind: 'reset', pick: 0 },
  { kind: 'resetAll' },
  { kind: 'endStream', pick: 1 },
  { kind: 'serverError', count: 1 },
  { kind: 'stall', pick: 0 },
  { kind: 'partition', ms: 8_000 },
  { kind: 'serverRestart', durable: true },
  { kind: 'serverRestart', durable: false },
  { kind: 'clientRestart', durable: true },
  { kind: 'serverNotify' },
  { kind: 'closeAndReconnect' },
];

export interface ExplorationReport {
  readonly schedules: number;
  /** Distinct abstract world states seen after some prefix of some schedule. */
  readonly distinctStates: number;
  readonly violations: Array<{ schedule: readonly Command[]; check: CheckName; messages: string[] }>;
  readonly elapsedMs: number;
}

/** A coarse fingerprint: machine states, cursors, windows and call outcomes; timers are left out. */
function fingerprint(world: World): string {
  const client = world.clientActor.getSnapshot();
  const streams = Object.entries(client.context.streams)
    .map(([k, e]) => {
      const s = e.ref.getSnapshot();
      return `${k}:${JSON.stringify(s.value)}:${s.context.lastEventId ?? '-'}`;
    })
    .sort();
  const sessions = [...world.server.sessions.values()].map(
    (s) =>
      `${s.id}:${JSON.stringify(s.actor.getSnapshot().value)}:${[...s.logs]
        .map(([n, l]) => `${n}[${l.window.oldest},${l.window.head}${l.window.finished ? '!' : ''}]`)
        .join('')}`,
  );
  const calls = [...world.recorder.calls.values()].map((c) => c.outcome ?? '?');
  return [
    JSON.stringify(client.value),
    client.context.sessionId,
    ...streams,
    '|',
    ...sessions,
    '|',
    ...calls,
  ].join(' ');
}

export function* schedules(depth: number): Generator<Command[]> {
  if (depth === 0) return;
  for (const first of ALPHABET) {
    yield [first];
    for (const rest of schedules(depth - 1)) yield [first, ...rest];
  }
}

export function explore(
  depth: number,
  config: WorldConfig = DEFAULT_WORLD,
  variant: WorldVariant = CORRECT,
  stopAtFirst = false,
): ExplorationReport {
  const start = performance.now();
  const seen = new Set<string>();
  const violations: ExplorationReport['violations'] = [];
  let count = 0;
  for (const schedule of schedules(depth)) {
    count++;
    const world = new World(config, variant);
    try {
      for (const cmd of schedule) {
        world.apply(cmd);
        seen.add(fingerprint(world));
      }
      const outcome = world.settle();
      seen.add(fingerprint(world));
      for (const [name, check] of Object.entries(CHECKS) as Array<[CheckName, (typeof CHECKS)[CheckName]]>) {
        const messages = check(outcome);
        if (messages.length > 0) violations.push({ schedule, check: name, messages });
      }
    } finally {
      world.stop();
    }
    if (stopAtFirst && violations.length > 0) break;
  }
  return { schedules: count, distinctStates: seen.size, violations, elapsedMs: performance.now() - start };
}
