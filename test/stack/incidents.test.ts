import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ContinuityClientTransport,
  type ContinuityServerOptions,
  createContinuityServer,
  type GapReport,
  MemoryEventLog,
} from '../../src/index.js';
import { FaultProxy } from '../../src/testing/index.js';
import { type DemoWorld, demoMcpServer } from '../server/harness.js';

/**
 * The design note's two incidents, replayed on the real stack: SDK Client + ContinuityClientTransport →
 * fault proxy → createContinuityServer + SDK McpServer, all over loopback.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function stack(server: Partial<ContinuityServerOptions>, proxy: { idleTimeoutMs?: number } = {}) {
  const world: DemoWorld = { effects: new Map(), servers: [] };
  const continuity = createContinuityServer({
    createMcpServer: () => demoMcpServer(world),
    retryMs: 20,
    onError: () => undefined,
    ...server,
  });
  const httpServer = http.createServer(continuity.nodeHandler);
  await new Promise<void>((r) => httpServer.listen(0, '127.0.0.1', r));
  const faults = await FaultProxy.start({
    target: { host: '127.0.0.1', port: (httpServer.address() as AddressInfo).port },
    ...proxy,
  });
  cleanups.push(async () => {
    await faults.close();
    await continuity.close();
    httpServer.closeAllConnections();
    await new Promise<void>((r) => httpServer.close(() => r()));
  });
  return { world, continuity, faults };
}

async function connect(url: URL, options: ConstructorParameters<typeof ContinuityClientTransport>[1] = {}) {
  const transport = new ContinuityClientTransport(url, {
    reconnect: { initialDelayMs: 20, maxDelayMs: 200, jitter: 'none' },
    ...options,
  });
  const client = new Client({ name: 'incident', version: '1.0.0' });
  await client.connect(transport);
  cleanups.push(() => client.close());
  return { client, transport };
}

describe('incident 1: a load balancer idle-times-out the stream during a long-running charge', () => {
  it('exactly one charge, the result reaches the caller, same session id, no second initialize', async () => {
    // No heartbeats, and a balancer that cuts connections idle for 150 ms; the charge takes 600 ms.
    const { world, faults } = await stack({ heartbeatMs: 0 }, { idleTimeoutMs: 150 });
    const cuts: string[] = [];
    faults.on('fault', (e) => e.type === 'cut' && cuts.push(e.label));
    const { client, transport } = await connect(faults.url());
    const session = transport.sessionId;
    const result = await client.callTool({ name: 'charge', arguments: { key: 'card-4242', ms: 600 } });
    expect(result.content).toEqual([{ type: 'text', text: 'charged card-4242' }]);
    expect(world.effects.get('card-4242')).toBe(1);
    expect(transport.sessionId).toBe(session);
    expect(world.servers).toHaveLength(1); // one McpServer: one session, one initialize
    expect(cuts.some((l) => l.startsWith('POST'))).toBe(true); // the balancer did cut the call's stream
  });
});

describe('incident 2: a bounded buffer and a long disconnect during a chatty tool', () => {
  it('the application is told exactly which range was lost and how many events; nothing is skipped silently', async () => {
    const { faults } = await stack({
      eventLog: new MemoryEventLog({ maxEventsPerStream: 100 }),
      heartbeatMs: 0,
    });
    const gaps: GapReport[] = [];
    const { client } = await connect(faults.url(), {
      onGap: (g) => gaps.push(g),
      reconnect: { initialDelayMs: 700, maxDelayMs: 700, jitter: 'none' },
    });
    const progress: number[] = [];
    const call = client.callTool({ name: 'chatty', arguments: { count: 150, intervalMs: 1 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    // Cut the call's stream once a few notifications got through; the client is away for 700 ms.
    const deadline = Date.now() + 5_000;
    while (progress.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    faults.reset((c) => c.label.startsWith('POST'));
    const result = await call;
    expect(result.content).toEqual([{ type: 'text', text: 'sent 150' }]);
    expect(gaps).toHaveLength(1);
    const gap = gaps[0] as GapReport;
    const lost = gap.lostCount as number;
    expect(gap.reason).toBe('resume_window_exceeded');
    // Exactly the range between the last delivered event and the oldest retained one.
    const seq = (id?: string) => Number(id?.split('-')[2]);
    expect(seq(gap.oldestId) - seq(gap.requestedId) - 1).toBe(lost);
    expect(lost).toBeGreaterThanOrEqual(40);
    const missing = Array.from({ length: 150 }, (_, i) => i + 1).filter((n) => !progress.includes(n));
    expect(missing.length).toBe(lost);
    // The missing ones are one contiguous range, right after the last delivered before the cut.
    expect(missing.at(-1) as number).toBe((missing[0] as number) + lost - 1);
    expect(new Set(progress).size).toBe(progress.length);
  });
});
