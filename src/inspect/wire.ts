/**
 * The two wires of the inspector.
 *
 * Feed → inspector server: the inspection events of `@statelyai/inspect` (`@xstate.actor`, `@xstate.event`,
 * `@xstate.snapshot`), so its WebSocket and browser inspectors can feed the page as they are. Our own feed
 * (`createInspectorFeed`) sends the same, in batches (JSON arrays), plus three of its own: `@xstate.action`
 * for the actions that mark a gap or an outcome-unknown call (Stately's inspectors drop actions),
 * `mcpc.figures` (the metrics) and `mcpc.hello` (the feed's name).
 *
 * Inspector server → page: `PageMessage`s, already normalised (ids made unique across feeds, definitions
 * parsed into charts, markers and timeline lines derived), so the page only draws.
 */

/** A snapshot as the page needs it. */
export interface WireSnapshot {
  readonly value: unknown;
  readonly status: string;
  readonly context: unknown;
}

export interface FeedActor {
  readonly type: '@xstate.actor';
  readonly sessionId: string;
  readonly parentId?: string;
  readonly rootId?: string;
  readonly name?: string;
  /** The machine config, as JSON text (what @statelyai/inspect sends) or as an object. */
  readonly definition?: string | object;
  readonly snapshot?: unknown;
  readonly createdAt?: string | number;
}

export interface FeedSnapshot {
  readonly type: '@xstate.snapshot';
  readonly sessionId: string;
  readonly snapshot: unknown;
  readonly event?: unknown;
  readonly createdAt?: string | number;
}

export interface FeedEvent {
  readonly type: '@xstate.event';
  readonly sessionId: string;
  readonly sourceId?: string;
  readonly event: unknown;
  readonly createdAt?: string | number;
}

export interface FeedAction {
  readonly type: '@xstate.action';
  readonly sessionId: string;
  readonly action: { readonly type: string; readonly params?: unknown };
  readonly createdAt?: string | number;
}

export interface FeedFigures {
  readonly type: 'mcpc.figures';
  readonly figures: Record<string, number>;
  readonly createdAt?: string | number;
}

export interface FeedHello {
  readonly type: 'mcpc.hello';
  readonly name: string;
}

export type FeedMessage = FeedActor | FeedSnapshot | FeedEvent | FeedAction | FeedFigures | FeedHello;

/** One state node of a chart, read from a machine's config. */
export interface ChartNode {
  readonly key: string;
  /** Dotted path from the root (`connecting.streaming`); '' for the root. */
  readonly path: string;
  readonly type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  readonly initial?: string;
  readonly states: readonly ChartNode[];
  readonly transitions: readonly {
    readonly event: string;
    readonly target: string;
    readonly guard?: string;
  }[];
  readonly invokes: readonly string[];
  readonly tags: readonly string[];
  readonly description?: string;
}

export interface Marker {
  readonly kind: 'gap' | 'outcome-unknown';
  /** The actor that reported it (the client session machine). */
  readonly actorId: string;
  /** Stream key (gap) or request key (outcome unknown). */
  readonly key: string;
  readonly reason: string;
  /** Gaps: the exact count, or null when the size is unknown (session lost, stream ended unanswered). */
  readonly lostCount?: number | null;
  readonly detail?: string;
  /** Derived from events alone (a feed without actions, such as @statelyai/inspect's): likely, not certain. */
  readonly inferred?: boolean;
  readonly at: number;
}

export interface TimelineEntry {
  readonly at: number;
  readonly actorId: string;
  readonly label: string;
  readonly kind: 'event' | 'transition' | 'marker';
  readonly text: string;
  /** Routine traffic (every SSE event, every cursor move): hidden unless asked for. */
  readonly chatter: boolean;
}

/** A stream's retained window as the event log reported it when a client last resumed on it. */
export interface WindowSeen {
  readonly stream: number;
  readonly oldest: number;
  readonly head: number;
  readonly finished: boolean;
  /** The sequence number the client asked to resume after. */
  readonly requestedSeq?: number;
  readonly at: number;
}

export type PageMessage =
  | { readonly kind: 'reset' }
  | { readonly kind: 'feed'; readonly feed: string; readonly name: string; readonly connected: boolean }
  | {
      readonly kind: 'actor';
      readonly id: string;
      readonly feed: string;
      readonly parentId?: string;
      readonly rootId?: string;
      /** The machine's id (`client`, `stream`, `serverSession`, or yours). */
      readonly machine: string;
      readonly chart: ChartNode;
      readonly snapshot: WireSnapshot;
      readonly at: number;
    }
  | { readonly kind: 'snapshot'; readonly id: string; readonly snapshot: WireSnapshot; readonly at: number }
  | { readonly kind: 'timeline'; readonly entry: TimelineEntry }
  | { readonly kind: 'marker'; readonly marker: Marker; readonly text: string }
  | { readonly kind: 'window'; readonly id: string; readonly window: WindowSeen }
  | {
      readonly kind: 'figures';
      readonly feed: string;
      readonly name: string;
      readonly figures: Record<string, number>;
      readonly at: number;
    };
