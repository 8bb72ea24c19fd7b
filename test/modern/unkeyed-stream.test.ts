import { createServer, type Server as HttpServer } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * A read-only tool is called without a key (safe by its annotations), so with a JSON answer nothing crossed
 * the connection until the tool returned: a balancer's idle timeout shorter than the tool cut every attempt
 * and the re-issues never finished (found by the real-stack properties). With the extension the server
 * streams unkeyed calls too, with keep-alive comments (machines/server/era.ts `streamsUnkeyedCall`).
 */
/** Keep-alives every 50 ms against a 1 s idle timeout: a 20x margin, so an event-loop stall on a busy machine
 * does not starve the connection, while the 2.5 s tool still spans several idle windows (without
 * keep-alives every attempt is cut and the call never completes). */
const KEEP_ALIVE_MS = 50;
const IDLE_MS = 20 * KEEP_ALIVE_MS;
const TOOL_MS = 2.5 * IDLE_MS;
let continuity: ContinuityServer | undefined;
let http: HttpServer | undefined;
let proxy: FaultProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  await continuity?.close();
  http?.closeAllConnections();
  if (http) await new Promise((r) => http?.close(r));
});

describe('an unkeyed call longer than the balancer’s idle timeout', () => {
  it('is answered on its first attempt, through keep-alives, and runs once', async () => {
    let runs = 0;
    continuity = createContinuityServer({
      createMcpServer: () => new McpServerV1({ name: 'legacy', version: '1.0.0' }),
      modern: {
        keepAliveMs: KEEP_ALIVE_MS,
        createServer: () => {
          const server = new McpServer({ name: 'slow-lookup', version: '1.0.0' });
          server.registerTool(
            'lookup',
            { inputSchema: z.object({ q: z.string() }), annotations: { readOnlyHint: true } },
            async ({ q }) => {
              runs++;
              await new Promise((r) => setTimeout(r, TOOL_MS));
              return { content: [{ type: 'text', text: `found ${q}` }] };
            },
          );
          return server;
        },
        keyed: createKeyedRequests({
          log: new MemoryEventLog(),
          memo: new MemoryMemoStore({ memoWindowMs: 60_000 }),
        }),
      },
    });
    http = createServer(continuity.nodeHandler);
    const port = await listenOnLoopback(http);
    // The idle timeout starts once connected: the set-up is not what this test is about, and under load
    // its requests can sit idle past any short timeout.
    proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port } });
    const endings: { outcome: string; attempts: number; toolName: string }[] = [];
    const client = new Client(
      { name: 'c', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(proxy.url(), {
        fetch: continuityFetch({ onCallEnded: (e) => endings.push(e) }),
      }),
    );
    await client.listTools(); // learns readOnlyHint: the call goes without a key
    proxy.setIdleTimeout(IDLE_MS);
    const result = await client.callTool({ name: 'lookup', arguments: { q: 'x' } });
    expect((result as { content: { text: string }[] }).content[0]?.text).toBe('found x');
    expect(runs).toBe(1);
    // One attempt: the keep-alives held the connection (an idle pooled one may be cut meanwhile: no matter).
    expect(endings.map((e) => [e.toolName, e.outcome, e.attempts])).toEqual([['lookup', 'answered', 0]]);
    await client.close();
  }, 20_000);
});
