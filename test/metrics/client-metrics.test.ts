import { describe, expect, it } from 'vitest';
import { ContinuityMetrics, type GapReport, isOutcomeUnknown, MemoryEventLog } from '../../src/index.js';
import { FaultProxy } from '../../src/testing/index.js';
import { isToolCall, networkFetch } from '../client/network.js';
import { clientFixture } from '../support/client-fixture.js';
import { otelSdk } from './otel.js';

/**
 * Each client metric moves when its event happens: the SDK Client over ContinuityClientTransport against
 * this project's server on 127.0.0.1, with faults from the network (a fault-injecting fetch, the
 * FaultProxy, a server restart), read from an OTel SDK and from `figures()`.
 */
const C = 'mcp_continuity.client';
const S = 'mcp_continuity.server';
const { serverProcess, connect, onCleanup } = clientFixture('metrics-test');

function observed() {
  const sdk = otelSdk();
  const metrics = new ContinuityMetrics({ meter: sdk.meter });
  onCleanup(() => sdk.shutdown());
  return { sdk, metrics };
}

describe('client metrics', () => {
  it('a 410: the gap, its lost count, the reconnect attempts and the outage latency are recorded', async () => {
    const server = observed();
    const p = await serverProcess({
      eventLog: new MemoryEventLog({ maxEventsPerStream: 5 }),
      metrics: server.metrics,
    });
    const net = networkFetch();
    // The call's stream breaks after its first chunk; the client comes back only after the call is over.
    net.when((r, n) => (isToolCall('chatty')(r) && n === 1 ? 'reset-after-first-chunk' : 'pass'));
    const { sdk, metrics } = observed();
    const gaps: GapReport[] = [];
    const { client } = await connect(p.url, {
      fetch: net.fetch,
      onGap: (g) => gaps.push(g),
      reconnect: { initialDelayMs: 400, maxDelayMs: 400, jitter: 'none' },
      metrics,
    });
    expect(metrics.figures()[`${C}.gaps`]).toBe(0);
    await client.callTool({ name: 'chatty', arguments: { count: 40, intervalMs: 1 } });
    expect(gaps).toHaveLength(1);
    const lost = gaps[0]?.lostCount as number;
    expect(lost).toBeGreaterThan(0);

    const f = metrics.figures();
    expect(f[`${C}.gaps`]).toBe(1);
    expect(f[`${C}.gaps{reason=resume_window_exceeded}`]).toBe(1);
    expect(f[`${C}.lost_events`]).toBe(lost);
    // One resume after the reset (backoff), one at once after the 410.
    expect(f[`${C}.reconnect_attempts{reason=reset}`]).toBe(1);
    expect(f[`${C}.reconnect_attempts{reason=events_lost}`]).toBe(1);
    expect(f[`${C}.reconnect_latency.count`]).toBe(1);
    expect(f[`${C}.reconnect_latency.max`]).toBeGreaterThanOrEqual(390);
    expect(f[`${C}.reconnect_latency.max`]).toBeLessThan(10_000);
    expect(f[`${C}.outcome_unknown`]).toBe(0);

    const otel = await sdk.collect();
    expect(otel.sum(`${C}.gaps`, { reason: 'resume_window_exceeded' })).toBe(1);
    expect(otel.sum(`${C}.lost_events`)).toBe(lost);
    expect(otel.sum(`${C}.reconnect_attempts`)).toBe(2);
    expect(otel.histogram(`${C}.reconnect_latency`).count).toBe(1);
    expect(otel.descriptor(`${C}.reconnect_latency`)?.unit).toBe('ms');
    // The server counted the same loss from its side.
    expect(server.metrics.figures()[`${S}.lost_events`]).toBe(lost);
  });

  it('a 404 mid-call: the call is counted as outcome unknown, and the session loss as a gap', async () => {
    const p = await serverProcess();
    const { sdk, metrics } = observed();
    const { client } = await connect(p.url, { metrics });
    const charge = client.callTool({ name: 'slow', arguments: { ms: 2_000 } });
    await new Promise((r) => setTimeout(r, 150));
    p.restart();
    const err = await charge.catch((e) => e);
    expect(isOutcomeUnknown(err)).toBe(true);

    const f = metrics.figures();
    expect(f[`${C}.outcome_unknown`]).toBe(1);
    expect(f[`${C}.outcome_unknown{reason=session_lost}`]).toBe(1);
    expect(f[`${C}.gaps{reason=session_lost}`]).toBe(1);
    expect((await sdk.collect()).sum(`${C}.outcome_unknown`, { reason: 'session_lost' })).toBe(1);
  });

  it('an outage: reconnect attempts and latency on both sides, and the server’s retention margin shrinks', async () => {
    const server = observed();
    const p = await serverProcess({ metrics: server.metrics });
    const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: p.port } });
    onCleanup(() => proxy.close());
    const { sdk, metrics } = observed();
    const { client } = await connect(proxy.url(), { metrics });
    await new Promise((r) => setTimeout(r, 100)); // the standalone GET stream opens
    const call = client.callTool({ name: 'slow', arguments: { ms: 1_500 } });
    await new Promise((r) => setTimeout(r, 200));
    proxy.outage(500); // every connection resets; new ones get 503 for 500 ms
    await call;

    const f = metrics.figures();
    expect(f[`${C}.reconnect_attempts{reason=reset}`]).toBeGreaterThanOrEqual(1);
    expect(f[`${C}.reconnect_attempts{reason=server_error}`]).toBeGreaterThanOrEqual(1);
    expect(f[`${C}.reconnect_latency.count`]).toBeGreaterThanOrEqual(1);
    expect(f[`${C}.reconnect_latency.max`]).toBeGreaterThanOrEqual(450);
    const otel = await sdk.collect();
    expect(otel.sum(`${C}.reconnect_attempts`)).toBe(f[`${C}.reconnect_attempts`]);
    expect(otel.histogram(`${C}.reconnect_latency`).max).toBe(f[`${C}.reconnect_latency.max`]);

    // The server timed the same outage from a response closing to the resume arriving.
    const sf = server.metrics.figures();
    const worst = sf[`${S}.reconnect_latency.max`] as number;
    expect(sf[`${S}.resumes`]).toBeGreaterThanOrEqual(1);
    expect(worst).toBeGreaterThanOrEqual(400);
    expect(sf[`${S}.retention_margin`]).toBe(600_000 - worst);
    expect((await server.sdk.collect()).gauge(`${S}.retention_margin`)).toBe(600_000 - worst);
  });
});
