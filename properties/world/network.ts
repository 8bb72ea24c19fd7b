import type { Exchange, IoEvent, SseEvent } from '../../machines/client/io.js';
import type { VirtualClock } from './clock.js';
import { TRICKLE_CHUNK_BYTES, TRICKLE_GAP_MS, wireBytes } from './wire-size.js';

/**
 * What reaches a client exchange: the stream machine's events, or bytes that complete nothing yet (a part of
 * a large message, or a proxy's trickle), which only the exchange core's progress rule reads.
 */
export type WireEvent = IoEvent | { readonly type: 'wire.bytes'; readonly bytes: number };

/**
 * What a connection carries to the server: a stream machine's exchange (POST or GET), or the DELETE with
 * which a closing client ends its session (the runtime's transport sends it outside any stream).
 */
export type WireExchange =
  | (Exchange & { readonly principal?: string })
  | {
      readonly method: 'DELETE';
      readonly sessionId: string;
      /** Who sends it, when not the application that created the session (a stranger). */
      readonly principal?: string;
      readonly protocolVersion?: string;
      readonly lastEventId?: undefined;
      readonly body?: undefined;
    };

/**
 * The simulated network between client exchanges and the simulated server. Each message draws its own
 * latency, per direction (a request's way to the server, each event's way back), and delivery stays FIFO
 * per connection, as on one TCP connection. Faults (reset, clean end, black hole, refusal) are injected
 * here; a reset discards what was still in flight to the client, so it can land after the server ran a
 * request and before the response's first byte arrived.
 */
export class SimConnection {
  open = true;
  blackholed = false;
  /** Black-holed by a stall, not a partition: healing the network does not reset it (only a timeout can). */
  stalled = false;
  /** The server began a response on it (its status line is on the wire). */
  started = false;
  /** Reset by a fault: what was still on its way to the client is lost. */
  private wasReset = false;
  /** When the last event sent to the client arrives: a later one never arrives before it. */
  private lastArrival = 0;
  lastTraffic: number;
  /** Set by the server when it attaches the connection to a stream; called once when it goes away. */
  onGone: (() => void) | undefined;
  /** The server finished its response but left it open (`SimServerConfig.lingers`). */
  lingering = false;
  /** The client stopped reading it (its exchange stopped); it may still drain until abandoned. */
  stoppedByClient = false;

  constructor(
    readonly id: number,
    readonly exchange: WireExchange,
    private readonly net: SimNetwork,
    private readonly deliver: (event: WireEvent) => void,
  ) {
    this.lastTraffic = net.clock.now();
  }

  /**
   * SSE events sent at the same instant and not yet delivered, when the network coalesces: like bytes
   * that arrive in one chunk, they reach the client as one `sse.events`.
   */
  private chunk: SseEvent[] | undefined;

  /** Server → client. Dropped when the connection is gone or black-holed (the server cannot tell). */
  send(event: IoEvent): void {
    if (!this.open || this.blackholed) return;
    if (event.type === 'http.stream') this.started = true;
    const now = this.net.clock.now();
    if (event.type === 'sse.event' && this.net.coalesce) {
      if (this.chunk && this.lastTraffic === now) {
        this.chunk.push(event);
        return;
      }
      const chunk: SseEvent[] = [event];
      this.chunk = chunk;
      this.lastTraffic = now;
      this.toClient(
        () => {
          if (this.chunk === chunk) this.chunk = undefined;
          const [only] = chunk;
          this.deliver(chunk.length === 1 && only ? only : { type: 'sse.events', events: chunk });
        },
        false,
        wireBytes(event),
      );
      return;
    }
    this.chunk = undefined;
    this.lastTraffic = now;
    const terminal =
      event.type === 'http.response' || event.type === 'net.ended' || event.type === 'net.failed';
    if (terminal) this.close();
    this.toClient(() => this.deliver(event), false, event.type === 'sse.event' ? wireBytes(event) : 0);
  }

  /**
   * Schedules an arrival at the client: its own latency, never before what was sent earlier. A message of
   * more than `TRICKLE_CHUNK_BYTES` arrives a chunk at a time (each completing nothing), so what is sent
   * after it waits behind it, as on one TCP connection; the chunks are traffic a load balancer sees.
   */
  private toClient(arrive: () => void, keepOnReset = false, bytes = 0): void {
    const now = this.net.clock.now();
    let at = Math.max(now + this.net.latency(), this.lastArrival);
    for (let sent = TRICKLE_CHUNK_BYTES; sent < bytes; sent += TRICKLE_CHUNK_BYTES) {
      this.net.clock.setTimeout(() => {
        if (this.wasReset) return;
        this.lastTraffic = this.net.clock.now();
        this.deliver({ type: 'wire.bytes', bytes: TRICKLE_CHUNK_BYTES });
      }, at - now);
      at += TRICKLE_GAP_MS;
    }
    this.lastArrival = at;
    this.net.clock.setTimeout(() => {
      if (this.wasReset && !keepOnReset) return;
      arrive();
    }, at - now);
  }

  /**
   * A proxy keeps the connection trickling a few bytes that complete nothing while the stream behind it went
   * silent: only the progress rule can tell it from a live stream (it is stalled). Until it is gone.
   */
  trickle(): void {
    this.blackholed = true;
    this.stalled = this.started;
    if (!this.started) return;
    const drip = () => {
      if (!this.open) return;
      this.deliver({ type: 'wire.bytes', bytes: LORIS_BYTES });
      this.net.clock.setTimeout(drip, LORIS_GAP_MS);
    };
    this.net.clock.setTimeout(drip, LORIS_GAP_MS);
  }

  /** The client went away (its exchange actor stopped). */
  abortByClient(): void {
    this.close();
  }

  /** A fault: both sides see the connection fail. */
  reset(): void {
    if (!this.open) return;
    this.close();
    // What a lingering response sent counts as delivered, as it does when a response ends (`send` closes
    // the connection on its last event): only the connection's end is reported.
    this.wasReset = !this.lingering;
    this.toClient(() => this.deliver({ type: 'net.failed', fault: 'reset' }), true);
  }

  private close(): void {
    if (!this.open) return;
    this.open = false;
    this.net.forget(this);
    const gone = this.onGone;
    this.onGone = undefined;
    gone?.();
  }
}

/** The trickle of `SimConnection.trickle`: far below the progress threshold per stall timeout. */
const LORIS_BYTES = 16;
const LORIS_GAP_MS = 500;

export class SimNetwork {
  private nextId = 1;
  readonly connections = new Set<SimConnection>();
  /** While true, new connections are refused (a partition seen from the client). */
  refusing = false;

  constructor(
    readonly clock: VirtualClock,
    /** The latency of one message, drawn per message (a constant for a fixed-latency network). */
    readonly latency: () => number = () => 1,
    /** SSE events sent at one instant on one connection arrive together, as one `sse.events`. */
    readonly coalesce = false,
  ) {}

  /** Opens a connection; `serve` runs on the server side after one latency unless refused. */
  connect(
    exchange: WireExchange,
    deliver: (event: IoEvent) => void,
    serve: (conn: SimConnection) => void,
    /** Bytes that completed nothing yet (`WireEvent`); absent: the exchange does not count them. */
    partial?: (bytes: number) => void,
  ): SimConnection {
    const conn = new SimConnection(this.nextId++, exchange, this, (e) => {
      // The client may have aborted while the event was on the wire; a dead exchange hears nothing.
      if (this.clientGone.has(conn)) return;
      if (e.type === 'wire.bytes') partial?.(e.bytes);
      else deliver(e);
    });
    if (this.refusing) {
      conn.open = false;
      this.clock.setTimeout(() => {
        if (!this.clientGone.has(conn)) deliver({ type: 'net.failed', fault: 'refused' });
      }, this.latency());
      return conn;
    }
    this.connections.add(conn);
    this.clock.setTimeout(() => {
      if (conn.open) serve(conn);
    }, this.latency());
    return conn;
  }

  private readonly clientGone = new WeakSet<SimConnection>();

  /** The client side stops listening for good (exchange actor stopped). */
  abandon(conn: SimConnection): void {
    this.clientGone.add(conn);
    conn.abortByClient();
  }

  forget(conn: SimConnection): void {
    this.connections.delete(conn);
  }

  /** Open connections in a stable order, for faults chosen by index. */
  list(): SimConnection[] {
    return [...this.connections].sort((a, b) => a.id - b.id);
  }
}
