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
 * Bounded exhaustive exploration over distinct world states rather than schedules: breadth first from the
 * fresh world, every command of a small alphabet is applied to every state found at the previous depth;
 * a state whose fingerprint was seen before is not explored again (nor judged), so the same time goes
 * deeper. Every new state is settled and judged by every property. Random search finds deep bugs; this
 * leaves no shallow one behind.
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
  /** States explored and judged (distinct after the first command; one schedule leads to each). */
  readonly schedules: number;
  /** Distinct abstract world states seen, the fresh world included. */
  readonly distinctStates: number;
  /** Schedules whose state had been seen before: not explored further. */
  readonly pruned: number;
  /** The depth whose every new state was explored (less than asked when the time ran out). */
  readonly depthReached: number;
  readonly violations: Array<{ schedule: readonly Command[]; check: CheckName; messages: string[] }>;
  readonly elapsedMs: number;
}

/**
 * An abstract world state: machine states, cursors, windows, what is running, the network's faults and
 * what the application has seen so far. Time and timers are left out, so states that differ only in when
 * a backoff ends are one state: the search is bounded by this abstraction.
 */
export function fingerprint(world: World): string {
  const client = world.clientActor.getSnapshot();
  const streams = Object.entries(client.context.streams)
    .map(([k, e]) => {
      const s = e.ref.getSnapshot();
      return `${k}:${JSON.stringify(s.value)}:${s.context.lastEventId ?? '-'}:${s.context.attempt}`;
    })
    .sort();
  const sessions = [...world.server.sessions.values()].map(
    (s) =>
      `${s.id}${s.sleeping ? 'z' : ''}:${JSON.stringify(s.peek().value)}:${Object.keys(s.peek().context.running ?? {}).length}:${[
        ...s.logs,
      ]
        .map(
          ([n, l]) =>
            `${n}[${l.window.oldest},${l.window.head}${l.window.finished ? '!' : ''}${l.conn ? '@' : ''}]`,
        )
        .join('')}`,
  );
  const r = world.recorder;
  const calls = [...r.calls.values()].map((c) => `${c.outcome ?? '?'}${c.outcomes}`);
  const net = world.net
    .list()
    .map((c) => `${c.exchange.method}${c.blackholed ? 'b' : ''}${c.stalled ? 's' : ''}`)
    .join(',');
  return [
    JSON.stringify(client.value),
    client.context.sessionId,
    Object.keys(client.context.ledger).length,
    client.context.queue.length,
    ...streams,
    '|',
    ...sessions,
    '|',
    ...calls,
    '|',
    net,
    world.net.refusing,
    world.server.failNext,
    r.delivered.size,
    r.gaps.length,
    [...r.sideEffects.values()].join(','),
  ].join(' ');
}

/** Every schedule up to `depth` over the alphabet (for a search over schedules, not states). */
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
  /** Stops after the depth that was being explored when this much time had passed. */
  budgetMs = Number.POSITIVE_INFINITY,
): ExplorationReport {
  const start = performance.now();
  const fresh = new World(config, variant);
  const seen = new Set<string>([fingerprint(fresh)]);
  fresh.stop();
  const violations: ExplorationReport['violations'] = [];
  let frontier: Command[][] = [[]];
  let explored = 0;
  let pruned = 0;
  let depthReached = 0;
  for (let d = 1; d <= depth && frontier.length > 0; d++) {
    const next: Command[][] = [];
    for (const prefix of frontier) {
      for (const cmd of ALPHABET) {
        const schedule = [...prefix, cmd];
        const world = new World(config, variant);
        try {
          for (const c of schedule) world.apply(c);
          const key = fingerprint(world);
          if (seen.has(key)) {
            pruned++;
            continue;
          }
          seen.add(key);
          next.push(schedule);
          explored++;
          const outcome = world.settle();
          for (const [name, check] of Object.entries(CHECKS) as Array<
            [CheckName, (typeof CHECKS)[CheckName]]
          >) {
            const messages = check(outcome);
            if (messages.length > 0) violations.push({ schedule, check: name, messages });
          }
        } finally {
          world.stop();
        }
        if (stopAtFirst && violations.length > 0) return report();
      }
    }
    depthReached = d;
    frontier = next;
    if (performance.now() - start > budgetMs) break;
  }
  return report();

  function report(): ExplorationReport {
    return {
      schedules: explored,
      distinctStates: seen.size,
      pruned,
      depthReached,
      violations,
      elapsedMs: performance.now() - start,
    };
  }
}
