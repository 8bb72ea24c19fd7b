import http from 'node:http';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { ContinuityClientTransport, ContinuityMetrics, createContinuityServer } from '../../src/index.js';
import { demoMcpServer } from '../server/harness.js';
import { listenOnLoopback } from '../support/listen.js';
import { type OfficialServer, startOfficialServer } from './client-official-server.js';

/**
 * Both eras, every client combination the README lists: 2025-era traffic through `continuityFetch` passes
 * untouched (v1 and v2 clients, the official v2 server's 2025 fallback), and the 2025 transport
 * `ContinuityClientTransport` works under the v2 `Client` too (against our 2025 server, through a cut).
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function official(): Promise<OfficialServer> {
  const s = await startOfficialServer({ chargeMs: 50 });
  cleanups.push(() => s.close());
  return s;
}

describe('2025-era traffic through continuityFetch', () => {
  it('the v2 Client negotiating 2025 passes through: the call answers, no 2026 call is run', async () => {
    const server = await official();
    const ended: unknown[] = [];
    const client = new ClientV2({ name: 'eras', version: '1.0.0' });
    await client.connect(
      new TransportV2(server.url, { fetch: continuityFetch({ onCallEnded: (e) => ended.push(e) }) }),
    );
    cleanups.push(() => client.close());
    expect(client.getNegotiatedProtocolVersion?.()).not.toBe('2026-07-28');
    const result = await client.callTool({ name: 'charge', arguments: { cents: 3 } });
    expect(result.content).toEqual([{ type: 'text', text: 'charged 3' }]);
    expect(ended).toEqual([]);
    expect(server.chargeStarts()).toBe(1);
  });

  it('the v1 Client with continuityFetch passes through as well', async () => {
    const server = await official();
    const ended: unknown[] = [];
    const client = new ClientV1({ name: 'eras', version: '1.0.0' });
    await client.connect(
      new TransportV1(server.url, { fetch: continuityFetch({ onCallEnded: (e) => ended.push(e) }) }),
    );
    cleanups.push(() => client.close());
    const result = await client.callTool({ name: 'charge', arguments: { cents: 4 } });
    expect(result.content).toEqual([{ type: 'text', text: 'charged 4' }]);
    expect(ended).toEqual([]);
  });
});

describe('the 2025 transport under the v2 Client', () => {
  it('ContinuityClientTransport given to the v2 Client keeps its 2025 guarantee: a cut call resumes and answers', async () => {
    const world = { effects: new Map(), servers: [] };
    const continuity = createContinuityServer({
      createMcpServer: () => demoMcpServer(world),
      heartbeatMs: 0,
      retryMs: 20,
      onError: () => undefined,
    });
    const server = http.createServer(continuity.nodeHandler);
    const url = new URL(`http://127.0.0.1:${await listenOnLoopback(server)}/mcp`);
    cleanups.push(async () => {
      await continuity.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    });
    const metrics = new ContinuityMetrics();
    const transport = new ContinuityClientTransport(url, {
      reconnect: { initialDelayMs: 20, maxDelayMs: 100, jitter: 'none' },
      metrics,
    });
    const client = new ClientV2({ name: 'eras', version: '1.0.0' });
    // No cast: the transport fits the v2 Client's Transport type as it is.
    await client.connect(transport);
    cleanups.push(() => client.close());
    expect(client.getNegotiatedProtocolVersion?.()).toBe('2025-11-25');
    const call = client.callTool({ name: 'slow', arguments: { ms: 400 } });
    await new Promise((r) => setTimeout(r, 100));
    server.closeAllConnections();
    const result = await call;
    expect(result.isError).not.toBe(true);
    // It came back through a resume, not by luck of timing.
    expect(metrics.figures()['mcp_continuity.client.reconnect_attempts']).toBeGreaterThanOrEqual(1);
  });
});
