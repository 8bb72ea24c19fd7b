import type { AnyStateMachine } from 'xstate';
import { machineCatalog } from '../../machines/catalog.js';
import { encode, MissingFunctionError } from './codec.js';
import { stateName, type TraceRecord } from './record.js';
import { redrive } from './redrive.js';

/**
 * `mcp-continuity replay`: the recorded events of each machine actor run again through TODAY's machine,
 * from the snapshot the actor started from, to flag any decision that now differs: a regression check for
 * an incident. How an actor is driven again, without its world: `redrive.ts`.
 */

export interface ReplayDifference {
  readonly actor: string;
  readonly machine: string;
  readonly id: string;
  /** When, in the trace. */
  readonly t: number;
  /** The event after which the two differ. */
  readonly event: string;
  readonly recorded: string;
  readonly replayed: string;
}

export interface ReplayReport {
  /** Machine actors replayed through today's machines. */
  readonly actors: number;
  /** Events sent to them. */
  readonly events: number;
  /** Actors whose machine this build does not have (a name no longer in the catalog). */
  readonly unknownMachines: readonly string[];
  /** The first difference of each actor that differs (later ones follow from it). */
  readonly differences: readonly ReplayDifference[];
  /** Actors whose decisions called a function of the application's that a trace cannot hold. */
  readonly notReplayable: readonly { readonly machine: string; readonly id: string; readonly why: string }[];
}

/**
 * Root ids a machine had before it was renamed, so a trace recorded by an older build still replays:
 * the 2026-07-28 call machine was `statelessCall` until the path took one name, `modern` (0.1.x).
 */
const FORMER_IDS: Readonly<Record<string, string>> = { statelessCall: 'modernCall' };

/** Today's machines by their root id (`modernCall`, `clientSession`, …), and by the ids they had before. */
export function catalogById(
  catalog: Record<string, AnyStateMachine> = machineCatalog,
): Map<string, AnyStateMachine> {
  const byId = new Map(Object.values(catalog).map((m) => [m.id, m]));
  for (const [former, today] of Object.entries(FORMER_IDS)) {
    const machine = byId.get(today);
    if (machine) byId.set(former, machine);
  }
  return byId;
}

export function replayTrace(
  records: readonly TraceRecord[],
  machines: ReadonlyMap<string, AnyStateMachine> = catalogById(),
): ReplayReport {
  const differences: ReplayDifference[] = [];
  const notReplayable: { machine: string; id: string; why: string }[] = [];
  const unknown = new Set<string>();
  let actors = 0;
  let events = 0;
  for (const started of records) {
    if (started.k !== 'actor' || !started.machine) continue;
    const start = records.find((r) => r.k === 'start' && r.a === started.a);
    if (start?.k !== 'start') continue;
    const machine = machines.get(started.machine);
    if (!machine) {
      unknown.add(started.machine);
      continue;
    }
    actors++;
    const at = (t: number, event: string, recorded: string, replayed: string) =>
      differences.push({
        actor: started.a,
        machine: started.machine as string,
        id: started.id,
        t,
        event,
        recorded,
        replayed,
      });
    for (const step of redrive(records, started, machine)) {
      if (step.kind === 'failed') {
        const error = step.error;
        if (error instanceof MissingFunctionError)
          notReplayable.push({ machine: started.machine, id: started.id, why: error.message });
        else if (step.event === 'start')
          at(start.t, 'start', 'the recorded snapshot', `cannot be restored: ${(error as Error).message}`);
        else
          at(
            records[step.index]?.t ?? 0,
            step.event,
            'accepted',
            `failed: ${(error as Error).message ?? String(error)}`,
          );
        break;
      }
      if (step.kind === 'sent') events++;
      if (step.kind !== 'recorded') continue;
      const r = step.record;
      const snapshot = step.snapshot as { value: unknown; status: string; context?: { decision?: unknown } };
      const recorded = describe(r.value, r.status, r.decision);
      const replayed = describe(
        snapshot.value,
        snapshot.status,
        snapshot.context?.decision !== undefined ? encode(snapshot.context.decision) : undefined,
      );
      if (recorded !== replayed) {
        at(r.t, r.after, recorded, replayed);
        break;
      }
    }
  }
  return { actors, events, unknownMachines: [...unknown], differences, notReplayable };
}

function describe(value: unknown, status: string, decision: unknown): string {
  const d = decision === undefined ? '' : ` ${JSON.stringify(decision)}`;
  return `${stateName(value)} (${status})${d}`;
}

/** The report as text. */
export function replayText(report: ReplayReport): string {
  const lines = [
    `${report.actors} machine actor(s), ${report.events} event(s) replayed through today's machines: ${
      report.differences.length === 0 ? 'every decision agrees' : `${report.differences.length} differ`
    }`,
  ];
  for (const n of report.notReplayable) lines.push(`not replayed: ${n.machine} ${n.id} (${n.why})`);
  if (report.unknownMachines.length > 0)
    lines.push(`not replayed (machines this build does not have): ${report.unknownMachines.join(', ')}`);
  for (const d of report.differences)
    lines.push(
      `${d.machine} ${d.id} at ${(d.t / 1000).toFixed(3)} s, after ${d.event}:`,
      `  recorded: ${d.recorded}`,
      `  today:    ${d.replayed}`,
    );
  return lines.join('\n');
}
