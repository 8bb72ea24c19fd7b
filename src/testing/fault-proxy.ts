import { EventEmitter } from 'node:events';
import net from 'node:net';
import { chunkDueAt, chunksDue, idleCut, idleSweepPeriodMs, refusalOf } from '../../machines/fault-timing.js';
import { seededRandom } from '../../machines/seeded-random.js';
import { type Wake, WakePort } from '../server/wake-port.js';

/**
 * A TCP proxy on loopback that fails the way networks do, programmable from tests and the demo:
 * cut connections idle for N ms (a load balancer), reset at a chosen moment or at random, answer
 * 503 instead of forwarding, black-hole a connection (stop forwarding without closing), add latency.
 * It sees bytes, not HTTP: each connection is labelled with its first request line for reports.
 *
 * Timing: every delay and cut is decided by machines/fault-timing.ts; the proxy holds one timer port
 * (its clock and its only timer) and asks those functions what is due when it wakes.
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
  wake: Wake | undefined;
}

export class FaultProxy extends EventEmitter<{ fault: [FaultEvent] }> {
  private readonly server: net.Server;
  readonly connections = new Set<ProxiedConnection>();
  private nextId = 1;
  private failures: number[] = [];
  private outageWindow = { until: 0, status: 503 };
  /** The proxy's clock and its one timer: the sweep and every delayed line are wake-ups of it. */
  private readonly wakes = new WakePort();
  private sweeper: Wake | undefined;
  private idleTimeoutMs: number | undefined;
  private latencyMs: number;
  /** Chunks held back by latency, per destination socket, in arrival order. */
  private readonly delayed = new WeakMap<net.Socket, DelayedLine>();
  private readonly random: () => number;
  private randomReset: number;

  private constructor(private readonly options: FaultProxyOptions) {
    super();
    this.latencyMs = options.latencyMs ?? 0;
    this.random = seededRandom(options.randomReset?.seed ?? 1);
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
    this.outageWindow = { until: this.wakes.now() + ms, status };
    this.reset();
  }

  setIdleTimeout(ms: number | undefined): void {
    this.idleTimeoutMs = ms;
    this.sweeper?.cancel();
    this.sweeper = undefined;
    if (ms === undefined) return;
    this.sweeper = this.wakes.every(idleSweepPeriodMs(ms), (now) => {
      for (const c of this.connections) if (idleCut(now, c.lastActivity, ms)) this.cut(c, 'idle');
    });
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
    this.sweeper?.cancel();
    for (const c of [...this.connections]) this.drop(c);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    const id = this.nextId++;
    this.emit('fault', { type: 'connection', id });
    const refusal = refusalOf(this.wakes.now(), this.outageWindow, this.failures);
    if (refusal?.fromQueue) this.failures.shift();
    if (refusal !== undefined) {
      const status = refusal.status;
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
      lastActivity: this.wakes.now(),
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
    c.lastActivity = this.wakes.now();
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
    const line = this.delayed.get(to) ?? { queue: [], wake: undefined };
    const now = this.wakes.now();
    line.queue.push({ due: chunkDueAt(now, this.latencyMs), chunk });
    this.delayed.set(to, line);
    if (line.wake === undefined) this.drain(to, line, now);
  }

  /** Writes what is due on `line` at `now`, and asks to be woken when its next chunk is. */
  private drain(to: net.Socket, line: DelayedLine, now: number): void {
    for (const { chunk } of line.queue.splice(0, chunksDue(line.queue, now)))
      if (!to.destroyed) to.write(chunk);
    const head = line.queue[0];
    line.wake =
      head === undefined
        ? undefined
        : this.wakes.after(head.due - now, (at) => {
            line.wake = undefined;
            this.drain(to, line, at);
          });
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
}
