import type { SimulatedClock } from 'xstate';
import type { Exchange, IoEvent, SseEvent } from '../../machines/client/io.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { ListenAttemptFacts } from '../../machines/server/listen-log.js';
import type { StreamFact, WorldPoint } from './facts.js';

/**
 * The listen world's network, on the xstate `SimulatedClock` the client machine runs on: one connection
 * per exchange; the request reaches the server after a small random delay; what the server writes reaches
 * the client in order, each frame after its own delay (frames due at once arrive as one chunk); a cut
 * loses everything in flight and tells the client (a reset, or after the headers maybe a clean end). It
 * records what the wire delivered: whose acknowledgement arrived, and the last positioned message.
 */

export type Frame =
  | { readonly at: number; readonly kind: 'headers' }
  /** The SDK's SSE keep-alive comment. */
  | { readonly at: number; readonly kind: 'keepalive' }
  | { readonly at: number; readonly kind: 'refused' }
  | {
      readonly at: number;
      readonly kind: 'message';
      readonly message: JsonRpcMessage;
      /** Where it stands among its run's changes (a world fact, for the oracle). */
      readonly point: WorldPoint;
      /** Its stream's request declared the extension to a server serving it: it carries a position. */
      readonly positioned: boolean;
      readonly ack: boolean;
    };

/** One connection: the client's side (its queue) and what the server keeps on it. */
export interface Conn {
  readonly fact: StreamFact;
  readonly body: JsonRpcMessage | undefined;
  readonly sendBack: (event: IoEvent) => void;
  open: boolean;
  /** Swallowed by the path: nothing more arrives, and the client is not told. */
  blackholed: boolean;
  phase: 'requesting' | 'arrived' | 'served';
  headersDelivered: boolean;
  readonly queue: Frame[];
  lastAt: number;
  timer?: number;
  serveTimer?: number;
  attempt?: ListenAttemptFacts & { subscribedAt?: number };
  /** The server's teardown of its stream (the SDK unsubscribes it). */
  teardown?: () => void;
}

type ClockInternals = { timeouts: Map<number, { start: number; timeout: number }> };
const MAX_TIMER_STEPS = 200_000;

export class ListenNetwork {
  readonly conns: Conn[] = [];
  readonly streams: StreamFact[] = [];
  /** The last positioned message the client received. */
  clientLast: WorldPoint | undefined;
  acks = 0;
  /** Set by the world: the server's side of a request that reached it. */
  onArrive: (conn: Conn) => void = () => undefined;
  /** Set by the world: hands the client machine what arrived on `conn`. */
  give: (conn: Conn, events: IoEvent[]) => void = () => undefined;

  constructor(
    readonly clock: SimulatedClock,
    readonly random: () => number,
    readonly latencyMaxMs: number,
  ) {}

  now(): number {
    return this.clock.now();
  }

  latency(): number {
    return 1 + Math.floor(this.random() * this.latencyMaxMs);
  }

  /** Every timer (the machine's, the network's, the server's) fires at its own time, in order. */
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

  /** Lets time pass until `ready` (bounded: a second of virtual time). */
  waitFor(ready: () => boolean): void {
    const end = this.now() + 1_000;
    while (!ready() && this.now() < end) this.runUntil(this.now() + 1);
  }

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
      blackholed: false,
      phase: 'requesting',
      headersDelivered: false,
      queue: [],
      lastAt: this.now(),
    };
    this.conns.push(conn);
    this.clock.setTimeout(() => {
      if (conn.open) this.onArrive(conn);
    }, this.latency());
    return conn;
  }

  /** The connection is gone: what is in flight is lost, the server tears its stream down. */
  drop(conn: Conn): void {
    conn.open = false;
    if (conn.queue.some((f) => f.kind === 'message' && f.ack)) conn.fact.ackLost = true;
    conn.queue.length = 0;
    if (conn.timer !== undefined) this.clock.clearTimeout(conn.timer);
    if (conn.serveTimer !== undefined) this.clock.clearTimeout(conn.serveTimer);
    conn.teardown?.();
  }

  /** Cut by the world: the client hears a reset (or, once it has the headers, maybe a clean end). */
  cut(conn: Conn, clean: boolean): void {
    if (!conn.open) return;
    this.drop(conn);
    this.give(conn, [
      clean && conn.headersDelivered ? { type: 'net.ended' } : { type: 'net.failed', fault: 'reset' },
    ]);
  }

  /** The path swallows the connection: what is in flight is lost, what follows too, silently. */
  blackhole(conn: Conn): void {
    if (!conn.open) return;
    conn.blackholed = true;
    if (conn.queue.some((f) => f.kind === 'message' && f.ack)) conn.fact.ackLost = true;
    conn.queue.length = 0;
    if (conn.timer !== undefined) this.clock.clearTimeout(conn.timer);
    conn.timer = undefined;
  }

  /** The client's connection now, if it has one open. */
  current(): Conn | undefined {
    const last = this.conns.at(-1);
    return last?.open ? last : undefined;
  }

  /** The server writes a frame; it arrives no earlier than the frames before it. */
  send(conn: Conn, frame: Frame): void {
    if (!conn.open || conn.blackholed) return;
    const at = Math.max(frame.at, conn.lastAt);
    conn.lastAt = at;
    conn.queue.push({ ...frame, at });
    this.arm(conn);
  }

  /** Nothing in flight but keep-alives, and no connection black-holed (its stall is still to come). */
  idle(): boolean {
    return this.conns.every(
      (c) =>
        !c.open || (!c.blackholed && c.phase === 'served' && c.queue.every((f) => f.kind === 'keepalive')),
    );
  }

  private arm(conn: Conn): void {
    const head = conn.queue[0];
    if (conn.timer !== undefined || head === undefined) return;
    conn.timer = this.clock.setTimeout(
      () => {
        conn.timer = undefined;
        this.arrived(conn);
      },
      Math.max(0, head.at - this.now()),
    );
  }

  private arrived(conn: Conn): void {
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
      } else if (frame.kind === 'keepalive') {
        flush();
        events.push({ type: 'sse.activity' });
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
}
