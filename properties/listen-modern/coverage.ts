import { acceptedBy, attribution, type UnknownReason, unknownReasons } from './checks.js';
import type { ListenWorldOutcome } from './facts.js';

/**
 * Which branches of the listen part the worlds reach, judged from world facts: every kind of gap (exact
 * with changes, exact with none, unknown for each reason) and the timings that make the rule matter (a
 * change published between a re-open's arrival and its subscription, a re-open whose ack was lost). The
 * test fails on a branch no world reaches unless it is marked not modelled, with why.
 */
interface Branch {
  readonly name: string;
  readonly notModelled?: string;
}

export const LISTEN_BRANCHES: readonly Branch[] = [
  { name: 'gap exact, count > 0' },
  { name: 'gap exact, count = 0' },
  { name: 'gap exact, spanning a re-open whose ack was lost' },
  { name: 'gap unknown: evicted by count' },
  { name: 'gap unknown: evicted by time' },
  { name: 'gap unknown: restart (another epoch)' },
  { name: 'gap unknown: no position yet' },
  { name: 'gap unknown: the server does not serve the listen part' },
  { name: "an accepted change published between a re-open's arrival and its subscription" },
  { name: 'a re-open whose ack was lost (cut before it arrived)' },
  { name: 'the first ack lost (cut before it arrived): no gap' },
  { name: 'a re-open refused (server down)' },
  { name: "a black-holed stream ended by the client's stall timer" },
  { name: 'a change missed and attributed to a later stream' },
];

const UNKNOWN_ROWS: Record<UnknownReason, string> = {
  'no extension': 'gap unknown: the server does not serve the listen part',
  'no position': 'gap unknown: no position yet',
  restart: 'gap unknown: restart (another epoch)',
  'evicted by count': 'gap unknown: evicted by count',
  'evicted by time': 'gap unknown: evicted by time',
};

export function branchesOf(o: ListenWorldOutcome): Set<string> {
  const reached = new Set<string>();
  const byN = new Map(o.streams.map((s) => [s.n, s]));
  for (const gap of o.gaps) {
    const s = byN.get(gap.stream);
    if (s === undefined) continue;
    if (gap.missed.kind === 'exact') {
      reached.add(gap.missed.count > 0 ? 'gap exact, count > 0' : 'gap exact, count = 0');
      const before = o.streams.filter((x) => x.n < s.n);
      const sinceLastAck = before.slice(before.findLastIndex((x) => x.ackDelivered) + 1);
      if (sinceLastAck.some((x) => x.ackLost))
        reached.add('gap exact, spanning a re-open whose ack was lost');
    } else {
      for (const r of unknownReasons(o, s)) reached.add(UNKNOWN_ROWS[r]);
    }
  }
  for (const s of o.streams) {
    if (s.n > 1 && s.ackLost) reached.add('a re-open whose ack was lost (cut before it arrived)');
    if (s.n === 1 && s.ackLost) reached.add('the first ack lost (cut before it arrived): no gap');
    if (s.n > 1 && s.refused) reached.add('a re-open refused (server down)');
    if (s.stalledOut) reached.add("a black-holed stream ended by the client's stall timer");
    if (s.n > 1 && s.ackDelivered && (s.subscribePoint ?? 0) > (s.arrivedPoint ?? 0)) {
      const window = o.publishes.filter(
        (p) => p.run === s.run && p.index > (s.arrivedPoint ?? 0) && p.index <= (s.subscribePoint ?? 0),
      );
      if (window.some((p) => acceptedBy(o.config.filter, p)))
        reached.add("an accepted change published between a re-open's arrival and its subscription");
    }
  }
  const { undelivered, streamOf } = attribution(o);
  if (undelivered.some((p) => streamOf.get(p.id) !== undefined))
    reached.add('a change missed and attributed to a later stream');
  return reached;
}

export class ListenCoverageTally {
  worlds = 0;
  readonly counts = new Map<string, number>();

  add(o: ListenWorldOutcome, extra: Iterable<string> = []): void {
    this.worlds++;
    for (const k of [...branchesOf(o), ...extra]) this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }

  unreached(): string[] {
    return LISTEN_BRANCHES.filter((b) => !b.notModelled && !this.counts.get(b.name)).map((b) => b.name);
  }

  table(): string {
    const lines = [`listen part branches reached, of ${this.worlds} worlds:`];
    for (const b of LISTEN_BRANCHES) {
      const n = this.counts.get(b.name) ?? 0;
      const note = b.notModelled
        ? `  (not modelled: ${b.notModelled})`
        : n === 0
          ? '  ← REACHED BY NONE'
          : '';
      lines.push(`  ${String(n).padStart(7)}  ${b.name}${note}`);
    }
    return lines.join('\n');
  }
}
