import type { Exchange, IoEvent } from '../../machines/client/io.js';
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

  /** Server → client. Dropped when the connection is gone or black-holed (the server cannot tell). */
  send(event: IoEvent): void {
    if (!this.open || this.blackholed) return;
    this.lastTraffic = this.net.clock.now();
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
