import { type Actor, createActor, fromCallback, SimulatedClock } from 'xstate';
import type { ReconnectPolicy } from '../../machines/backoff.js';
import type { Exchange, IoEvent, SseEvent } from '../../machines/client/io.js';
import {
  LISTEN_METHOD,
  type ListenEmitted,
  listenMachine,
  RELIST_META_KEY,
} from '../../machines/client/listen.machine.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../machines/jsonrpc.js';
import {
  createListenLog,
  type ListenAttemptFacts,
  type ListenFilter,
  type ListenLog,
  type ListenLogLimits,
  listenAttemptOf,
  type PublishedEvent,
  positionedAck,
  publishChange,
  streamSubscribed,
} from '../../machines/server/listen-log.js';
import { seededRandom } from '../world/random.js';
import {
  CHANGE_TAG,
  type GapFact,
  type ListenWorldOutcome,
  type PublishFact,
  type StreamFact,
  type WorldPoint,
} from './facts.js';
import { CHANGES, type ListenCommand, type ListenWorldConfig } from './schedule.js';
import { acknowledgement, honoredFilter, notificationOf, routerAccepts } from './sdk-peer.js';

/**
 * The listen world: the REAL `listenMachine` as the client, on an xstate `SimulatedClock`; a network that
 * delivers each stream's frames in order after small random delays and can cut a stream (what is in
 * flight is lost); a server whose bus makes the REAL listen-log decisions (`publishChange`,
 * `streamSubscribed`, `listenAttemptOf`, `positionedAck`: the functions `PositionedEventBus` and the
 * modern endpoint call) in front of a simulated v2 SDK listen router (sdk-peer.ts), with an async gap
 * between a request's arrival and the SDK subscribing it, and restarts (a new log, a new epoch).
 */

/** The server's decisions, as the runtime makes them; a mutant swaps one. */
export interface ListenServerDecisions {
  readonly attemptOf: typeof listenAttemptOf;
  readonly subscribed: typeof streamSubscribed;
  readonly publish: typeof publishChange;
  /** The ack rewrite (`positionedAck`); `arrivalHead`: the log's head when the request arrived. */
  readonly ack: (
    message: JsonRpcMessage,
    attempt: ListenAttemptFacts,
    log: ListenLog,
    now: number,
    limits: ListenLogLimits,
    arrivalHead: number,
  ) => JsonRpcMessage;
}

export const RUNTIME_LISTEN_DECISIONS: ListenServerDecisions = {
  attemptOf: listenAttemptOf,
  subscribed: streamSubscribed,
  publish: publishChange,
  ack: (message, attempt, log, now, limits) => positionedAck(message, attempt, log, now, limits),
};

/** A client variant: the machine (a `provide` of it), or what it reads and what it tells the application. */
export interface ListenClientVariant {
  readonly machine?: typeof listenMachine;
  readonly read?: (event: IoEvent) => IoEvent;
  readonly emitted?: (event: ListenEmitted, config: ListenWorldConfig) => ListenEmitted;
}

export interface ListenVariant {
  readonly server?: ListenServerDecisions;
  readonly client?: ListenClientVariant;
}

export const LISTEN_POLICY: ReconnectPolicy = {
  initialDelayMs: 20,
  maxDelayMs: 200,
  factor: 2,
  maxRetries: 3,
  jitter: 'full',
};
const FIRST_ID = 'listen-1';
/** After the schedule, how long (virtual) the client may take to be acknowledged again and idle. */
export const LISTEN_SETTLE_MS = 30_000;
const MAX_TIMER_STEPS = 200_000;

type Frame =
  | { readonly at: number; readonly kind: 'headers' }
  | { readonly at: number; readonly kind: 'refused' }
  | {
      readonly at: number;
      readonly kind: 'message';
      readonly message: JsonRpcMessage;
      readonly point: WorldPoint;
      readonly positioned: boolean;
      readonly ack: boolean;
    };

interface Conn {
  readonly fact: StreamFact;
  readonly body: JsonRpcMessage | undefined;
  readonly sendBack: (event: IoEvent) => void;
  open: boolean;
  phase: 'requesting' | 'arrived' | 'served';
  headersDelivered: boolean;
  readonly queue: Frame[];
  lastAt: number;
  timer?: number;
  serveTimer?: number;
  attempt?: ListenAttemptFacts & { subscribedAt?: number };
  listener?: Listener;
}

interface Listener {
  readonly conn: Conn;
  readonly positions: boolean;
  /**
   * The world's fact: its request declared the extension, so this server's frames on it carry positions
   * (what the client's last position is judged by; `positions` is what the bus decided).
   */
  readonly declared: boolean;
  readonly filter: ListenFilter;
}

type ClockInternals = { timeouts: Map<number, { start: number; timeout: number }> };

class ListenWorld {
  readonly clock = new SimulatedClock();
  readonly random: () => number;
  readonly decisions: ListenServerDecisions;
  readonly publishes: PublishFact[] = [];
  readonly streams: StreamFact[] = [];
  readonly gaps: GapFact[] = [];
  readonly delivered: JsonRpcMessage[] = [];
  readonly anomalies: string[] = [];
  readonly conns: Conn[] = [];
  readonly listeners = new Set<Listener>();
  run = 1;
  generation = 0;
  up = true;
  /** This run serves the listen part (the endpoint with `keyed`: the positioned bus and the ack rewrite). */
  extension: boolean;
  log: ListenLog = createListenLog('run1');
  order = 0;
  acks = 0;
  clientLast: WorldPoint | undefined;
  /** The stream whose frames the client is being given now (its emitted events are attributed to it). */
  delivering: number | undefined;
  currentGap: GapFact | undefined;
  readonly actor: Actor<typeof listenMachine>;

  constructor(
    readonly config: ListenWorldConfig,
    readonly variant: ListenVariant,
  ) {
    this.random = seededRandom(config.seed);
    this.extension = config.extension;
    this.decisions = variant.server ?? RUNTIME_LISTEN_DECISIONS;
    const machine = (variant.client?.machine ?? listenMachine).provide({
      actors: {
        exchange: fromCallback<IoEvent, Exchange>(({ input, sendBack }) => {
          const conn = this.open(input, sendBack);
          return () => this.closedByClient(conn);
        }),
      },
    });
    const request: JsonRpcRequest = {
      jsonrpc: '2.0',
      id: FIRST_ID,
      method: LISTEN_METHOD,
      params: { notifications: { ...config.filter } },
    };
    this.actor = createActor(machine, {
      input: { request, policy: LISTEN_POLICY, jitterSeed: config.seed, useExtension: true },
      clock: this.clock,
    });
    const distort = variant.client?.emitted ?? ((e: ListenEmitted) => e);
    this.actor.on('*', (e) => this.record(distort(e as ListenEmitted, config)));
    this.actor.start();
  }

  now(): number {
    return this.clock.now();
  }

  latency(max = this.config.latencyMaxMs): number {
    return 1 + Math.floor(this.random() * max);
  }

  // ---- the clock: every timer (the machine's, the network's, the server's) fires at its own time ----

  runUntil(t: number): void {
    const timeouts = (this.clock as unknown as ClockInternals).timeouts;
    for (let step = 0; step < MAX_TIMER_STEPS; step++) {
      let next = Number.POSITIVE_INFINITY;
      for (const { start, timeout } of timeouts.values()) next = Math.min(next, start + timeout);
      if (next > t) break;
      this.clock.set(Math.max(next, this.now()));
    }
    if (t > this.now()) this.clock.set(t);
  }

  // ---- the client side of the network ----

  open(exchange: Exchange, sendBack: (event: IoEvent) => void): Conn {
    const fact: StreamFact = {
      n: this.streams.length + 1,
      sentAt: this.now(),
      lastPointAtSend: this.clientLast,
      ackDelivered: false,
      ackLost: false,
      refused: false,
    };
    this.streams.push(fact);
    const conn: Conn = {
      fact,
      body: exchange.body,
      sendBack,
      open: true,
      phase: 'requesting',
      headersDelivered: false,
      queue: [],
      lastAt: this.now(),
    };
    this.conns.push(conn);
    this.clock.setTimeout(() => this.arrive(conn), this.latency());
    return conn;
  }

  closedByClient(conn: Conn): void {
    if (!conn.open) return;
    this.drop(conn);
  }

  /** The connection is gone: what is in flight is lost, the SDK tears the stream down (unsubscribes). */
  drop(conn: Conn): void {
    conn.open = false;
    if (conn.queue.some((f) => f.kind === 'message' && f.ack)) conn.fact.ackLost = true;
    conn.queue.length = 0;
    if (conn.timer !== undefined) this.clock.clearTimeout(conn.timer);
    if (conn.serveTimer !== undefined) this.clock.clearTimeout(conn.serveTimer);
    if (conn.listener) this.listeners.delete(conn.listener);
  }

  /** Cut by the world: the client hears a reset (or, once it has the headers, maybe a clean end). */
  cut(conn: Conn, clean: boolean): void {
    if (!conn.open) return;
    this.drop(conn);
    this.give(conn, [
      clean && conn.headersDelivered ? { type: 'net.ended' } : { type: 'net.failed', fault: 'reset' },
    ]);
  }

  send(conn: Conn, frame: Frame): void {
    if (!conn.open) return;
    const at = Math.max(frame.at, conn.lastAt);
    conn.lastAt = at;
    conn.queue.push({ ...frame, at });
    this.arm(conn);
  }

  arm(conn: Conn): void {
    const head = conn.queue[0];
    if (conn.timer !== undefined || head === undefined) return;
    conn.timer = this.clock.setTimeout(
      () => {
        conn.timer = undefined;
        this.arrivedAtClient(conn);
      },
      Math.max(0, head.at - this.now()),
    );
  }

  arrivedAtClient(conn: Conn): void {
    const due: Frame[] = [];
    while (conn.queue.length > 0 && (conn.queue[0] as Frame).at <= this.now())
      due.push(conn.queue.shift() as Frame);
    const events: IoEvent[] = [];
    let messages: SseEvent[] = [];
    const flush = () => {
      if (messages.length > 0) events.push({ type: 'sse.events', events: messages });
      messages = [];
    };
    for (const frame of due) {
      if (frame.kind === 'headers') {
        conn.headersDelivered = true;
        events.push({ type: 'http.stream' });
      } else if (frame.kind === 'refused') {
        flush();
        conn.fact.refused = true;
        this.drop(conn);
        events.push({ type: 'net.failed', fault: 'refused' });
      } else {
        if (frame.ack) {
          conn.fact.ackDelivered = true;
          conn.fact.ackOrder = ++this.acks;
        }
        if (frame.positioned) this.clientLast = frame.point;
        messages.push({ type: 'sse.event', event: 'message', message: frame.message });
      }
    }
    flush();
    this.give(conn, events);
    this.arm(conn);
  }

  give(conn: Conn, events: IoEvent[]): void {
    const read = this.variant.client?.read ?? ((e: IoEvent) => e);
    this.delivering = conn.fact.n;
    try {
      for (const e of events) this.actor.send(read(e));
    } finally {
      this.delivering = undefined;
      this.currentGap = undefined;
    }
  }

  record(e: ListenEmitted): void {
    if (e.type === 'listen.gap') {
      const gap: GapFact = {
        stream: this.delivering ?? 0,
        missed: e.gap.missed,
        relist: e.gap.relist,
        relistEvents: [],
        synthesized: [],
      };
      this.gaps.push(gap);
      this.currentGap = gap;
    } else if (e.type === 'listen.relist') {
      if (this.currentGap) this.currentGap.relistEvents.push([...e.what]);
      else this.anomalies.push(`listen.relist ${JSON.stringify(e.what)} with no gap`);
    } else if (e.type === 'listen.deliver') {
      for (const m of e.messages) {
        this.delivered.push(m);
        const item = synthesizedItem(m);
        if (item === undefined) continue;
        if (this.currentGap) this.currentGap.synthesized.push(item);
        else this.anomalies.push(`a synthesized ${item} with no gap`);
      }
    }
  }

  // ---- the server ----

  arrive(conn: Conn): void {
    if (!conn.open) return;
    if (!this.up) {
      this.send(conn, { at: this.now() + this.latency(), kind: 'refused' });
      return;
    }
    // Without the listen part the endpoint hands the request to the SDK as it is (no attempt, no log).
    const attempt = !this.extension
      ? { positions: false }
      : conn.body === undefined
        ? undefined
        : this.decisions.attemptOf(conn.body);
    if (attempt === undefined) throw new Error('the listen world only sends listen requests');
    conn.phase = 'arrived';
    conn.attempt = { ...attempt };
    conn.fact.run = this.run;
    conn.fact.extension = this.extension;
    conn.fact.arrivedPoint = this.runPublishes();
    const run = this.run;
    const arrivalHead = this.log.head;
    conn.serveTimer = this.clock.setTimeout(
      () => {
        conn.serveTimer = undefined;
        if (!conn.open) return;
        if (this.up && this.run === run) this.serve(conn, arrivalHead);
        else this.cut(conn, false);
      },
      Math.floor(this.random() * (this.config.subscribeGapMaxMs + 1)),
    );
  }

  runPublishes(): number {
    return this.publishes.filter((p) => p.run === this.run).length;
  }

  /** The SDK's router serving the request: the ack first, then (synchronously) the bus subscription. */
  serve(conn: Conn, arrivalHead: number): void {
    const attempt = conn.attempt as ListenAttemptFacts & { subscribedAt?: number };
    const requested = ((conn.body as JsonRpcRequest).params?.notifications ?? {}) as ListenFilter;
    const honored = honoredFilter(requested);
    const id = (conn.body as JsonRpcRequest).id;
    const ack = acknowledgement(honored, id);
    const { subscribedAt, positions } = this.extension
      ? this.decisions.subscribed(this.log, attempt)
      : { subscribedAt: undefined, positions: false };
    attempt.subscribedAt = subscribedAt;
    const listener: Listener = { conn, positions, declared: attempt.positions, filter: honored };
    conn.listener = listener;
    this.listeners.add(listener);
    conn.phase = 'served';
    const point = this.runPublishes();
    conn.fact.subscribePoint = point;
    conn.fact.subscribedOrder = ++this.order;
    conn.fact.ackAt = this.now();
    const rewritten = this.extension
      ? this.decisions.ack(ack, attempt, this.log, this.now(), this.config.limits, arrivalHead)
      : ack;
    const at = this.now() + this.latency();
    this.send(conn, { at, kind: 'headers' });
    // The ack may come in the headers' chunk or a later one.
    this.send(conn, {
      at: at + Math.floor(this.random() * 2),
      kind: 'message',
      message: rewritten,
      point: { run: this.run, point },
      positioned: attempt.positions,
      ack: true,
    });
  }

  publish(change: (typeof CHANGES)[number]): void {
    if (!this.up) return;
    const id = this.publishes.length + 1;
    const event: PublishedEvent = {
      ...change,
      params: { _meta: { [CHANGE_TAG]: id } },
    };
    const positionedParams = this.extension
      ? this.decisions.publish(this.log, event, this.now(), this.config.limits).positionedParams
      : event.params;
    const index = this.runPublishes() + 1;
    this.publishes.push({
      id,
      order: ++this.order,
      at: this.now(),
      run: this.run,
      index,
      kind: change.kind,
      ...('uri' in change ? { uri: change.uri } : {}),
    });
    for (const listener of [...this.listeners]) {
      if (!routerAccepts(listener.filter, event)) continue;
      const id0 = (listener.conn.body as JsonRpcRequest).id;
      this.send(listener.conn, {
        at: this.now() + this.latency(),
        kind: 'message',
        message: notificationOf(event, listener.positions ? positionedParams : event.params, id0),
        point: { run: this.run, point: index },
        positioned: listener.declared,
        ack: false,
      });
    }
  }

  restart(downMs: number, withoutExtension: boolean): void {
    this.up = false;
    for (const conn of [...this.conns]) this.cut(conn, false);
    // A restart while down postpones the comeback: the latest one decides when.
    const generation = ++this.generation;
    const back = () => {
      if (generation !== this.generation) return;
      this.run += 1;
      this.log = createListenLog(`run${this.run}`);
      this.extension = !withoutExtension;
      this.up = true;
    };
    if (downMs === 0) back();
    else this.clock.setTimeout(back, downMs);
  }

  /** Lets time pass until `ready` (bounded: a second of virtual time). */
  waitFor(ready: () => boolean): void {
    const end = this.now() + 1_000;
    while (!ready() && this.now() < end) this.runUntil(this.now() + 1);
  }

  handedOver(): boolean {
    return this.actor.getSnapshot().context.handedOver;
  }

  current(): Conn | undefined {
    const last = this.conns.at(-1);
    return last?.open ? last : undefined;
  }

  settled(): boolean {
    const snap = this.actor.getSnapshot();
    const ctx = snap.context;
    return (
      this.up &&
      snap.matches({ exchanging: 'streaming' }) &&
      ctx.acknowledged &&
      !ctx.gapOpen &&
      this.conns.every((c) => !c.open || (c.phase === 'served' && c.queue.length === 0))
    );
  }
}

/** What a synthesized change notification tells the application to re-list; `undefined` for any other. */
function synthesizedItem(m: JsonRpcMessage): string | undefined {
  if (!('method' in m)) return undefined;
  const params = m.params as { _meta?: Record<string, unknown>; uri?: string } | undefined;
  if (params?._meta?.[RELIST_META_KEY] !== true) return undefined;
  switch (m.method) {
    case 'notifications/tools/list_changed':
      return 'tools';
    case 'notifications/prompts/list_changed':
      return 'prompts';
    case 'notifications/resources/list_changed':
      return 'resources';
    default:
      return `resource:${params.uri ?? ''}`;
  }
}

/** Runs one schedule, then quiescence; returns what the world saw. */
export function runListenWorld(
  commands: readonly ListenCommand[],
  config: ListenWorldConfig,
  variant: ListenVariant = {},
): ListenWorldOutcome {
  const w = new ListenWorld(config, variant);
  try {
    for (const c of commands) {
      switch (c.kind) {
        case 'publish':
          w.publish(CHANGES[c.change % CHANGES.length] as (typeof CHANGES)[number]);
          break;
        case 'advance':
          w.runUntil(w.now() + c.ms);
          break;
        // Before the application holds a stream, a failure is its own answer (`notOpened`): the model
        // starts its faults once the first stream is handed over.
        case 'cut': {
          w.waitFor(() => w.current() !== undefined && w.handedOver());
          w.runUntil(w.now() + c.afterMs);
          const conn = w.current();
          if (conn && w.handedOver()) w.cut(conn, c.clean);
          break;
        }
        case 'restart':
          w.waitFor(() => w.handedOver());
          if (w.handedOver()) w.restart(c.downMs, c.withoutExtension === true);
          break;
      }
    }
    const end = w.now() + LISTEN_SETTLE_MS;
    while (!w.settled() && w.now() < end) w.runUntil(w.now() + 5);
    return {
      config,
      firstId: FIRST_ID,
      publishes: w.publishes,
      streams: w.streams,
      gaps: w.gaps,
      delivered: w.delivered,
      runs: w.run,
      settled: w.settled(),
      anomalies: w.anomalies,
    };
  } finally {
    w.actor.stop();
  }
}
