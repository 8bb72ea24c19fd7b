import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ContinuityMetrics, MemoryEventLog } from '../../src/index.js';
import { SqliteEventLog } from '../../src/sqlite.js';
import { RawClient, startServer } from '../server/harness.js';
import { restartableServer } from '../support/restartable-server.js';
import { eventually, otelSdk } from './otel.js';

/**
 * Each server metric moves when its event happens, over real HTTP on 127.0.0.1, read both from an OTel
 * SDK (a pull reader) and from `figures()`.
 */
const M = 'mcp_continuity.server';
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function observed(options: Parameters<typeof startServer>[0] = {}) {
  const sdk = otelSdk();
  const metrics = new ContinuityMetrics({ meter: sdk.meter });
  const server = await startServer({ metrics, ...options });
  cleanups.push(async () => {
    await server.close();
    await sdk.shutdown();
  });
  const client = new RawClient(server.url);
  await client.initialize();
  return { sdk, metrics, server, client, figures: () => metrics.figures() };
}

describe('server metrics', () => {
  it('a resume: resumes, replayed events, reconnect latency and the retention margin move', async () => {
    const { sdk, client, figures } = await observed({
      eventLog: new MemoryEventLog({ retentionMs: 60_000 }),
    });
    expect(figures()[`${M}.resumes`]).toBe(0);
    expect(figures()[`${M}.retention_margin`]).toBe(60_000); // no reconnect seen yet
    const call = await client.call('chatty', { count: 5, intervalMs: 0 });
    await call.untilEnd(); // the response closed: the server notes when
    await new Promise((r) => setTimeout(r, 250));
    const cursor = call.events[2]?.id as string; // seq 2 of 6 (5 notifications and the answer)
    const resumed = await client.get(cursor);
    await resumed.untilEnd();
    expect(resumed.events.filter((e) => e.data !== '')).toHaveLength(4);

    const f = figures();
    expect(f[`${M}.resumes`]).toBe(1);
    expect(f[`${M}.replayed_events`]).toBe(4);
    expect(f[`${M}.resume_rejections`]).toBe(0);
    expect(f[`${M}.reconnect_latency.count`]).toBe(1);
    const latency = f[`${M}.reconnect_latency.max`] as number;
    expect(latency).toBeGreaterThanOrEqual(240);
    expect(latency).toBeLessThan(10_000);
    expect(f[`${M}.retention_margin`]).toBe(60_000 - latency);

    const otel = await sdk.collect();
    expect(otel.sum(`${M}.resumes`)).toBe(1);
    expect(otel.sum(`${M}.replayed_events`)).toBe(4);
    expect(otel.histogram(`${M}.reconnect_latency`)).toMatchObject({ count: 1, max: latency });
    expect(otel.gauge(`${M}.retention_margin`)).toBe(60_000 - latency);
    expect(otel.descriptor(`${M}.retention_margin`)?.unit).toBe('ms');
    expect(otel.descriptor(`${M}.replayed_events`)?.unit).toBe('{event}');
  });

  it('a 410: the rejection, the exact lost count and the evictions behind it are counted', async () => {
    const { sdk, client, figures } = await observed({
      eventLog: new MemoryEventLog({ maxEventsPerStream: 5 }),
    });
    const call = await client.call('chatty', { count: 12, intervalMs: 0 });
    await call.untilEnd();
    // 12 notifications and the answer were appended; 5 are kept.
    expect(figures()[`${M}.evicted_events`]).toBe(8);
    const gone = await client.get(call.events[2]?.id as string);
    expect(gone.response.status).toBe(410);

    const f = figures();
    expect(f[`${M}.resume_rejections`]).toBe(1);
    expect(f[`${M}.resume_rejections{reason=resume_window_exceeded}`]).toBe(1);
    expect(f[`${M}.lost_events`]).toBe(6);
    expect(f[`${M}.resumes`]).toBe(0);
    const otel = await sdk.collect();
    expect(
      otel.sum(`${M}.resume_rejections`, {
        reason: 'resume_window_exceeded',
        'http.response.status_code': 410,
      }),
    ).toBe(1);
    expect(otel.sum(`${M}.lost_events`)).toBe(6);
    expect(otel.sum(`${M}.evicted_events`)).toBe(8);
  });

  it('400 and 404 answers to a cursor are rejections with their reason', async () => {
    const { sdk, server, client, figures } = await observed();
    expect((await client.get('not-a-cursor')).response.status).toBe(400);
    const stranger = new RawClient(server.url);
    stranger.sessionId = 'no-such-session';
    expect((await stranger.get('abc-1-1')).response.status).toBe(404);

    const f = figures();
    expect(f[`${M}.resume_rejections{reason=malformed_cursor}`]).toBe(1);
    expect(f[`${M}.resume_rejections{reason=unknown_session}`]).toBe(1);
    expect(f[`${M}.resume_rejections`]).toBe(2);
    const otel = await sdk.collect();
    expect(otel.sum(`${M}.resume_rejections`, { 'http.response.status_code': 400 })).toBe(1);
    expect(otel.sum(`${M}.resume_rejections`, { 'http.response.status_code': 404 })).toBe(1);
  });

  it('sessions ended: terminated by DELETE, expired after the idle TTL, shut down with the server', async () => {
    const { sdk, server, client, figures } = await observed({ sessionIdleTtlMs: 300 });
    // Keep it from expiring until DELETE: a request restarts the idle clock, so send DELETE at once.
    const deleted = await fetch(server.url, { method: 'DELETE', headers: client.headers() });
    expect(deleted.status).toBe(200);
    expect(figures()[`${M}.sessions_ended{reason=terminated}`]).toBe(1);

    const idle = new RawClient(server.url);
    await idle.initialize();
    await eventually(
      () => figures()[`${M}.sessions_ended{reason=expired}`] === 1,
      5_000,
      'the idle session to expire',
    );

    const live = new RawClient(server.url);
    await live.initialize();
    const running = await live.call('slow', { ms: 5_000 }); // busy: it cannot expire
    await server.continuity.close();
    await running.untilEnd();
    expect(figures()[`${M}.sessions_ended{reason=shutdown}`]).toBe(1);
    expect(figures()[`${M}.sessions_ended`]).toBe(3);
    const otel = await sdk.collect();
    expect(otel.sum(`${M}.sessions_ended`, { reason: 'terminated' })).toBe(1);
    expect(otel.sum(`${M}.sessions_ended`, { reason: 'expired' })).toBe(1);
    expect(otel.sum(`${M}.sessions_ended`, { reason: 'shutdown' })).toBe(1);
  });

  it('a call interrupted by a restart (durable log) is counted as outcome unknown', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-metrics-'));
    const sdk = otelSdk();
    const metrics = new ContinuityMetrics({ meter: sdk.meter });
    const p = await restartableServer(
      { metrics, retryMs: 1_000 },
      () => new SqliteEventLog({ path: join(dir, 'log.db') }),
    );
    cleanups.push(async () => {
      await p.dispose();
      await rm(dir, { recursive: true, force: true });
      await sdk.shutdown();
    });
    const client = new RawClient(p.url.href);
    await client.initialize();
    const call = await client.call('slow', { ms: 3_000 });
    await call.until(() => call.events.length > 0, 5_000, 'the priming event');
    await p.deploy(); // a new process on the same file
    expect(metrics.figures()[`${M}.outcome_unknown`]).toBe(0);

    // The restart closed every connection; a pooled keep-alive socket may not know yet, so retry a few times.
    let resumed: Awaited<ReturnType<RawClient['get']>> | undefined;
    for (let attempt = 0; resumed === undefined; attempt++) {
      resumed = await client.get(call.events[0]?.id as string).catch((e) => {
        if (attempt >= 4) throw e;
        return undefined;
      });
    }
    await resumed.until(() => resumed.messages.length > 0, 5_000, 'the outcome-unknown answer');
    expect(resumed.messages[0]).toMatchObject({ error: { code: -32050 } });
    expect(metrics.figures()[`${M}.outcome_unknown{reason=server_restarted}`]).toBe(1);
    expect((await sdk.collect()).sum(`${M}.outcome_unknown`, { reason: 'server_restarted' })).toBe(1);
  });
});
