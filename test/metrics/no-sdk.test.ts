import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { metrics } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import {
  ContinuityClientTransport,
  ContinuityMetrics,
  createContinuityServer,
  MemoryEventLog,
} from '../../src/index.js';
import { METER_VERSION } from '../../src/metrics/index.js';
import { demoMcpServer } from '../server/harness.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * No OTel SDK installed (no MeterProvider registered, no meter passed): the API's no-op meter records
 * nothing and nothing throws, while `figures()` still counts, for the inspector page and for tests.
 */
describe('metrics without an OTel SDK', () => {
  it('records nothing through OTel, throws nothing, and figures() still counts', async () => {
    // The precondition: no SDK is registered, so the default meter is the API's no-op one.
    expect(metrics.getMeterProvider().constructor.name).toBe('NoopMeterProvider');
    const serverMetrics = new ContinuityMetrics();
    const clientMetrics = new ContinuityMetrics();
    const continuity = createContinuityServer({
      createMcpServer: () => demoMcpServer({ effects: new Map(), servers: [] }),
      eventLog: new MemoryEventLog({ maxEventsPerStream: 3 }),
      heartbeatMs: 0,
      retryMs: 20,
      onError: () => undefined,
      metrics: serverMetrics,
    });
    const server = http.createServer(continuity.nodeHandler);
    const url = new URL(`http://127.0.0.1:${await listenOnLoopback(server)}/mcp`);
    const transport = new ContinuityClientTransport(url, {
      reconnect: { initialDelayMs: 20, maxDelayMs: 100, jitter: 'none' },
      metrics: clientMetrics,
    });
    const client = new Client({ name: 'no-sdk', version: '1.0.0' });
    try {
      await client.connect(transport);
      const call = client.callTool({ name: 'slow', arguments: { ms: 400 } });
      await new Promise((r) => setTimeout(r, 100));
      server.closeAllConnections(); // every stream is cut; the client resumes
      await call;
      await client.callTool({ name: 'chatty', arguments: { count: 10, intervalMs: 0 } });
    } finally {
      await client.close();
      await continuity.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
    const c = clientMetrics.figures();
    expect(c['mcp_continuity.client.reconnect_attempts']).toBeGreaterThanOrEqual(1);
    expect(c['mcp_continuity.client.reconnect_latency.count']).toBeGreaterThanOrEqual(1);
    const s = serverMetrics.figures();
    expect(s['mcp_continuity.server.resumes']).toBeGreaterThanOrEqual(1);
    expect(s['mcp_continuity.server.evicted_events']).toBeGreaterThanOrEqual(8);
    expect(s['mcp_continuity.server.sessions_ended{reason=terminated}']).toBe(1); // close() sent DELETE
    expect(s['mcp_continuity.server.retention_margin']).toBeLessThan(600_000);
    // Only one side was in use on each: the other side's figures are not invented.
    expect(Object.keys(c).some((k) => k.startsWith('mcp_continuity.server.'))).toBe(false);
    expect(Object.keys(s).some((k) => k.startsWith('mcp_continuity.client.'))).toBe(false);
  });

  it('reports the package version as the meter version', async () => {
    const pkg = JSON.parse(await readFile('package.json', 'utf8'));
    expect(METER_VERSION).toBe(pkg.version);
  });
});
