import { createServer, type Server as HttpServer } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { createInspectorFeed } from '../../src/inspect/feed.js';
import { startInspectorServer } from '../../src/inspect/server.js';
import type { ModernView, PageMessage } from '../../src/inspect/wire.js';
import { createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { eventually } from '../metrics/otel.js';
import { listenOnLoopback } from '../support/listen.js';
import { callCutTwice } from './keyed-cut-world.js';
import { open, until } from './ws-client.js';

/**
 * The `inspect` options of the 2026-07-28 side (issue 28 item 1), end to end on real HTTP: the official
 * v2 client with `continuityFetch({ inspect })` through a fault proxy that cuts the call twice, and the
 * official v2 server behind `createContinuityServer` with `createKeyedRequests({ inspect })`, both fed to
 * one inspector. A page connected to it sees the call's three attempts (ids, status, the cut, the
 * decision), and beside it, under the same idempotency key, the server's keyed request: three attempts,
 * one execution.
 */
const MODERN = '2026-07-28';
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('the inspector sees 2026-07-28', () => {
  it('a keyed call cut twice: three attempts on the client, one execution on the server, matched by key', async () => {
    const inspector = await startInspectorServer();
    cleanups.push(() => inspector.close());
    const page = await open(`${inspector.url.replace('http', 'ws')}live`, {
      Origin: inspector.url.replace(/\/$/, ''),
    });
    cleanups.push(() => page.ws.close());
    const feed = createInspectorFeed({ url: inspector.feedUrl, name: 'modern', flushIntervalMs: 5 });
    cleanups.push(() => feed.close());

    const result = await callCutTwice(feed.inspect, cleanups);
    expect(result.content[0]?.text).toBe('charged 500');
    feed.flush();

    // The latest view of each 2026 actor, as the page has it.
    const views = () => {
      const latest = new Map<string, ModernView>();
      for (const m of page.messages as PageMessage[]) if (m.kind === 'modern') latest.set(m.id, m.view);
      return [...latest.values()];
    };
    const ended = await until(() => {
      const c = views().find((v) => v.kind === 'call' && v.outcome !== undefined);
      const k = views().find((v) => v.kind === 'keyed' && v.state === 'answered');
      return c && k ? { call: c, keyed: k } : undefined;
    }, 10_000);
    const callView = ended.call as Extract<ModernView, { kind: 'call' }>;
    expect(callView).toMatchObject({ tool: 'charge', outcome: 'answered', reason: 'answered' });
    expect(callView.attempts.map((a) => a.n)).toEqual([0, 1, 2]);
    const [first, second, third] = callView.attempts;
    // A re-issue has a new id, and carries the last event id it saw (none here: the body sent nothing).
    expect(first?.id).toBe(callView.requestId);
    expect(second?.id).toMatch(/~reissue-1$/);
    expect(third?.id).toMatch(/~reissue-2$/);
    expect(second?.lastEventId).toBeNull();
    for (const cut of [first, second])
      expect(cut).toMatchObject({
        status: 200,
        end: 'cut-mid-stream',
        decision: expect.stringMatching(/^(backoff-)?reissue$/),
        reason: 'cut_mid_stream',
      });
    expect(third).toMatchObject({ status: 200, end: 'result', decision: 'deliver', messages: 1 });
    expect(third?.bytes).toBeGreaterThan(JSON.stringify({ text: 'charged 500' }).length);

    // The server's keyed request, under the same key: every attempt reached it, one body ran.
    const keyed = views().filter((v) => v.kind === 'keyed') as Extract<ModernView, { kind: 'keyed' }>[];
    expect(new Set(keyed.map((k) => k.key))).toEqual(new Set([callView.key]));
    expect(keyed.reduce((n, k) => n + k.executions, 0)).toBe(1);
    const attempts = keyed.flatMap((k) => k.attempts);
    expect(attempts.map((a) => a.id)).toEqual(callView.attempts.map((a) => a.id));
    expect(attempts[0]?.answer).toBe('started the body');
    expect(attempts.slice(1).every((a) => a.answer !== 'started the body')).toBe(true);

    // Both sides' machines were registered with their charts, for the page to draw.
    const machines = new Set(page.messages.flatMap((m) => (m.kind === 'actor' ? [m.machine] : [])));
    expect(machines).toEqual(new Set(['modernCall', 'keyedRequest']));
  }, 60_000);

  it('a listen stream: its position, the re-open after a break and the exact gap it reported', async () => {
    const inspector = await startInspectorServer();
    cleanups.push(() => inspector.close());
    const page = await open(`${inspector.url.replace('http', 'ws')}live`, {
      Origin: inspector.url.replace(/\/$/, ''),
    });
    cleanups.push(() => page.ws.close());
    const feed = createInspectorFeed({ url: inspector.feedUrl, name: 'listen', flushIntervalMs: 5 });
    cleanups.push(() => feed.close());
    const continuity = createContinuityServer({
      createMcpServer: () => new McpServerV1({ name: 'legacy', version: '1.0.0' }),
      heartbeatMs: 0,
      modern: {
        createServer: () => {
          const server = new McpServer({ name: 'listen', version: '1.0.0' });
          server.registerTool('echo', { description: 'echo' }, async () => ({
            content: [{ type: 'text', text: 'ok' }],
          }));
          return server;
        },
        keyed: createKeyedRequests({
          log: new MemoryEventLog(),
          memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
        }),
      },
    });
    const http: HttpServer = createServer(continuity.nodeHandler);
    const proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port: await listenOnLoopback(http) },
    });
    cleanups.push(async () => {
      await proxy.close();
      await continuity.close();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    });
    let lists = 0;
    let gaps = 0;
    const client = new Client(
      { name: 'listen', version: '1.0.0' },
      {
        versionNegotiation: { mode: { pin: MODERN } },
        listChanged: {
          tools: {
            debounceMs: 0,
            onChanged: (error) => {
              if (error === null) lists++;
            },
          },
        },
      },
    );
    await client.connect(
      new StreamableHTTPClientTransport(proxy.url(), {
        fetch: continuityFetch({
          inspect: feed.inspect,
          listenPolicy: { initialDelayMs: 50, maxDelayMs: 300, factor: 2, maxRetries: 4, jitter: 'full' },
          onListenGap: () => gaps++,
        }),
      }),
    );
    cleanups.push(() => client.close());
    // A live change gives the stream a position; two more are published while it is down.
    continuity.notifyModern.toolsChanged();
    await eventually(() => lists >= 1, 15_000, 'the live change');
    proxy.outage(600);
    continuity.notifyModern.toolsChanged();
    continuity.notifyModern.toolsChanged();
    await eventually(() => gaps === 1, 15_000, 'the gap report');
    feed.flush();

    const listen = await until(() => {
      let latest: ModernView | undefined;
      for (const m of page.messages as PageMessage[])
        if (m.kind === 'modern' && m.view.kind === 'listen') latest = m.view;
      return latest?.kind === 'listen' && latest.gaps.length === 1 ? latest : undefined;
    }, 10_000);
    expect(listen.gaps).toEqual([{ missed: 2, attempts: expect.any(Number) }]);
    expect(listen.reopens).toBeGreaterThanOrEqual(1);
    expect(listen.position).toMatch(/\.\d+$/);
    expect(listen.currentId).toMatch(/~reopen-\d+$/);
    const marker = page.messages.find((m) => m.kind === 'marker' && m.marker.reason === 'listen_reopened');
    expect(marker).toMatchObject({ marker: { kind: 'gap', lostCount: 2 } });
  }, 60_000);
});
