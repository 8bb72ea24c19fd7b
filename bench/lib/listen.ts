import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A server on 127.0.0.1 (ephemeral port) serving MCP at `url`. */
export interface RunningServer {
  readonly url: string;
  readonly http: http.Server;
  /** Live sessions, as the server counts them. */
  sessionCount(): number;
  /** Errors the server reported (should stay empty). */
  readonly errors: string[];
  close(): Promise<void>;
}

export const within = <T>(p: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([p, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms).unref())]);

export async function listen(handler: http.RequestListener): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  // Many idle sessions are opened in the memory row; keep-alive sockets must not pile up timers.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

export async function closeHttp(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await within(new Promise<void>((r) => server.close(() => r())), 2_000);
}
