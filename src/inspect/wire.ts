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
  /** JSON bytes of a 2026 attempt's message, measured before compaction (`attempt.message` only). */
  readonly bytes?: number;
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

/** One attempt of a 2026-07-28 call, as its machine (`modernCall`) saw it. */
export interface CallAttemptView {
  /** 0 for the first attempt, n for the n-th re-issue. */
  readonly n: number;
  /** The attempt's JSON-RPC id (a re-issue has a new one). */
  readonly id: string;
  /** The `lastEventId` a re-issue carried (null: it had seen none); absent on a first attempt. */
  readonly lastEventId?: string | null;
  /** The HTTP status, once a response arrived (absent: no response, e.g. cut before any byte). */
  readonly status?: number;
  /** JSON-RPC messages the attempt received, and their JSON bytes. */
  readonly messages: number;
  readonly bytes: number;
  /** How the attempt ended (`cut-mid-stream`, `result`, `http-status`…), once it did. */
  readonly end?: string;
  /** What the machine decided on that end (`reissue`, `deliver`, `outcome-unknown`…), and why. */
  readonly decision?: string;
  readonly reason?: string;
  /** The wait before the re-issue the decision made. */
  readonly delayMs?: number;
}

/** What the page shows of the 2026-07-28 machines, derived by the hub from their snapshots and events. */
export type ModernView =
  | {
      readonly kind: 'call';
      /** The application's JSON-RPC id. */
      readonly requestId: string;
      readonly tool?: string;
      /** The idempotency key (sent only through the extension): the server's keyed request has the same. */
      readonly key?: string;
      readonly attempts: readonly CallAttemptView[];
      /** Once ended: `answered`, `outcomeUnknown` or `failed`, and the reason. */
      readonly outcome?: string;
      readonly reason?: string;
    }
  | {
      readonly kind: 'keyed';
      /** The idempotency key (the memo key without its principal), and the principal ('' without auth). */
      readonly key: string;
      readonly principal: string;
      /** The work state: running, committed, answered, cancelled, outcomeUnknown, refused. */
      readonly state: string;
      /** Bodies started under this key by this actor: 1 for a call that ran once. */
      readonly executions: number;
      /** Each attempt the server saw (by JSON-RPC id) and what it was answered. */
      readonly attempts: readonly { readonly id: string; readonly answer: string }[];
    }
  | {
      readonly kind: 'listen';
      readonly subscriptionId: string;
      /** The attempt in flight (the first id, then one per re-open). */
      readonly currentId: string;
      /** The last position received (the extension's), sent on a re-open. */
      readonly position?: string;
      readonly reopens: number;
      /** Each re-open after a break: what was missed (a count, or null: unknown), after how many tries. */
      readonly gaps: readonly { readonly missed: number | null; readonly attempts: number }[];
    };

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
  | { readonly kind: 'modern'; readonly id: string; readonly view: ModernView }
  | {
      readonly kind: 'figures';
      readonly feed: string;
      readonly name: string;
      readonly figures: Record<string, number>;
      readonly at: number;
    };
