import {
  type AnyActorRef,
  type AnyStateMachine,
  createActor,
  createMachine,
  fromCallback,
  SimulatedClock,
} from 'xstate';
import * as core from '../../machines/index.js';
import { revive } from './codec.js';
import type { ActorStarted, EventReceived, StateReached, TraceRecord } from './record.js';

/**
 * One recorded machine actor driven again through TODAY's machine: restored from the snapshot it started
 * from, then sent every event it received, in order. The world is left out: every actor the machine would
 * invoke or spawn is a stub that does nothing, its clock never moves, and what the world did comes from the
 * trace (the events a child, the network or a timer sent). Events an actor sent itself are left to the
 * machine, except its timers'. `replay` compares what it decides with what was recorded; the scrubber
 * (`scrub.ts`) shows it.
 */

/** What one step of a re-driven actor did, with the index of the trace record that caused it. */
export type Redriven =
  /**
   * Restored from its start record: `snapshot` is today's machine's. Its entry actions ran before that
   * snapshot, so they are not run again: `actions` are those the trace recorded (params encoded).
   */
  | {
      readonly kind: 'started';
      readonly index: number;
      readonly snapshot: unknown;
      readonly actions: readonly { readonly type: string; readonly params?: unknown }[];
    }
  /** A recorded event sent; the snapshot it left and the actions the machine took for it. */
  | {
      readonly kind: 'sent';
      readonly index: number;
      readonly record: EventReceived;
      readonly snapshot: unknown;
      readonly actions: readonly { readonly type: string; readonly params?: unknown }[];
    }
  /** The recorded state that followed a sent event, beside today's snapshot: where replay compares. */
  | {
      readonly kind: 'recorded';
      readonly index: number;
      readonly record: StateReached;
      readonly snapshot: unknown;
    }
  /** The start snapshot cannot be restored, or an event threw: the actor stops here. */
  | { readonly kind: 'failed'; readonly index: number; readonly event: string; readonly error: unknown };

/** The functions a machine's context may hold by default (its policies), by name: the core's exports. */
const CORE_FUNCTIONS: ReadonlyMap<string, unknown> = new Map(
  Object.entries(core).filter(([, v]) => typeof v === 'function'),
);

/** The records of one actor, with their indexes in the trace. */
function recordsOf(records: readonly TraceRecord[], actor: string): { index: number; record: TraceRecord }[] {
  const out: { index: number; record: TraceRecord }[] = [];
  records.forEach((record, index) => {
    if (record.a === actor) out.push({ index, record });
  });
  return out;
}

/**
 * The parent of a re-driven child: a machine that takes every event and does nothing with it. What a
 * child sends its parent goes nowhere: the parent is re-driven on its own, from the events it received (its
 * children's among them).
 */
function nowhere() {
  return createActor(createMachine({ id: 'replay-parent' }), { clock: new SimulatedClock() }).start();
}

/**
 * `started`'s actor re-driven through `machine`, step by step; nothing when the trace holds no start record
 * for it. Stops after the first failure; the actor is stopped when the iteration ends (also early).
 */
export function* redrive(
  records: readonly TraceRecord[],
  started: ActorStarted,
  machine: AnyStateMachine,
): Generator<Redriven> {
  const mine = recordsOf(records, started.a);
  const startAt = mine.findIndex(({ record }) => record.k === 'start');
  const start = mine[startAt];
  if (start?.record.k !== 'start') return;
  const stubs = Object.fromEntries(
    Object.keys(machine.implementations.actors ?? {}).map((name) => [name, fromCallback(() => () => {})]),
  );
  const parent = started.parent ? nowhere() : undefined;
  let actor: AnyActorRef;
  let taken: { type: string; params?: unknown }[] = [];
  try {
    actor = createActor(machine.provide({ actors: stubs }), {
      snapshot: revive(start.record.snapshot, CORE_FUNCTIONS) as never,
      clock: new SimulatedClock(),
      ...(parent ? { parent: parent as never } : {}),
    });
    // A child's `inspect` option is ignored (inspection is its system's): observe the system itself.
    actor.system.inspect({
      next: (event) => {
        if (event.type !== '@xstate.action' || event.actorRef !== actor) return;
        const action = event.action as { type: string; params?: unknown };
        taken.push({ type: action.type, ...(action.params !== undefined ? { params: action.params } : {}) });
      },
    });
    actor.start();
  } catch (error) {
    yield { kind: 'failed', index: start.index, event: 'start', error };
    parent?.stop();
    return;
  }
  try {
    const entry = mine
      .slice(0, startAt)
      .flatMap(({ record }) =>
        record.k === 'action'
          ? [{ type: record.action, ...(record.params !== undefined ? { params: record.params } : {}) }]
          : [],
      );
    yield { kind: 'started', index: start.index, snapshot: actor.getSnapshot(), actions: entry };
    let sent = false;
    for (const { index, record } of mine.slice(startAt + 1)) {
      if (record.k === 'event') {
        sent = false;
        const self = record.from === started.a;
        if (record.e.type === 'xstate.init' || (self && !record.e.type.startsWith('xstate.after.'))) continue;
        let failure: unknown;
        const watch = actor.subscribe({ error: (e) => (failure = e) });
        taken = [];
        try {
          actor.send(revive(record.e, CORE_FUNCTIONS) as never);
        } catch (error) {
          failure = error;
        }
        watch.unsubscribe();
        const snapshot = actor.getSnapshot() as { status: string; error?: unknown };
        failure ??= snapshot.status === 'error' ? snapshot.error : undefined;
        if (failure !== undefined) {
          yield { kind: 'failed', index, event: record.e.type, error: failure };
          return;
        }
        yield { kind: 'sent', index, record, snapshot, actions: taken };
        sent = true;
      } else if (record.k === 'state' && sent) {
        sent = false;
        yield { kind: 'recorded', index, record, snapshot: actor.getSnapshot() };
      }
    }
  } finally {
    // A child stops with its parent (it cannot be stopped on its own).
    if (parent) parent.stop();
    else actor.stop();
  }
}
