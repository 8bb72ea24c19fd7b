import { parseEventId } from '../../machines/event-id.js';
import { chartOf, stateText } from './chart.js';
import { compact } from './compact.js';
import { actorLabel, describeEvent, isChatter } from './describe.js';
import { markerFromAction, markerFromEvent, markerKey, markerText } from './markers.js';
import { type ModernTracker, trackerFor } from './modern-view.js';
import type { ChartNode, Marker, PageMessage, TimelineEntry, WindowSeen, WireSnapshot } from './wire.js';

/**
 * What the inspector server knows: every feed's actors with their latest snapshot, the recent timeline,
 * the markers, the windows seen and the latest figures. `ingest` turns one feed message into the page
 * messages to fan out; `replay` is everything a page that opens now must be told. Bounded throughout, so
 * a client that runs for a week does not grow the inspector.
 *
 * XState numbers actors per process (`x:0`, `x:1`, …), so two processes feeding one inspector would
 * collide: every id is prefixed with its feed.
 */
export interface HubLimits {
  readonly actors: number;
  readonly timeline: number;
  readonly markers: number;
}

const DEFAULT_LIMITS: HubLimits = { actors: 400, timeline: 600, markers: 300 };

interface ActorState {
  id: string;
  feed: string;
  parentId?: string;
  rootId?: string;
  machine: string;
  chart: ChartNode;
  snapshot: WireSnapshot;
  at: number;
  windows: Map<number, WindowSeen>;
  /** A 2026-07-28 machine's view (attempts, key, gaps), and its text last sent (a page is told changes). */
  modern?: ModernTracker;
  modernSent?: string;
}

interface FeedState {
  name: string;
  connected: boolean;
  /** Our own feed: it sends the marker actions, so markers are not inferred from events. */
  sendsActions: boolean;
  figures?: { figures: Record<string, number>; at: number };
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null ? (v as Obj) : {});
const MAX_ID = 200;
const isId = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_ID;

export class InspectionHub {
  private readonly actors = new Map<string, ActorState>();
  private readonly feeds = new Map<string, FeedState>();
  private readonly timeline: TimelineEntry[] = [];
  private readonly markers: Marker[] = [];
  private readonly markerKeys = new Set<string>();
  /** Machine definitions arrive once per actor, usually identical: parse each text once. */
  private readonly charts = new Map<string, ChartNode>();
  private nextFeed = 1;
  private readonly limits: HubLimits;

  constructor(limits: Partial<HubLimits> = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
  }

  /** A feed connected; its id prefixes every actor id it sends. */
  openFeed(name: string): { feed: string; messages: PageMessage[] } {
    const feed = `f${this.nextFeed++}`;
    this.feeds.set(feed, { name, connected: true, sendsActions: false });
    return { feed, messages: [{ kind: 'feed', feed, name, connected: true }] };
  }

  closeFeed(feed: string): PageMessage[] {
    const state = this.feeds.get(feed);
    if (!state) return [];
    state.connected = false;
    return [{ kind: 'feed', feed, name: state.name, connected: false }];
  }

  /** One message from a feed, already parsed. Anything that is not a known, well-formed message is ignored. */
  ingest(feed: string, message: unknown, now = Date.now()): PageMessage[] {
    const state = this.feeds.get(feed);
    const m = obj(message);
    if (!state || typeof m.type !== 'string') return [];
    const at = Number(m.createdAt) || now;
    switch (m.type) {
      case 'mcpc.hello':
        if (typeof m.name !== 'string') return [];
        state.name = m.name.slice(0, 100);
        state.sendsActions = true;
        return [{ kind: 'feed', feed, name: state.name, connected: state.connected }];
      case 'mcpc.figures':
        return this.figures(feed, state, m.figures, at);
      case '@xstate.actor':
        return this.actor(feed, m, at);
      case '@xstate.snapshot':
        return this.snapshot(feed, m, at);
      case '@xstate.event':
        return this.event(feed, state, m, at);
      case '@xstate.action':
        return this.action(feed, m, at);
      default:
        return [];
    }
  }

  replay(): PageMessage[] {
    const out: PageMessage[] = [{ kind: 'reset' }];
    for (const [feed, s] of this.feeds)
      out.push({ kind: 'feed', feed, name: s.name, connected: s.connected });
    for (const a of this.actors.values()) {
      out.push(this.actorMessage(a));
      if (a.modern) out.push({ kind: 'modern', id: a.id, view: a.modern.view() });
      for (const window of a.windows.values()) out.push({ kind: 'window', id: a.id, window });
    }
    for (const marker of this.markers) out.push({ kind: 'marker', marker, text: markerText(marker) });
    for (const entry of this.timeline) out.push({ kind: 'timeline', entry });
    for (const [feed, s] of this.feeds) {
      if (s.figures) out.push({ kind: 'figures', feed, name: s.name, ...s.figures });
    }
    return out;
  }

  private actor(feed: string, m: Obj, at: number): PageMessage[] {
    if (!isId(m.sessionId)) return [];
    const definition = m.definition;
    // Callback and promise actors (the client's `exchange`) have no states to draw.
    const chart = this.chartFor(definition);
    if (!chart || chart.states.length === 0) return [];
    const id = `${feed}/${m.sessionId}`;
    const snapshot = wireSnapshot(m.snapshot);
    const machine = chart.key;
    const known = this.actors.get(id);
    const actor: ActorState = {
      id,
      feed,
      ...(isId(m.parentId) ? { parentId: `${feed}/${m.parentId}` } : {}),
      ...(isId(m.rootId) ? { rootId: `${feed}/${m.rootId}` } : {}),
      machine,
      chart,
      snapshot,
      at,
      windows: known?.windows ?? new Map(),
      // A feed that reconnects registers its actors again: what was seen of them stays.
      ...(known?.modern ? { modern: known.modern } : this.newTracker(machine)),
    };
    this.actors.delete(id);
    this.actors.set(id, actor);
    this.prune();
    return [
      this.actorMessage(actor),
      ...this.modern(actor, (t) => t.snapshot(snapshot.value, snapshot.status, snapshot.context)),
    ];
  }

  private newTracker(machine: string): { modern?: ModernTracker } {
    const modern = trackerFor(machine);
    return modern ? { modern } : {};
  }

  /** The actor's 2026 view after `step`, when it changed since the page was last told. */
  private modern(actor: ActorState, step: (t: ModernTracker) => boolean): PageMessage[] {
    const tracker = actor.modern;
    if (!tracker || !step(tracker)) return [];
    const view = tracker.view();
    const text = JSON.stringify(view);
    if (text === actor.modernSent) return [];
    actor.modernSent = text;
    return [{ kind: 'modern', id: actor.id, view }];
  }

  private chartFor(definition: unknown): ChartNode | undefined {
    if (typeof definition === 'string') {
      const cached = this.charts.get(definition);
      if (cached) return cached;
      let parsed: unknown;
      try {
        parsed = JSON.parse(definition);
      } catch {
        return undefined;
      }
      const chart = chartOf(parsed);
      if (this.charts.size >= 64) this.charts.clear();
      this.charts.set(definition, chart);
      return chart;
    }
    return typeof definition === 'object' && definition !== null ? chartOf(definition) : undefined;
  }

  private snapshot(feed: string, m: Obj, at: number): PageMessage[] {
    const actor = isId(m.sessionId) ? this.actors.get(`${feed}/${m.sessionId}`) : undefined;
    if (!actor) return [];
    const snapshot = wireSnapshot(m.snapshot);
    const before = stateText(actor.snapshot.value);
    const after = stateText(snapshot.value);
    const statusChanged = actor.snapshot.status !== snapshot.status;
    actor.snapshot = snapshot;
    actor.at = at;
    const out: PageMessage[] = [
      { kind: 'snapshot', id: actor.id, snapshot, at },
      ...this.modern(actor, (t) => t.snapshot(snapshot.value, snapshot.status, snapshot.context)),
    ];
    if (before !== after || statusChanged) {
      const status = snapshot.status === 'active' ? '' : ` (${snapshot.status})`;
      out.push(
        this.entry({
          at,
          actorId: actor.id,
          label: this.label(actor),
          kind: 'transition',
          text: `${before} → ${after}${status}`,
          chatter: false,
        }),
      );
    }
    return out;
  }

  private event(feed: string, state: FeedState, m: Obj, at: number): PageMessage[] {
    const actor = isId(m.sessionId) ? this.actors.get(`${feed}/${m.sessionId}`) : undefined;
    const event = obj(m.event);
    if (!actor || typeof event.type !== 'string') return [];
    const out: PageMessage[] = [
      this.entry({
        at,
        actorId: actor.id,
        label: this.label(actor),
        kind: 'event',
        text: describeEvent(event),
        chatter: isChatter(event.type),
      }),
    ];
    const window = windowOf(event, at);
    if (window) {
      actor.windows.set(window.stream, window);
      out.push({ kind: 'window', id: actor.id, window });
    }
    if (!state.sendsActions) out.push(...this.marker(markerFromEvent(actor.id, event, at)));
    const bytes = typeof m.bytes === 'number' && Number.isFinite(m.bytes) ? m.bytes : undefined;
    out.push(...this.modern(actor, (t) => t.event(event, bytes)));
    return out;
  }

  private action(feed: string, m: Obj, at: number): PageMessage[] {
    const actor = isId(m.sessionId) ? this.actors.get(`${feed}/${m.sessionId}`) : undefined;
    const action = obj(m.action);
    if (!actor || typeof action.type !== 'string') return [];
    const type = action.type;
    return [
      ...this.modern(actor, (t) => t.action(type, action.params)),
      ...this.marker(markerFromAction(actor.id, { type, params: action.params }, at)),
    ];
  }

  private marker(marker: Marker | undefined): PageMessage[] {
    if (!marker) return [];
    const key = markerKey(marker);
    if (this.markerKeys.has(key)) return [];
    this.markerKeys.add(key);
    this.markers.push(marker);
    if (this.markers.length > this.limits.markers) {
      const dropped = this.markers.shift();
      if (dropped) this.markerKeys.delete(markerKey(dropped));
    }
    const actor = this.actors.get(marker.actorId);
    return [
      { kind: 'marker', marker, text: markerText(marker) },
      this.entry({
        at: marker.at,
        actorId: marker.actorId,
        label: actor ? this.label(actor) : marker.actorId,
        kind: 'marker',
        text: markerText(marker),
        chatter: false,
      }),
    ];
  }

  private figures(feed: string, state: FeedState, figures: unknown, at: number): PageMessage[] {
    const clean: Record<string, number> = {};
    for (const [name, value] of Object.entries(obj(figures)).slice(0, 500)) {
      if (typeof value === 'number' && Number.isFinite(value) && name.length <= 300) clean[name] = value;
    }
    state.figures = { figures: clean, at };
    return [{ kind: 'figures', feed, name: state.name, figures: clean, at }];
  }

  private entry(entry: TimelineEntry): PageMessage {
    this.timeline.push(entry);
    if (this.timeline.length > this.limits.timeline)
      this.timeline.splice(0, this.timeline.length - this.limits.timeline);
    return { kind: 'timeline', entry };
  }

  private label(actor: ActorState): string {
    return actorLabel(actor.machine, actor.snapshot.context, actor.id);
  }

  private actorMessage(a: ActorState): PageMessage {
    return {
      kind: 'actor',
      id: a.id,
      feed: a.feed,
      ...(a.parentId ? { parentId: a.parentId } : {}),
      ...(a.rootId ? { rootId: a.rootId } : {}),
      machine: a.machine,
      chart: a.chart,
      snapshot: a.snapshot,
      at: a.at,
    };
  }

  /** Over the limit: forget finished actors first, oldest first; then the least recently registered. */
  private prune(): void {
    if (this.actors.size <= this.limits.actors) return;
    for (const [id, a] of this.actors) {
      if (this.actors.size <= this.limits.actors) return;
      if (a.snapshot.status !== 'active') this.actors.delete(id);
    }
    for (const id of this.actors.keys()) {
      if (this.actors.size <= this.limits.actors) return;
      this.actors.delete(id);
    }
  }
}

function wireSnapshot(raw: unknown): WireSnapshot {
  const s = obj(raw);
  return {
    value: compact(s.value),
    status: typeof s.status === 'string' ? s.status : 'active',
    context: compact(s.context),
  };
}

/** `resume.requested` carries the window the log reported: the server machine's only view of retention. */
function windowOf(event: Obj, at: number): WindowSeen | undefined {
  if (event.type !== 'resume.requested') return undefined;
  const w = obj(event.window);
  const cursor = typeof event.lastEventId === 'string' ? parseEventId(event.lastEventId) : undefined;
  if (!cursor || typeof w.oldest !== 'number' || typeof w.head !== 'number') return undefined;
  return {
    stream: cursor.stream,
    oldest: w.oldest,
    head: w.head,
    finished: w.finished === true,
    requestedSeq: cursor.seq,
    at,
  };
}
