import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { describe, expect, it } from 'vitest';
import { JsonRpcCode } from '../../machines/codes.js';
import { ContinuityClientTransport } from '../../src/client/transport.js';
import { createContinuityServer } from '../../src/server/handler.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { demoMcpServer } from '../server/harness.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * A call whose every attempt is refused before a byte leaves (the server's port is closed) never ran: when
 * the retries run out it fails definitely, not as outcome unknown (-32050), which would send the
 * application reconciling a charge that cannot have happened. Real HTTP on loopback, the SDK's Client.
 */
describe('a server that cannot be reached at all', () => {
  it('a call refused on every attempt fails definitely (never sent), not outcome unknown', async () => {
    const effects = new Map<string, number>();
    const continuity = createContinuityServer({
      createMcpServer: () => demoMcpServer({ effects, servers: [] }),
      eventLog: new MemoryEventLog(),
      heartbeatMs: 0,
      onError: () => undefined,
    });
    const server = http.createServer(continuity.nodeHandler);
    const url = new URL(`http://127.0.0.1:${await listenOnLoopback(server)}/mcp`);
    const transport = new ContinuityClientTransport(url, {
      reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxRetries: 2, jitter: 'none' },
    });
    const client = new Client({ name: 'unreachable', version: '1.0.0' });
    try {
      await client.connect(transport);
      // The port closes: every later connection is refused.
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      const failure = await client
        .callTool({ name: 'charge', arguments: { key: 'never' } }, undefined, { timeout: 20_000 })
        .then(
          () => undefined,
          (e: unknown) => e as { code?: number; message?: string },
        );
      expect(failure?.code, failure?.message).toBe(JsonRpcCode.REQUEST_FAILED);
      expect(failure?.message).toContain('never sent');
      expect([...effects.values()]).toEqual([]);
    } finally {
      await client.close();
      await continuity.close();
    }
  }, 30_000);
});
