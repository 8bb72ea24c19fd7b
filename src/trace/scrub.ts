import type { AnyStateMachine } from 'xstate';
import { compact, DEFINITION_LIMITS } from '../inspect/compact.js';
import { type HubLimits, InspectionHub } from '../inspect/hub.js';
import { isMarkerAction } from '../inspect/markers.js';
import type { FeedMessage, PageMessage } from '../inspect/wire.js';
import { describeEvent, QUIET, seconds } from './explain.js';
import type { ActorStarted, TraceRecord } from './record.js';
import { redrive } from './redrive.js';
import { catalogById } from './replay.js';

/**
 * The time scrubber of `mcp-continuity replay --open`: the inspector page over a recorded trace, as of any
 * instant of it. Each machine actor of the trace is driven again through TODAY's machine (`redrive.ts`),
 * and what it does is written as the inspection messages a live feed sends (`@xstate.actor`, `.event`,
 * `.action`, `.snapshot`), each tagged with the trace record that caused it. The page as of an instant is
 * then a fresh inspection hub fed the messages up to that record: the same page, the same drawing, the same
 * 2026 views as live, of the state today's machines reach from the recorded events. Pure: records in,
 * page messages out (the machines run on a simulated clock with their world stubbed).
 */

/** One inspection message, and the trace record (its index and time) that caused it. */
export interface ScrubFrame {
  readonly index: number;
  readonly t: number;
  readonly message: FeedMessage;
}

/** An instant the scrubber stops at: an actor started, or took an event other than bytes arriving. */
export interface ScrubStop {
  /** The index of the trace record: the page as of this stop holds every frame up to it. */
  readonly index: number;
  readonly t: number;
  /** `12.301 s  stream-3  HTTP 404`. */
  readonly label: string;
}

export interface Scrubbed {
  /** Oldest first (by record index). */
  readonly frames: readonly ScrubFrame[];
  /** Oldest first; empty when the trace holds no machine this build has. */
  readonly stops: readonly ScrubStop[];
}

/** The trace's actors re-driven into inspection frames, and the stops of its timeline. */
export function scrubTrace(
  records: readonly TraceRecord[],
  machines: ReadonlyMap<string, AnyStateMachine> = catalogById(),
): Scrubbed {
  const actors = new Map<string, ActorStarted>();
  for (const r of records) if (r.k === 'actor') actors.set(r.a, r);
  const rootOf = (a: string): string => {
    let at = a;
    // Bounded: a parent chain longer than the actors (a cycle in a damaged trace) stops.
    for (let i = 0; i <= actors.size; i++) {
      const parent = actors.get(at)?.parent;
      if (parent === undefined || !actors.has(parent)) return at;
      at = parent;
    }
    return at;
  };
  const frames: ScrubFrame[] = [];
  const stops: ScrubStop[] = [];
  for (const started of actors.values()) {
    const machine = started.machine ? machines.get(started.machine) : undefined;
    if (!machine) continue;
    const definition = JSON.stringify(compact(machine.config, DEFINITION_LIMITS));
    const sessionId = started.a;
    for (const step of redrive(records, started, machine)) {
      if (step.kind === 'failed' || step.kind === 'recorded') continue;
      const t = records[step.index]?.t ?? 0;
      const push = (message: FeedMessage) => frames.push({ index: step.index, t, message });
      const acted = (actions: readonly { type: string; params?: unknown }[]) => {
        for (const action of actions)
          if (isMarkerAction(action))
            push({
              type: '@xstate.action',
              sessionId,
              action: { type: action.type, params: compact(action.params) },
              createdAt: t,
            });
      };
      if (step.kind === 'started') {
        push({
          type: '@xstate.actor',
          sessionId,
          rootId: rootOf(sessionId),
          ...(started.parent ? { parentId: started.parent } : {}),
          definition,
          snapshot: snapshotOf(step.snapshot),
          createdAt: t,
        });
        acted(step.actions);
        stops.push({ index: step.index, t, label: `${seconds(t)}  ${started.id}  started` });
        continue;
      }
      push({
        type: '@xstate.event',
        sessionId,
        ...(step.record.from ? { sourceId: step.record.from } : {}),
        event: compact(step.record.e),
        createdAt: t,
      });
      acted(step.actions);
      push({ type: '@xstate.snapshot', sessionId, snapshot: snapshotOf(step.snapshot), createdAt: t });
      if (!QUIET.has(step.record.e.type))
        stops.push({
          index: step.index,
          t,
          label: `${seconds(t)}  ${started.id}  ${describeEvent(step.record.e)}`,
        });
    }
  }
  // Each actor was driven on its own: merged back into the trace's order (stable within one record).
  frames.sort((a, b) => a.index - b.index);
  stops.sort((a, b) => a.index - b.index);
  return { frames, stops };
}

/**
 * What a page must be told to show the machines as of stop `stop` (clamped to the stops there are):
 * everything a fresh hub holds after the frames up to that stop's record, starting with a reset.
 */
export function pageAsOf(
  scrubbed: Scrubbed,
  stop: number,
  options: { readonly name?: string; readonly limits?: Partial<HubLimits> } = {},
): PageMessage[] {
  const hub = new InspectionHub(options.limits);
  const { feed } = hub.openFeed('trace');
  // Our own kind of feed: markers come from the machines' actions, not guessed from events.
  hub.ingest(feed, { type: 'mcpc.hello', name: options.name ?? 'trace' });
  const last = scrubbed.stops[Math.max(0, Math.min(stop, scrubbed.stops.length - 1))];
  if (last === undefined) return hub.replay();
  for (const frame of scrubbed.frames) {
    if (frame.index > last.index) break;
    hub.ingest(feed, frame.message, frame.t);
  }
  return hub.replay();
}

function snapshotOf(snapshot: unknown): { value: unknown; status: unknown; context: unknown } {
  const s = (snapshot ?? {}) as { value?: unknown; status?: unknown; context?: unknown };
  return { value: compact(s.value), status: s.status ?? 'active', context: compact(s.context) };
}
