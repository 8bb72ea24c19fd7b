import type { WebSocket } from 'ws';
import type { InspectionEvent, Observer } from 'xstate';
import { loadOptional } from '../optional-peer.js';
import { compact, DEFINITION_LIMITS } from './compact.js';
import { isMarkerAction } from './markers.js';
import type { FeedActor, FeedMessage } from './wire.js';

/** Anything with flat figures, such as `ContinuityMetrics`: name → value. */
export interface FiguresSource {
  figures(): Record<string, number>;
}

export interface InspectorFeedOptions {
  /** The inspector's feed endpoint, as `mcp-continuity inspect` prints it: `ws://127.0.0.1:<port>/feed`. */
  readonly url: string | URL;
  /** Shown on the page, to tell processes apart. Default: `pid <pid>`. */
  readonly name?: string;
  /** Its `figures()` are sent every `figuresIntervalMs`, and the page shows them beside the machines. */
  readonly metrics?: FiguresSource;
  /** Default 500 ms. */
  readonly figuresIntervalMs?: number;
  /** Messages wait this long to go out together. Default 50 ms. */
  readonly flushIntervalMs?: number;
  /** Messages kept while the inspector is unreachable; beyond it the oldest go. Default 5000. */
  readonly maxQueued?: number;
}

/**
 * Pass `inspect` to `ContinuityClientTransport` and/or `createContinuityServer` (2025 sessions), and to
 * `continuityFetch` and/or `createKeyedRequests` (2026-07-28); `close()` when done.
 */
export interface InspectorFeed {
  readonly inspect: Observer<InspectionEvent>;
  /** Messages dropped because the inspector was unreachable for longer than the queue holds. */
  readonly dropped: number;
  /** Sends what is queued now (when connected). */
  flush(): void;
  /** Sends what is queued, stops the figures timer and closes the connection. */
  close(): Promise<void>;
}

/** Live actors kept for a reconnect, so a restarted inspector sees them again. Oldest are forgotten first. */
const MAX_REGISTERED = 1_000;
const RECONNECT_MS = [250, 1_000, 2_000, 5_000];

/**
 * Feeds a running client's and/or server's machines to `mcp-continuity inspect` over one WebSocket.
 * Inspection runs inside the machines' own step, so this never throws into it and never waits: events are
 * compacted at once (context is updated in place by some machines) and sent in batches. While the
 * inspector is unreachable it reconnects with backoff and keeps a bounded queue; on (re)connect it first
 * re-registers every live actor with its latest snapshot. Needs the `ws` package (an optional peer
 * dependency): without it, the feed emits one process warning naming it and sends nothing.
 */
export function createInspectorFeed(options: InspectorFeedOptions): InspectorFeed {
  const url = String(options.url);
  const name = options.name ?? `pid ${process.pid}`;
  const maxQueued = options.maxQueued ?? 5_000;
  const flushMs = options.flushIntervalMs ?? 50;
  const queue: FeedMessage[] = [];
  const registered = new Map<string, FeedActor>();
  const definitions = new WeakMap<object, string>();
  let socket: WebSocket | undefined;
  let open = false;
  let closed = false;
  let dropped = 0;
  let attempt = 0;
  let flushTimer: NodeJS.Timeout | undefined;
  let reconnectTimer: NodeJS.Timeout | undefined;

  const enqueue = (message: FeedMessage) => {
    queue.push(message);
    if (queue.length > maxQueued) {
      queue.shift();
      dropped++;
    }
    if (!flushTimer && open) flushTimer = setTimeout(flush, flushMs).unref();
  };

  function flush(): void {
    if (flushTimer) clearTimeout(flushTimer);
    flushTimer = undefined;
    if (!open || !socket || queue.length === 0) return;
    socket.send(JSON.stringify(queue.splice(0)));
  }

  // `ws` is an optional peer dependency: loaded on the first connect. Without it the feed warns once and
  // behaves as if the inspector were unreachable (bounded queue), since it must never throw into a machine.
  let wsModule: Promise<typeof import('ws') | undefined> | undefined;
  const loadWs = () => {
    wsModule ??= loadOptional(() => import('ws')).catch((error: unknown) => {
      process.emitWarning(error instanceof Error ? error.message : String(error));
      return undefined;
    });
    return wsModule;
  };

  function connect(): void {
    if (closed) return;
    void loadWs().then((ws) => {
      if (ws) dial(ws.WebSocket);
    });
  }

  function dial(WebSocketClass: typeof WebSocket): void {
    if (closed) return;
    const ws = new WebSocketClass(url, { handshakeTimeout: 5_000 });
    socket = ws;
    ws.on('open', () => {
      open = true;
      attempt = 0;
      // The registry holds each live actor's latest snapshot; queued snapshots and registrations are older.
      const pending = queue
        .splice(0)
        .filter((m) => m.type !== '@xstate.snapshot' && m.type !== '@xstate.actor');
      ws.send(JSON.stringify([{ type: 'mcpc.hello', name }, ...registered.values(), ...pending]));
    });
    ws.on('message', () => undefined);
    ws.on('error', () => undefined); // 'close' follows and schedules the reconnect
    ws.on('close', () => {
      open = false;
      if (socket === ws) socket = undefined;
      if (closed) return;
      const delay = RECONNECT_MS[Math.min(attempt++, RECONNECT_MS.length - 1)];
      reconnectTimer = setTimeout(connect, delay).unref();
    });
  }

  function definitionOf(logic: unknown): string | undefined {
    const config = (logic as { config?: unknown } | undefined)?.config;
    if (typeof config !== 'object' || config === null) return undefined;
    let text = definitions.get(config);
    if (text === undefined) {
      text = JSON.stringify(compact(config, DEFINITION_LIMITS));
      definitions.set(config, text);
    }
    return text;
  }

  /**
   * `@xstate.actor` comes before the actor has a snapshot: xstate's production build returns undefined,
   * its development build throws. Either way the first `@xstate.snapshot` follows at once.
   */
  const initialSnapshot = (ref: { getSnapshot(): unknown }): unknown => {
    try {
      return ref.getSnapshot();
    } catch {
      return undefined;
    }
  };

  const snapshotOf = (snapshot: unknown) => {
    const s = (snapshot ?? {}) as { value?: unknown; status?: unknown; context?: unknown };
    return { value: compact(s.value), status: s.status ?? 'active', context: compact(s.context) };
  };

  function observe(event: InspectionEvent): void {
    const sessionId = event.actorRef.sessionId;
    const createdAt = Date.now();
    switch (event.type) {
      case '@xstate.actor': {
        const ref = event.actorRef as unknown as { logic?: unknown; _parent?: { sessionId: string } };
        const definition = definitionOf(ref.logic);
        // Only machines are drawn; the client's `exchange` callback actors would be noise.
        if (definition === undefined) return;
        const actor: FeedActor = {
          type: '@xstate.actor',
          sessionId,
          rootId: event.rootId,
          ...(ref._parent ? { parentId: ref._parent.sessionId } : {}),
          definition,
          snapshot: snapshotOf(initialSnapshot(event.actorRef)),
          createdAt,
        };
        registered.set(sessionId, actor);
        if (registered.size > MAX_REGISTERED) registered.delete(registered.keys().next().value as string);
        enqueue(actor);
        return;
      }
      case '@xstate.snapshot': {
        const actor = registered.get(sessionId);
        if (!actor) return;
        const snapshot = snapshotOf(event.snapshot);
        // A finished actor will not change again; a reconnect need not re-register it.
        if (snapshot.status === 'active') registered.set(sessionId, { ...actor, snapshot });
        else registered.delete(sessionId);
        enqueue({ type: '@xstate.snapshot', sessionId, snapshot, event: compact(event.event), createdAt });
        return;
      }
      case '@xstate.event':
        if (!registered.has(sessionId)) return;
        enqueue({
          type: '@xstate.event',
          sessionId,
          ...(event.sourceRef ? { sourceId: event.sourceRef.sessionId } : {}),
          event: compact(event.event),
          // A 2026 attempt's message is compacted for the wire: its size is measured first.
          ...(event.event.type === 'attempt.message'
            ? { bytes: messageBytes((event.event as { message?: unknown }).message) }
            : {}),
          createdAt,
        });
        return;
      case '@xstate.action':
        if (!isMarkerAction(event.action)) return;
        enqueue({
          type: '@xstate.action',
          sessionId,
          action: { type: event.action.type, params: compact(event.action.params) },
          createdAt,
        });
        return;
      default:
        return;
    }
  }

  const figuresTimer = options.metrics
    ? setInterval(() => {
        try {
          enqueue({
            type: 'mcpc.figures',
            figures: { ...options.metrics?.figures() },
            createdAt: Date.now(),
          });
        } catch {
          // A metrics source that fails must not stop the feed.
        }
      }, options.figuresIntervalMs ?? 500).unref()
    : undefined;

  connect();

  return {
    inspect: {
      next: (event) => {
        try {
          observe(event);
        } catch {
          // Inspection must never break the machine it watches.
        }
      },
    },
    get dropped() {
      return dropped;
    },
    flush,
    close: async () => {
      if (closed) return;
      if (options.metrics) {
        try {
          enqueue({ type: 'mcpc.figures', figures: { ...options.metrics.figures() }, createdAt: Date.now() });
        } catch {
          // as above
        }
      }
      flush();
      closed = true;
      if (figuresTimer) clearInterval(figuresTimer);
      if (reconnectTimer) clearTimeout(reconnectTimer);
      const ws = socket;
      if (!ws) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          ws.terminate();
          resolve();
        }, 1_000).unref();
        ws.on('close', () => {
          clearTimeout(timer);
          resolve();
        });
        // A connection still opening is closed when it opens (ws throws on close() before that).
        if (ws.readyState === 0 /* CONNECTING */) ws.on('open', () => ws.close(1000));
        else ws.close(1000);
      });
    },
  };
}

/** The JSON bytes of an `attempt.message` event's message, as it came off the attempt's response. */
function messageBytes(message: unknown): number {
  return Buffer.byteLength(JSON.stringify(message ?? null));
}
