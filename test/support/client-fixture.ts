import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach } from 'vitest';
import {
  type ContinuityClientOptions,
  ContinuityClientTransport,
  type ContinuityServerOptions,
} from '../../src/index.js';
import { restartableServer } from './restartable-server.js';

/** Reconnects fast enough for a test, with no jitter. */
export const FAST_RECONNECT: ContinuityClientOptions['reconnect'] = {
  initialDelayMs: 20,
  maxDelayMs: 200,
  jitter: 'none',
};

/**
 * The SDK Client over ContinuityClientTransport against a restartable server process, with everything a
 * test opens closed after it, last opened first. Call once per test file, at module level.
 */
export function clientFixture(name = 'test') {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const onCleanup = (cleanup: () => Promise<void>) => {
    cleanups.push(cleanup);
  };
  return {
    onCleanup,
    /** A server process that can crash and restart on the same port (restartable-server.ts). */
    async serverProcess(options: Partial<ContinuityServerOptions> = {}) {
      const p = await restartableServer(options);
      onCleanup(() => p.dispose());
      return p;
    },
    /** A connected SDK Client; what the transport reports through `onerror` is collected in `errors`. */
    async connect(url: URL, options: ContinuityClientOptions = {}) {
      const transport = new ContinuityClientTransport(url, { reconnect: FAST_RECONNECT, ...options });
      const errors: Error[] = [];
      const client = new Client({ name, version: '1.0.0' });
      await client.connect(transport);
      transport.onerror = (e) => errors.push(e);
      onCleanup(() => client.close());
      return { transport, client, errors };
    },
  };
}
