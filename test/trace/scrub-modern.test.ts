import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import type { ModernView, PageMessage } from '../../src/inspect/wire.js';
import { createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { createTrace, readTrace, replayTrace } from '../../src/trace/index.js';
import { pageAsOf, scrubTrace } from '../../src/trace/scrub.js';
import { demoMcpServer } from '../server/harness.js';
import { listenOnLoopback } from '../support/listen.js';
import { cutTwiceThenRelease, onToolCall } from '../telemetry/cut-twice.js';

/**
 * The scrubber on 2026-07-28: a keyed call cut twice over real HTTP (official v2 client with
 * `continuityFetch({ inspect })`, `createKeyedRequests({ inspect })` behind `createContinuityServer`), both
 * sides traced to one file. As of the trace's end the page has the call's three attempts and the server's
 * one execution; as of the first cut, one attempt ended and no outcome yet.
 */
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The latest 2026 view of each actor in what a page is told. */
function views(messages: PageMessage[]) {
  const latest = new Map<string, ModernView>();
  for (const m of messages) if (m.kind === 'modern') latest.set(m.id, m.view);
  const all = [...latest.values()];
  return {
    call: all.find((v) => v.kind === 'call') as Extract<ModernView, { kind: 'call' }> | undefined,
    keyed: all.filter((v) => v.kind === 'keyed') as Extract<ModernView, { kind: 'keyed' }>[],
  };
}

describe('the scrubber over a 2026-07-28 trace', () => {
  it('as of the end: three attempts and one execution; as of the first cut: one attempt cut, no outcome', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-trace-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'trace.jsonl');
    const trace = createTrace({ path });
    let release: () => void = () => undefined;
    let started = 0;
    let toolCalls = 0;
    const continuity = createContinuityServer({
      createMcpServer: () => demoMcpServer({ effects: new Map(), servers: [] }),
      heartbeatMs: 0,
      modern: {
        createServer: () => {
          const server = new McpServer({ name: 'scrub', version: '1.0.0' });
          server.registerTool(
            'charge',
            { inputSchema: z.object({ cents: z.number() }) },
            async ({ cents }) => {
              started++;
              await new Promise<void>((resolve) => {
                release = resolve;
              });
              return { content: [{ type: 'text', text: `charged ${cents}` }] };
            },
          );
          return server;
        },
        keepAliveMs: 0,
        keyed: createKeyedRequests({
          log: new MemoryEventLog(),
          memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
          keepAliveMs: 0,
          inspect: trace.inspect,
        }),
      },
    });
    const http: HttpServer = createServer(continuity.nodeHandler);
    onToolCall(http, () => toolCalls++);
    const port = await listenOnLoopback(http);
    const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port } });
    cleanups.push(async () => {
      release();
      await proxy.close();
      await continuity.close();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    });
    const client = new Client(
      { name: 'scrub', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(proxy.url(), { fetch: continuityFetch({ inspect: trace.inspect }) }),
    );
    cleanups.push(() => client.close());
    const call = client.callTool({ name: 'charge', arguments: { cents: 500 } });
    await cutTwiceThenRelease(
      proxy,
      () => ({ attempts: toolCalls, started }),
      () => release(),
    );
    await call;
    trace.close();

    const { records } = readTrace(path);
    expect(replayTrace(records).differences).toEqual([]);
    const scrubbed = scrubTrace(records);
    const end = views(pageAsOf(scrubbed, scrubbed.stops.length - 1));
    expect(end.call).toMatchObject({ tool: 'charge', outcome: 'answered' });
    expect(end.call?.attempts.map((a) => a.end)).toEqual(['cut-mid-stream', 'cut-mid-stream', 'result']);
    expect(end.keyed.reduce((n, k) => n + k.executions, 0)).toBe(1);
    expect(end.keyed.flatMap((k) => k.attempts).map((a) => a.id)).toEqual(
      end.call?.attempts.map((a) => a.id),
    );

    // The first stop at which the call's first attempt has ended: cut, a re-issue decided, no outcome.
    const firstCut = scrubbed.stops.findIndex(
      (_, i) => views(pageAsOf(scrubbed, i)).call?.attempts[0]?.end === 'cut-mid-stream',
    );
    expect(firstCut).toBeGreaterThan(0);
    const then = views(pageAsOf(scrubbed, firstCut));
    expect(then.call?.outcome).toBeUndefined();
    expect(then.call?.attempts[0]?.decision).toMatch(/^(backoff-)?reissue$/);
    expect(then.keyed.reduce((n, k) => n + k.executions, 0)).toBe(1);
    // Before it, the call had not ended an attempt.
    expect(views(pageAsOf(scrubbed, firstCut - 1)).call?.attempts[0]?.end).toBeUndefined();
  }, 60_000);
});
