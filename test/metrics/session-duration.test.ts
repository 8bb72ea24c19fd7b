import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ContinuityMetrics, isOutcomeUnknown } from '../../src/index.js';
import { ConventionMetric } from '../../src/metrics/names.js';
import { SqliteEventLog } from '../../src/sqlite.js';
import { RawClient, startServer } from '../server/harness.js';
import { clientFixture } from '../support/client-fixture.js';
import { eventually, otelSdk } from './otel.js';

/**
 * The conventions' session durations for 2025 sessions (`mcp.client.session.duration`,
 * `mcp.server.session.duration`, seconds), read through an OTel SDK and `figures()`: over real HTTP on
 * 127.0.0.1, a session held for a measured while and then ended, by the client, by a DELETE, or lost.
 */
const CLIENT = ConventionMetric.clientSessionDuration.name;
const SERVER = ConventionMetric.serverSessionDuration.name;
const { serverProcess, connect, onCleanup } = clientFixture('session-duration');

function observed() {
  const sdk = otelSdk();
  const metrics = new ContinuityMetrics({ meter: sdk.meter });
  onCleanup(() => sdk.shutdown());
  return { sdk, metrics };
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('session durations on the MCP conventions', () => {
  it('a session another instance ended is forgotten here, not timed until the bound pushes it out', () => {
    const { metrics } = observed();
    metrics.server.sessionStarted('s-here');
    metrics.server.sessionStarted('s-elsewhere');
    expect(metrics.server.timedSessions).toBe(2);
    metrics.server.sessionEndedElsewhere('s-elsewhere');
    expect(metrics.server.timedSessions).toBe(1);
    // Counted and timed only where the end was decided: nothing recorded for the forgotten one.
    expect(metrics.figures()[`${SERVER}.count`] ?? 0).toBe(0);
    metrics.server.sessionEnded('s-here', 'terminated');
    expect(metrics.figures()[`${SERVER}.count`]).toBe(1);
    expect(metrics.server.timedSessions).toBe(0);
  });

  it('the server times a session from its initialize to its DELETE, in seconds', async () => {
    const { sdk, metrics } = observed();
    const server = await startServer({ metrics });
    onCleanup(() => server.close());
    const client = new RawClient(server.url);
    const before = performance.now();
    await client.initialize();
    expect(metrics.figures()[`${SERVER}.count`]).toBe(0);
    await wait(300);
    const deleted = await fetch(server.url, { method: 'DELETE', headers: client.headers() });
    expect(deleted.status).toBe(200);
    const held = (performance.now() - before) / 1000;

    const otel = await sdk.collect();
    expect(otel.descriptor(SERVER)?.unit).toBe('s');
    const h = otel.histogram(SERVER, { 'mcp_continuity.reason': 'terminated' });
    expect(h.count).toBe(1);
    expect(h.sum).toBeGreaterThanOrEqual(0.29);
    expect(h.sum).toBeLessThanOrEqual(held);
    expect(metrics.figures()[`${SERVER}.count`]).toBe(1);
  });

  it('a session restored by a new process is timed from its creation in the old one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-duration-'));
    onCleanup(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'log.db');
    const before = performance.now();
    const first = await startServer({ eventLog: new SqliteEventLog({ path }) });
    const client = new RawClient(first.url);
    await client.initialize();
    await wait(300);
    await first.close();
    // The new process on the same file: it has never seen the session start.
    const { sdk, metrics } = observed();
    const second = await startServer({ eventLog: new SqliteEventLog({ path }), metrics });
    onCleanup(() => second.close());
    const again = Object.assign(new RawClient(second.url), { sessionId: client.sessionId });
    await wait(100);
    const deleted = await fetch(second.url, { method: 'DELETE', headers: again.headers() });
    expect(deleted.status).toBe(200);
    const held = (performance.now() - before) / 1000;

    const h = (await sdk.collect()).histogram(SERVER, { 'mcp_continuity.reason': 'terminated' });
    expect(h.count).toBe(1);
    // Both processes' share: the 300 ms before the restart and the 100 ms after it.
    expect(h.sum).toBeGreaterThanOrEqual(0.39);
    expect(h.sum).toBeLessThanOrEqual(held + 0.01);
  });

  it('the client times its session from the id to close(), with its protocol version', async () => {
    const p = await serverProcess();
    const { sdk, metrics } = observed();
    const before = performance.now();
    const { client, transport } = await connect(p.url, { metrics });
    const version = transport.actor.getSnapshot().context.protocolVersion;
    expect(version).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    await wait(300);
    expect(metrics.figures()[`${CLIENT}.count`]).toBe(0);
    await client.close();
    const held = (performance.now() - before) / 1000;

    const otel = await sdk.collect();
    expect(otel.descriptor(CLIENT)?.unit).toBe('s');
    const h = otel.histogram(CLIENT, { 'mcp.protocol.version': version as string });
    expect(h.count).toBe(1);
    expect(h.sum).toBeGreaterThanOrEqual(0.29);
    expect(h.sum).toBeLessThanOrEqual(held);
    // A session closed by the application did not end in error.
    expect(otel.histogram(CLIENT, { 'error.type': 'session_lost' }).count).toBe(0);
  });

  it('a session lost to a restart ends with error.type session_lost; the new one is timed on its own', async () => {
    const p = await serverProcess();
    const { sdk, metrics } = observed();
    const { client, transport } = await connect(p.url, { metrics });
    const first = transport.sessionId;
    const charge = client.callTool({ name: 'slow', arguments: { ms: 2_000 } });
    await wait(150);
    p.restart();
    expect(isOutcomeUnknown(await charge.catch((e) => e))).toBe(true);
    await eventually(
      () => transport.sessionId !== undefined && transport.sessionId !== first,
      10_000,
      'a new session',
    );
    let otel = await sdk.collect();
    expect(otel.histogram(CLIENT, { 'error.type': 'session_lost' }).count).toBe(1);
    expect(otel.histogram(CLIENT).count).toBe(1);
    await client.close();
    otel = await sdk.collect();
    expect(otel.histogram(CLIENT).count).toBe(2);
    expect(otel.histogram(CLIENT, { 'error.type': 'session_lost' }).count).toBe(1);
  });
});
