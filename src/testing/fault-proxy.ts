import { EventEmitter } from 'node:events';
import net from 'node:net';

/**
 * A TCP proxy on loopback that fails the way networks do, programmable from tests and the demo:
 * cut connections idle for N ms (a load balancer), reset at a chosen moment or at random, answer
 * 503 instead of forwarding, black-hole a connection (stop forwarding without closing), add latency.
 * It sees bytes, not HTTP: each connection is labelled with its first request line for reports.
 */
export interface FaultProxyOptions {
  /** Where to forward: the real server. */
  readonly target: { readonly host: string; readonly port: number };
  /** Reset connections with no traffic for this long (a load balancer's idle timeout). */
  readonly idleTimeoutMs?: number;
  /** Delay every chunk by this much, each direction. */
  readonly latencyMs?: number;
  /** Reset a connection with this probability per forwarded chunk (seeded, so runs replay). */
  readonly randomReset?: { readonly probability: number; readonly seed: number };
}

export interface ProxiedConnection {
  readonly id: number;
  /** The first request line seen, e.g. `POST /mcp`, for reports. */
  label: string;
  lastActivity: number;
  blackholed: boolean;
  readonly client: net.Socket;
  readonly upstream: net.Socket;
}

export type FaultEvent =
  | { type: 'connection'; id: number }
  | { type: 'cut'; id: number; label: string; reason: 'idle' | 'reset' | 'random' }
  | { type: 'refused'; id: number; status: number }
  | { type: 'blackhole'; id: number; label: string };

interface DelayedChunk {
  readonly due: number;
  readonly chunk: Buffer;
}

interface DelayedLine {
  readonly queue: DelayedChunk[];
  timer: NodeJS.Timeout | undefined;
}

export class FaultProxy extends EventEmitter<{ fault: [FaultEvent] }> {
  private readonly server: net.Server;
  readonly connections = new Set<ProxiedConnection>();
  private nextId = 1;
  private failures: number[] = [];
  private downUntil = 0;
  private downStatus = 503;
  private sweeper: ReturnType<typeof setInterval> | undefined;
  private idleTimeoutMs: number | undefined;
  private latencyMs: number;
  /** Chunks held back by latency, per destination socket, in arrival order. */
  private readonly delayed = new WeakMap<net.Socket, DelayedLine>();
  private rngState: number;
  private randomReset: number;

  private constructor(private readonly options: FaultProxyOptions) {
    super();
    this.latencyMs = options.latencyMs ?? 0;
    this.rngState = options.randomReset?.seed ?? 1;
    this.randomReset = options.randomReset?.probability ?? 0;
    this.server = net.createServer((socket) => this.accept(socket));
    this.setIdleTimeout(options.idleTimeoutMs);
  }

  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const proxy = new FaultProxy(options);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  url(path = '/mcp'): URL {
    return new URL(`http://127.0.0.1:${this.port}${path}`);
  }

  /** The next `count` new connections get `status` instead of reaching the server. */
  failNext(count: number, status = 503): void {
    this.failures.push(...Array.from({ length: count }, () => status));
  }

  /**
   * The upstream is unreachable for `ms`: open connections reset, and every new one gets `status` (a
   * balancer with no healthy backend) until the time is up.
   */
  outage(ms: number, status = 503): void {
    this.downUntil = Date.now() + ms;
    this.downStatus = status;
    this.reset();
  }

  setIdleTimeout(ms: number | undefined): void {
    this.idleTimeoutMs = ms;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    if (ms === undefined) return;
    this.sweeper = setInterval(
      () => {
        const now = Date.now();
        for (const c of this.connections) if (now - c.lastActivity >= ms) this.cut(c, 'idle');
      },
      Math.max(5, Math.min(50, Math.floor(ms / 4))),
    );
    this.sweeper.unref();
  }

  setLatency(ms: number): void {
    this.latencyMs = ms;
  }

  /** Resets every connection whose label matches (all when omitted): both sides see ECONNRESET. */
  reset(match?: (c: ProxiedConnection) => boolean): number {
    let n = 0;
    for (const c of [...this.connections]) {
      if (!match || match(c)) {
        this.cut(c, 'reset');
        n++;
      }
    }
    return n;
  }

  /** Stops forwarding on matching connections without closing them: only a stall timer can tell. */
  blackhole(match?: (c: ProxiedConnection) => boolean): number {
    let n = 0;
    for (const c of this.connections) {
      if (!c.blackholed && (!match || match(c))) {
        c.blackholed = true;
        this.emit('fault', { type: 'blackhole', id: c.id, label: c.label });
        n++;
      }
    }
    return n;
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    for (const c of [...this.connections]) this.drop(c);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    const id = this.nextId++;
    this.emit('fault', { type: 'connection', id });
    const status = Date.now() < this.downUntil ? this.downStatus : this.failures.shift();
    if (status !== undefined) {
      client.once('data', () => {
        this.emit('fault', { type: 'refused', id, status });
        client.end(`HTTP/1.1 ${status} Injected\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
      });
      client.on('error', () => undefined);
      return;
    }
    const upstream = net.connect(this.options.target.port, this.options.target.host);
    const c: ProxiedConnection = {
      id,
      label: '',
      lastActivity: Date.now(),
      blackholed: false,
      client,
      upstream,
    };
    this.connections.add(c);
    client.on('data', (chunk) => {
      if (c.label === '')
        c.label = chunk.toString('latin1', 0, Math.min(chunk.length, 200)).split(' HTTP/')[0] ?? '';
      this.forward(c, chunk, upstream);
    });
    upstream.on('data', (chunk) => this.forward(c, chunk, client));
    const done = () => this.drop(c);
    client.on('close', done);
    upstream.on('close', done);
    client.on('error', done);
    upstream.on('error', () => {
      if (!client.destroyed) client.resetAndDestroy();
      done();
    });
  }

  private forward(c: ProxiedConnection, chunk: Buffer, to: net.Socket): void {
    if (c.blackholed) return;
    c.lastActivity = Date.now();
    if (this.randomReset > 0 && this.random() < this.randomReset) {
      this.cut(c, 'random');
      return;
    }
    this.deliver(to, chunk);
  }

  /**
   * Writes a chunk after the current latency, in order: bytes on one TCP connection never overtake each
   * other, so a chunk waits for the ones queued before it even when the latency has dropped since.
   */
  private deliver(to: net.Socket, chunk: Buffer): void {
    const line = this.delayed.get(to) ?? { queue: [], timer: undefined };
    if (this.latencyMs <= 0 && line.queue.length === 0) {
      if (!to.destroyed) to.write(chunk);
      return;
    }
    line.queue.push({ due: Date.now() + this.latencyMs, chunk });
    this.delayed.set(to, line);
    if (line.timer === undefined) this.drainLater(to, line);
  }

  private drainLater(to: net.Socket, line: DelayedLine): void {
    const head = line.queue[0];
    if (head === undefined) return;
    line.timer = setTimeout(
      () => {
        line.timer = undefined;
        const now = Date.now();
        while (line.queue.length > 0 && (line.queue[0] as DelayedChunk).due <= now) {
          const { chunk } = line.queue.shift() as DelayedChunk;
          if (!to.destroyed) to.write(chunk);
        }
        this.drainLater(to, line);
      },
      Math.max(0, head.due - Date.now()),
    );
  }

  private cut(c: ProxiedConnection, reason: 'idle' | 'reset' | 'random'): void {
    if (!this.connections.has(c)) return;
    this.emit('fault', { type: 'cut', id: c.id, label: c.label, reason });
    if (!c.client.destroyed) c.client.resetAndDestroy();
    if (!c.upstream.destroyed) c.upstream.resetAndDestroy();
    this.connections.delete(c);
  }

  private drop(c: ProxiedConnection): void {
    if (!this.connections.delete(c)) return;
    if (!c.client.destroyed) c.client.destroy();
    if (!c.upstream.destroyed) c.upstream.destroy();
  }

  /** mulberry32: reproducible random resets. */
  private random(): number {
    this.rngState = (this.rngState + 0x6d2b79f5) >>> 0;
    let t = this.rngState;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}
