import type { Exchange, IoEvent, SseEvent } from '../../machines/client/io.js';
import type { VirtualClock } from './clock.js';

/**
 * The simulated network between client exchanges and the simulated server: every byte takes `latencyMs`,
 * delivery is FIFO per connection, and faults (reset, clean end, black hole, refusal) are injected here.
 */
export class SimConnection {
  open = true;
  blackholed = false;
  lastTraffic: number;
  /** Set by the server when it attaches the connection to a stream; called once when it goes away. */
  onGone: (() => void) | undefined;

  constructor(
    readonly id: number,
    readonly exchange: Exchange,
    private readonly net: SimNetwork,
    private readonly deliver: (event: IoEvent) => void,
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
    const now = this.net.clock.now();
    if (event.type === 'sse.event' && this.net.coalesce) {
      if (this.chunk && this.lastTraffic === now) {
        this.chunk.push(event);
        return;
      }
      const chunk: SseEvent[] = [event];
      this.chunk = chunk;
      this.lastTraffic = now;
      this.net.clock.setTimeout(() => {
        if (this.chunk === chunk) this.chunk = undefined;
        const [only] = chunk;
        this.deliver(chunk.length === 1 && only ? only : { type: 'sse.events', events: chunk });
      }, this.net.latencyMs);
      return;
    }
    this.chunk = undefined;
    this.lastTraffic = now;
    const terminal =
      event.type === 'http.response' || event.type === 'net.ended' || event.type === 'net.failed';
    if (terminal) this.close();
    this.net.clock.setTimeout(() => this.deliver(event), this.net.latencyMs);
  }

  /** The client went away (its exchange actor stopped). */
  abortByClient(): void {
    this.close();
  }

  /** A fault: both sides see the connection fail. */
  reset(): void {
    if (!this.open) return;
    this.close();
    this.net.clock.setTimeout(() => this.deliver({ type: 'net.failed', fault: 'reset' }), this.net.latencyMs);
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

export class SimNetwork {
  private nextId = 1;
  readonly connections = new Set<SimConnection>();
  /** While true, new connections are refused (a partition seen from the client). */
  refusing = false;

  constructor(
    readonly clock: VirtualClock,
    readonly latencyMs = 1,
    /** SSE events sent at one instant on one connection arrive together, as one `sse.events`. */
    readonly coalesce = false,
  ) {}

  /** Opens a connection; `serve` runs on the server side after one latency unless refused. */
  connect(
    exchange: Exchange,
    deliver: (event: IoEvent) => void,
    serve: (conn: SimConnection) => void,
  ): SimConnection {
    const conn = new SimConnection(this.nextId++, exchange, this, (e) => {
      // The client may have aborted while the event was on the wire; a dead exchange hears nothing.
      if (!this.clientGone.has(conn)) deliver(e);
    });
    if (this.refusing) {
      conn.open = false;
      this.clock.setTimeout(() => {
        if (!this.clientGone.has(conn)) deliver({ type: 'net.failed', fault: 'refused' });
      }, this.latencyMs);
      return conn;
    }
    this.connections.add(conn);
    this.clock.setTimeout(() => {
      if (conn.open) serve(conn);
    }, this.latencyMs);
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
