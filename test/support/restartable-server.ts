import http from 'node:http';
import {
  type ContinuityServer,
  type ContinuityServerOptions,
  createContinuityServer,
} from '../../src/index.js';
import type { EventLog } from '../../src/server/event-log.js';
import { type DemoWorld, demoMcpServer } from '../server/harness.js';
import { listenOnLoopback } from './listen.js';

/**
 * A server "process" on 127.0.0.1 that can crash (`restart`) or stop for a deploy (`deploy`) and start
 * again on the same port. With a memory log its sessions die with it; with `openLog`, each process opens
 * its own connection to the same durable store, as a restarted process would. The demo tools; `dispose`
 * (register it with the test's cleanups) closes every generation and the HTTP server.
 */
export async function restartableServer(
  options: Partial<ContinuityServerOptions> = {},
  openLog?: () => EventLog,
) {
  const world: DemoWorld = { effects: new Map(), servers: [] };
  const make = () =>
    createContinuityServer({
      createMcpServer: () => demoMcpServer(world),
      heartbeatMs: 0,
      retryMs: 50,
      onError: () => undefined,
      ...options,
      ...(openLog ? { eventLog: openLog() } : {}),
    });
  let current: ContinuityServer = make();
  const retired: ContinuityServer[] = [];
  const server = http.createServer((req, res) => current.nodeHandler(req, res));
  const port = await listenOnLoopback(server);
  return {
    world,
    server,
    port,
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    get continuity() {
      return current;
    },
    /** Every connection is cut, as when a load balancer recycles. The process and its sessions live on. */
    cutConnections() {
      server.closeAllConnections();
    },
    /** The process dies and a new one starts: connections reset, memory sessions gone. */
    restart() {
      retired.push(current);
      current = make();
      server.closeAllConnections();
    },
    /** The process stops (a deploy): its streams end without `event: close`; a new one starts. */
    async deploy() {
      const old = current;
      current = make();
      await old.close();
      server.closeAllConnections();
    },
    async dispose() {
      for (const c of [...retired, current]) await c.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
