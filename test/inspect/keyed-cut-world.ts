import { createServer, type Server as HttpServer } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import type { InspectionEvent, Observer } from 'xstate';
import { z } from 'zod';
import { DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { demoMcpServer } from '../server/harness.js';
import { listenOnLoopback } from '../support/listen.js';
import { cutTwiceThenRelease, onToolCall } from '../telemetry/cut-twice.js';

/**
 * A keyed 2026-07-28 call cut twice, over real HTTP on 127.0.0.1: the official v2 client pinned to
 * 2026-07-28 with `continuityFetch({ inspect })`, a fault proxy that cuts the call's connection twice once
 * each attempt reached the server, and `createContinuityServer` with `createKeyedRequests({ inspect })` on
 * the official v2 `McpServer` (a `charge` tool that waits to be released). Both sides are watched by
 * `inspect`. Resolves with the call's result; every cleanup goes to `cleanups`.
 */
export async function callCutTwice(
  inspect: Observer<InspectionEvent>,
  cleanups: (() => Promise<unknown> | unknown)[],
): Promise<{ content: { text: string }[] }> {
  let release: () => void = () => undefined;
  let started = 0;
  let toolCalls = 0;
  const modernServer = () => {
    const server = new McpServer({ name: 'inspect', version: '1.0.0' });
    server.registerTool('charge', { inputSchema: z.object({ cents: z.number() }) }, async ({ cents }) => {
      started++;
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return { content: [{ type: 'text', text: `charged ${cents}` }] };
    });
    return server;
  };
  const continuity = createContinuityServer({
    createMcpServer: () => demoMcpServer({ effects: new Map(), servers: [] }),
    heartbeatMs: 0,
    modern: {
      createServer: modernServer,
      keepAliveMs: 0,
      keyed: createKeyedRequests({
        log: new MemoryEventLog(),
        memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
        keepAliveMs: 0,
        inspect,
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
    { name: 'inspect', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(proxy.url(), { fetch: continuityFetch({ inspect }) }),
  );
  cleanups.push(() => client.close());
  const call = client.callTool({ name: 'charge', arguments: { cents: 500 } });
  // Cut the call's connection twice, each time once the attempt reached the server (and the body runs).
  await cutTwiceThenRelease(
    proxy,
    () => ({ attempts: toolCalls, started }),
    () => release(),
  );
  return (await call) as { content: { text: string }[] };
}
