import net from 'node:net';

/**
 * A counting TCP relay in front of `redis-server`, for the store rows: every server instance connects
 * through it, so what the instances send is counted on the wire, whatever client code sent it. It
 * parses the RESP requests (each command is an array of bulk strings) to count commands, and counts
 * writes (socket reads that start at a command boundary: the batches the client flushed): with one call
 * in flight at a time, writes per call are its round trips (node-redis flushes a pipeline in one write).
 * Loopback only.
 */
export interface RedisMeterCounts {
  /** Commands the clients sent (a script call is one). */
  readonly commands: number;
  /** Bytes the clients sent to Redis. */
  readonly bytesSent: number;
  /** Bytes Redis sent back. */
  readonly bytesReceived: number;
  /** Batches the clients flushed (socket reads here that start a new command). */
  readonly writes: number;
  /** Commands by name (upper case). */
  readonly byName: Readonly<Record<string, number>>;
}

export interface RedisMeter {
  readonly url: string;
  counts(): RedisMeterCounts;
  close(): Promise<void>;
}

/** Counts RESP commands in a byte stream that arrives in arbitrary chunks. */
class RespCounter {
  private buffer: Buffer = Buffer.alloc(0);
  commands = 0;
  readonly byName: Record<string, number> = {};

  /** True when nothing of a command is pending: the next chunk starts a new batch. */
  get atBoundary(): boolean {
    return this.buffer.length === 0;
  }

  push(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const used = this.parseOne();
      if (used === 0) break;
      this.buffer = this.buffer.subarray(used);
    }
  }

  /** Parses one whole command at the start of the buffer; 0 when it has not all arrived. */
  private parseOne(): number {
    const b = this.buffer;
    if (b.length === 0 || b[0] !== 0x2a /* '*' */) return 0;
    let at = b.indexOf('\r\n');
    if (at < 0) return 0;
    const n = Number(b.subarray(1, at).toString());
    at += 2;
    let name = '';
    for (let i = 0; i < n; i++) {
      const end = b.indexOf('\r\n', at);
      if (end < 0) return 0;
      const len = Number(b.subarray(at + 1, end).toString());
      const start = end + 2;
      if (start + len + 2 > b.length) return 0;
      if (i === 0)
        name = b
          .subarray(start, start + len)
          .toString()
          .toUpperCase();
      at = start + len + 2;
    }
    this.commands++;
    this.byName[name] = (this.byName[name] ?? 0) + 1;
    return at;
  }
}

export async function startRedisMeter(upstreamPort: number): Promise<RedisMeter> {
  const counter = new RespCounter();
  let bytesSent = 0;
  let bytesReceived = 0;
  let writes = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: upstreamPort });
    sockets.add(client).add(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('data', (chunk: Buffer) => {
      // A chunk that continues a command cut by TCP is not a new batch.
      if (counter.atBoundary) writes++;
      bytesSent += chunk.length;
      counter.push(chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      bytesReceived += chunk.length;
      client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    counts: () => ({
      commands: counter.commands,
      bytesSent,
      bytesReceived,
      writes,
      byName: { ...counter.byName },
    }),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `after - before`, field by field. */
export function countsSince(before: RedisMeterCounts, after: RedisMeterCounts): RedisMeterCounts {
  const byName: Record<string, number> = {};
  for (const [k, v] of Object.entries(after.byName)) {
    const d = v - (before.byName[k] ?? 0);
    if (d > 0) byName[k] = d;
  }
  return {
    commands: after.commands - before.commands,
    bytesSent: after.bytesSent - before.bytesSent,
    bytesReceived: after.bytesReceived - before.bytesReceived,
    writes: after.writes - before.writes,
    byName,
  };
}
