import { type AnyStateMachine, createActor, createMachine, fromCallback, SimulatedClock } from 'xstate';
import { machineCatalog } from '../../machines/catalog.js';
import * as core from '../../machines/index.js';
import { encode, MissingFunctionError, revive } from './codec.js';
import { type EventReceived, type StateReached, stateName, type TraceRecord } from './record.js';

/**
 * `mcp-continuity replay`: the recorded events of each machine actor run again through TODAY's machine,
 * from the snapshot the actor started from, to flag any decision that now differs: a regression check for
 * an incident. The world is left out: every actor the machine would invoke or spawn is a stub that does
 * nothing, its clock never moves, and what the world did comes from the trace (the events a child, the
 * network or a timer sent). Events an actor sent itself are left to the machine, except its timers'.
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

/** The functions a machine's context may hold by default (its policies), by name: the core's exports. */
const CORE_FUNCTIONS: ReadonlyMap<string, unknown> = new Map(
  Object.entries(core).filter(([, v]) => typeof v === 'function'),
);

/**
 * The parent of a replayed child: a machine that takes every event and does nothing with it. What a child
 * sends its parent goes nowhere: the parent is replayed on its own, from the events it received (its
 * children's among them).
 */
function nowhere() {
  return createActor(createMachine({ id: 'replay-parent' }), { clock: new SimulatedClock() }).start();
}

/** Today's machines by their root id (`statelessCall`, `clientSession`, …). */
export function catalogById(
  catalog: Record<string, AnyStateMachine> = machineCatalog,
): Map<string, AnyStateMachine> {
  return new Map(Object.values(catalog).map((m) => [m.id, m]));
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
    const stubs = Object.fromEntries(
      Object.keys(machine.implementations.actors ?? {}).map((name) => [name, fromCallback(() => () => {})]),
    );
    let actor: ReturnType<typeof createActor<AnyStateMachine>>;
    const parent = started.parent ? nowhere() : undefined;
    try {
      actor = createActor(machine.provide({ actors: stubs }), {
        snapshot: revive(start.snapshot, CORE_FUNCTIONS) as never,
        clock: new SimulatedClock(),
        ...(parent ? { parent: parent as never } : {}),
      });
      actor.start();
    } catch (error) {
      at(start.t, 'start', 'the recorded snapshot', `cannot be restored: ${(error as Error).message}`);
      continue;
    }
    const mine = records.filter(
      (r): r is EventReceived | StateReached =>
        (r.k === 'event' || r.k === 'state') && r.a === started.a && r.t >= start.t,
    );
    let sent: EventReceived | undefined;
    for (const r of mine) {
      if (r.k === 'event') {
        sent = undefined;
        const self = r.from === started.a;
        if (r.e.type === 'xstate.init' || (self && !r.e.type.startsWith('xstate.after.'))) continue;
        let failure: unknown;
        const watch = actor.subscribe({ error: (e) => (failure = e) });
        try {
          actor.send(revive(r.e, CORE_FUNCTIONS) as never);
        } catch (error) {
          failure = error;
        }
        watch.unsubscribe();
        failure ??=
          (actor.getSnapshot() as { status: string; error?: unknown }).status === 'error'
            ? (actor.getSnapshot() as { error?: unknown }).error
            : undefined;
        if (failure instanceof MissingFunctionError) {
          notReplayable.push({ machine: started.machine as string, id: started.id, why: failure.message });
          break;
        }
        if (failure !== undefined) {
          at(r.t, r.e.type, 'accepted', `failed: ${(failure as Error).message ?? String(failure)}`);
          break;
        }
        events++;
        sent = r;
        continue;
      }
      if (!sent) continue;
      const snapshot = actor.getSnapshot() as {
        value: unknown;
        status: string;
        context?: { decision?: unknown };
      };
      const recorded = describe(r.value, r.status, r.decision);
      const replayed = describe(
        snapshot.value,
        snapshot.status,
        snapshot.context?.decision !== undefined ? encode(snapshot.context.decision) : undefined,
      );
      sent = undefined;
      if (recorded !== replayed) {
        at(r.t, r.after, recorded, replayed);
        break;
      }
    }
    // A child stops with its parent (it cannot be stopped on its own).
    if (parent) parent.stop();
    else actor.stop();
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
