import { createServer, type Server as HttpServer } from 'node:http';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ContinuityMeta, DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { isOutcomeUnknown } from '../../src/client/outcome.js';
import { ContinuityMetrics } from '../../src/metrics/index.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * The issues' "done when", end to end, over real HTTP on 127.0.0.1: the official v2 `Client` pinned to
 * 2026-07-28 with `continuityFetch()` (our client), through a balancer that cuts connections idle for
 * 300 ms, to `createContinuityServer` serving 2026-07-28 with the continuity extension on the official v2
 * `McpServer` — while a v1 client holds a 2025-11-25 session on the same running server.
 */

const MODERN = '2026-07-28';
const CHARGE_MS = 1_500;

let charges = 0;
let progressSent = 0;
let lookups = 0;
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

function modernServer(): McpServerV2 {
  const server = new McpServerV2({ name: 'e2e', version: '1.0.0' });
  // The side effect does not stop because a connection was cut; it ignores every abort signal.
  server.registerTool('charge', { inputSchema: z.object({ cents: z.number() }) }, async ({ cents }) => {
    await wait(CHARGE_MS);
    charges++;
    return { content: [{ type: 'text', text: `charged ${cents}` }] };
  });
  server.registerTool(
    'charge_with_progress',
    { inputSchema: z.object({ cents: z.number() }) },
    async ({ cents }, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      if (token !== undefined) {
        progressSent++;
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken: token, progress: 0, total: 1 },
        });
      }
      await wait(CHARGE_MS);
      charges++;
      return { content: [{ type: 'text', text: `charged ${cents}` }] };
    },
  );
  // Read-only by its annotations; its first run outlasts the balancer's idle timeout, later ones are quick.
  server.registerTool(
    'lookup',
    { inputSchema: z.object({ q: z.string() }), annotations: { readOnlyHint: true } },
    async ({ q }) => {
      lookups++;
      await wait(lookups === 1 ? 700 : 10);
      return { content: [{ type: 'text', text: `found ${q}` }] };
    },
  );
  return server;
}

function legacyServer(): McpServerV1 {
  const server = new McpServerV1({ name: 'e2e', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text: `2025:${text}` }],
  }));
  return server;
}

let continuity: ContinuityServer;
let http: HttpServer;
let proxy: FaultProxy;
let cuts: number;

beforeEach(async () => {
  charges = 0;
  progressSent = 0;
  lookups = 0;
  cuts = 0;
  continuity = createContinuityServer({
    createMcpServer: legacyServer,
    // Heartbeats off: the balancer's idle cut must really happen during the charge.
    heartbeatMs: 0,
    modern: {
      createServer: modernServer,
      keepAliveMs: 0,
      keyed: createKeyedRequests({
        log: new MemoryEventLog(),
        memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
      }),
    },
  });
  http = createServer(continuity.nodeHandler);
  const port = await listenOnLoopback(http);
  proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port }, idleTimeoutMs: 300 });
  proxy.on('fault', (e) => {
    if (e.type === 'cut') cuts++;
  });
});

afterEach(async () => {
  await proxy.close();
  await continuity.close();
  http.closeAllConnections();
  await new Promise((r) => http.close(r));
});

const textOf = (result: unknown) => (result as { content: { text: string }[] }).content[0]?.text;

async function modernClient(fetchImpl?: typeof fetch): Promise<ClientV2> {
  const client = new ClientV2(
    { name: 'e2e', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: MODERN } } },
  );
  await client.connect(new TransportV2(proxy.url(), fetchImpl ? { fetch: fetchImpl } : {}));
  return client;
}

describe('2026-07-28 with the continuity extension, end to end', () => {
  it('a balancer cutting every 300 ms idle during a 1.5 s charge: one charge, the real result', async () => {
    const client = await modernClient(continuityFetch());
    expect(client.getNegotiatedProtocolVersion?.()).toBe(MODERN);
    const result = await client.callTool({ name: 'charge', arguments: { cents: 500 } });
    expect(textOf(result)).toBe('charged 500');
    expect(cuts).toBeGreaterThanOrEqual(1);
    // Settle: a second execution, had there been one, would finish within another charge's time.
    await wait(CHARGE_MS + 300);
    expect(charges).toBe(1);
    await client.close();
  });

  it('a cut after a progress notification: the progress once, one charge, the real result, no hang', async () => {
    const client = await modernClient(continuityFetch());
    const progress: number[] = [];
    const started = performance.now();
    const result = await client.callTool(
      { name: 'charge_with_progress', arguments: { cents: 700 } },
      { onprogress: (p) => progress.push(p.progress) },
    );
    expect(textOf(result)).toBe('charged 700');
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(progress).toEqual([0]);
    await wait(CHARGE_MS + 300);
    expect(charges).toBe(1);
    expect(progressSent).toBe(1);
    await client.close();
  });

  it('a read-only tool goes without a key: re-issued after the cut, it succeeds', async () => {
    const keys: unknown[] = [];
    const watching: typeof fetch = async (input, init) => {
      const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
      if (body?.method === 'tools/call') keys.push(body.params?._meta?.[ContinuityMeta.idempotencyKey]);
      return fetch(input, init);
    };
    const client = await modernClient(continuityFetch({ fetch: watching }));
    await client.listTools(); // the hints come from tools/list
    const result = await client.callTool({ name: 'lookup', arguments: { q: 'x' } });
    expect(textOf(result)).toBe('found x');
    expect(lookups).toBeGreaterThanOrEqual(2);
    expect(keys.length).toBe(lookups);
    expect(keys.every((k) => k === undefined)).toBe(true);
    await client.close();
  });

  it('a 2025-11-25 session on the same running server is served meanwhile', async () => {
    const v1 = new ClientV1({ name: 'v1', version: '1.0.0' });
    await v1.connect(new TransportV1(proxy.url()));
    const modern = await modernClient(continuityFetch());
    const [a, b] = await Promise.all([
      v1.callTool({ name: 'echo', arguments: { text: 'hi' } }),
      modern.callTool({ name: 'charge', arguments: { cents: 1 } }),
    ]);
    expect(textOf(a)).toBe('2025:hi');
    expect(textOf(b)).toBe('charged 1');
    expect(continuity.sessionCount()).toBe(1);
    await Promise.all([v1.close(), modern.close()]);
  });

  it('without our client (the official v2 transport alone), the spec: the cut call fails, the charge happened', async () => {
    const client = await modernClient();
    const started = performance.now();
    const error = await client.callTool({ name: 'charge', arguments: { cents: 900 } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    // The official client sees the cut as a failure (not an outcome unknown), well before the charge ends.
    expect(error).toBeDefined();
    expect(isOutcomeUnknown(error)).toBe(false);
    expect(performance.now() - started).toBeLessThan(CHARGE_MS);
    await wait(CHARGE_MS + 300);
    // Not keyed: the spec's close = cancel; this tool ignores the signal, so the card was charged anyway.
    expect(charges).toBe(1);
    await client.close();
  });

  it('a full memo (the per-principal bound) refuses a new key at once: a definite failure, nothing charged', async () => {
    const figures = new ContinuityMetrics();
    const small = createContinuityServer({
      createMcpServer: legacyServer,
      modern: {
        createServer: modernServer,
        keyed: createKeyedRequests({
          log: new MemoryEventLog(),
          memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
          maxEntriesPerPrincipal: 1,
          metrics: figures,
        }),
      },
    });
    const server = createServer(small.nodeHandler);
    const port = await listenOnLoopback(server);
    try {
      const client = new ClientV2(
        { name: 'e2e', version: '1.0.0' },
        { versionNegotiation: { mode: { pin: MODERN } } },
      );
      await client.connect(
        new TransportV2(new URL(`http://127.0.0.1:${port}/mcp`), { fetch: continuityFetch() }),
      );
      expect(textOf(await client.callTool({ name: 'charge', arguments: { cents: 1 } }))).toBe('charged 1');
      const started = performance.now();
      const error = await client.callTool({ name: 'charge', arguments: { cents: 2 } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeDefined();
      expect(isOutcomeUnknown(error)).toBe(false);
      // Retry-After runs until the first entry's window ends (a day): not waited for.
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(charges).toBe(1);
      // The server's figures: one execution, one key refused with 429 (the client's re-issues of the
      // refused call, if any, are refused too: at least one).
      const f = figures.figures();
      expect(f['mcp_continuity.server.keyed_executions']).toBe(1);
      expect(f['mcp_continuity.server.keyed_refusals']).toBeGreaterThanOrEqual(1);
      await client.close();
    } finally {
      await small.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('keep-alive comments on keyed responses keep a silent charge through the balancer: answered on the first attempt (idle pooled connections may still be cut)', async () => {
    const alive = createContinuityServer({
      createMcpServer: legacyServer,
      heartbeatMs: 0,
      modern: {
        createServer: modernServer,
        keepAliveMs: 0,
        keyed: createKeyedRequests({
          log: new MemoryEventLog(),
          memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
          keepAliveMs: 100,
        }),
      },
    });
    const server = createServer(alive.nodeHandler);
    const port = await listenOnLoopback(server);
    const balancer = await FaultProxy.start({ target: { host: '127.0.0.1', port }, idleTimeoutMs: 300 });
    const endings: { outcome: string; attempts: number }[] = [];
    try {
      const client = new ClientV2(
        { name: 'e2e', version: '1.0.0' },
        { versionNegotiation: { mode: { pin: MODERN } } },
      );
      await client.connect(
        new TransportV2(balancer.url(), { fetch: continuityFetch({ onCallEnded: (e) => endings.push(e) }) }),
      );
      expect(textOf(await client.callTool({ name: 'charge', arguments: { cents: 3 } }))).toBe('charged 3');
      expect(endings.at(-1)).toMatchObject({ outcome: 'answered', attempts: 0 });
      expect(charges).toBe(1);
      await client.close();
    } finally {
      await balancer.close();
      await alive.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
