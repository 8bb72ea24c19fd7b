import net from 'node:net';

export interface RawExchange {
  /** The status of the first response line, if one arrived. */
  readonly status: number | undefined;
  /** Everything the server wrote, as latin1. */
  readonly raw: string;
  /** The server closed (or reset) the connection before the deadline. */
  readonly closedByServer: boolean;
}

export interface RawOptions {
  /** Bytes sent after the first part, `gapMs` later (a slow or split request). */
  readonly rest?: string | Buffer;
  readonly gapMs?: number;
  /** After sending: 'end' half-closes, 'destroy' resets; default: keep the socket open. */
  readonly after?: 'end' | 'destroy' | 'keep';
  /** Resolve once this much time passed, or the server closed, or `until` holds. Default 2 s. */
  readonly timeoutMs?: number;
  /** Stop reading once this holds for what arrived so far. */
  readonly until?: (raw: string) => boolean;
}

/**
 * Sends raw bytes over a fresh TCP connection to 127.0.0.1 and collects what comes back: requests no
 * HTTP client library would send (no Host, broken framing, odd targets, bodies cut short).
 */
export function rawExchange(
  port: number,
  request: string | Buffer,
  options: RawOptions = {},
): Promise<RawExchange> {
  const timeoutMs = options.timeoutMs ?? 2_000;
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let raw = '';
    let done = false;
    const finish = (closedByServer: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(raw);
      resolve({ status: match ? Number(match[1]) : undefined, raw, closedByServer });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('error', () => finish(true));
    socket.on('data', (chunk) => {
      raw += chunk.toString('latin1');
      if (options.until?.(raw)) finish(false);
    });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('connect', () => {
      socket.write(request);
      const next = () => {
        if (options.after === 'end') socket.end();
        else if (options.after === 'destroy') {
          socket.destroy();
          finish(false);
        }
      };
      if (options.rest === undefined) return next();
      setTimeout(() => {
        if (!socket.destroyed) socket.write(options.rest as string | Buffer);
        next();
      }, options.gapMs ?? 20);
    });
  });
}
