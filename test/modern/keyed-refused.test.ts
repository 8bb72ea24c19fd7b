import { createServer, type Server as HttpServer } from 'node:http';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { listenOnLoopback } from '../support/listen.js';
import { keyedCall, modernHeaders, post } from './keyed-harness.js';

/**
 * A keyed call the official v2 SDK refuses before running the tool (its `Mcp-Param-*` check against the
 * tool's `x-mcp-header` declarations answers 400 -32020) is not an outcome: the attempt gets the SDK's
 * own 400, the key is recorded `refused`, and a corrected attempt under the same key runs, once
 * (machines/server/keyed-request.machine.ts, `refused`). Over real HTTP on 127.0.0.1, through
 * `createContinuityServer` with the extension.
 */

let continuity: ContinuityServer | undefined;
let http: HttpServer | undefined;
let log: MemoryEventLog;
let memo: MemoryMemoStore;
afterEach(async () => {
  await continuity?.close();
  http?.closeAllConnections();
  if (http) await new Promise((r) => http?.close(r));
  continuity = undefined;
  http = undefined;
});

/** `declare`: whether the tool declares `region` as a header (a server can add it after a client listed tools). */
function chargingServer(state: { runs: number; declare: boolean }): McpServer {
  const server = new McpServer({ name: 'refusing', version: '1.0.0' });
  const region = state.declare ? z.string().meta({ 'x-mcp-header': 'Region' }) : z.string();
  server.registerTool(
    'charge',
    { inputSchema: z.object({ cents: z.number(), region }) },
    async ({ cents }) => {
      state.runs++;
      return { content: [{ type: 'text', text: `charged ${cents} (#${state.runs})` }] };
    },
  );
  return server;
}

async function start(state: { runs: number; declare: boolean }): Promise<string> {
  log = new MemoryEventLog();
  memo = new MemoryMemoStore({ memoWindowMs: 60_000 });
  continuity = createContinuityServer({
    createMcpServer: () => new McpServerV1({ name: 'legacy', version: '1.0.0' }),
    heartbeatMs: 0,
    modern: {
      createServer: () => chargingServer(state),
      keyed: createKeyedRequests({ log, memo, pollMs: 50 }),
    },
  });
  http = createServer(continuity.nodeHandler);
  return `http://127.0.0.1:${await listenOnLoopback(http)}/mcp`;
}

const textOf = (m: unknown) =>
  (m as { result?: { content?: { text?: string }[] } }).result?.content?.[0]?.text;

describe('a keyed call the SDK refuses before running it', () => {
  it('is answered with the SDK’s own 400; the same key, corrected, runs once; again, it is the recorded result', async () => {
    const state = { runs: 0, declare: true };
    const url = await start(state);
    const args = { cents: 100, region: 'eu' };

    const refused = await post(url, keyedCall(1, 'charge', args, 'k-1'));
    expect(refused.status).toBe(400);
    expect(refused.response).toMatchObject({ id: 1, error: { code: -32020 } });
    expect(state.runs).toBe(0);
    expect(memo.stats().entries).toBe(1);

    const corrected = await post(url, keyedCall(2, 'charge', args, 'k-1'), 10_000, {
      'mcp-param-region': 'eu',
    });
    expect(corrected.status).toBe(200);
    expect(textOf(corrected.response)).toBe('charged 100 (#1)');
    expect(state.runs).toBe(1);
    // One entry; no log: neither run sent an event, and a key's log is opened by its first event.
    expect(memo.stats().entries).toBe(1);
    expect(log.stats().sessions).toBe(0);

    // A re-issue of the same key after that (it may have run, as far as the client knows): recorded.
    const again = await post(url, keyedCall(3, 'charge', args, 'k-1', { lastEventId: null }), 10_000, {
      'mcp-param-region': 'eu',
    });
    expect(textOf(again.response)).toBe('charged 100 (#1)');
    expect(state.runs).toBe(1);
  });

  it('a refusal repeated under the same key stays a refusal (the key never ran)', async () => {
    const state = { runs: 0, declare: true };
    const url = await start(state);
    for (const id of [1, 2, 3]) {
      const refused = await post(url, keyedCall(id, 'charge', { cents: 5, region: 'us' }, 'k-2'));
      expect(refused.status).toBe(400);
      expect(refused.response).toMatchObject({ id, error: { code: -32020 } });
    }
    expect(state.runs).toBe(0);
    expect(memo.stats().entries).toBe(1);
    expect(log.stats().sessions).toBe(0);
  });

  it('the official v2 client with continuityFetch() whose tool list is stale: the call succeeds, charged once', async () => {
    const state = { runs: 0, declare: false };
    const url = await start(state);
    const client = new ClientV2(
      { name: 'stale', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(new TransportV2(new URL(url), { fetch: continuityFetch() }));
    // The client lists the tools while `region` is no header; then the server starts declaring it.
    await client.listTools();
    state.declare = true;
    const result = await client.callTool({ name: 'charge', arguments: { cents: 7, region: 'eu' } });
    expect((result as { content: { text: string }[] }).content[0]?.text).toBe('charged 7 (#1)');
    expect(state.runs).toBe(1);
    await client.close();
  });

  it('the same stale list against the official v2 server (no extension): the SDK’s own refresh, one charge', async () => {
    const state = { runs: 0, declare: false };
    const handler = createMcpHandler(() => chargingServer(state), { legacy: 'reject' });
    const official = createServer(toNodeHandler(handler));
    const port = await listenOnLoopback(official);
    try {
      const client = new ClientV2(
        { name: 'stale', version: '1.0.0' },
        { versionNegotiation: { mode: { pin: '2026-07-28' } } },
      );
      await client.connect(
        new TransportV2(new URL(`http://127.0.0.1:${port}/mcp`), { fetch: continuityFetch() }),
      );
      await client.listTools();
      state.declare = true;
      const result = await client.callTool({ name: 'charge', arguments: { cents: 9, region: 'eu' } });
      expect((result as { content: { text: string }[] }).content[0]?.text).toBe('charged 9 (#1)');
      expect(state.runs).toBe(1);
      await client.close();
    } finally {
      await handler.close();
      official.closeAllConnections();
      await new Promise((r) => official.close(r));
    }
  });

  it('a slow server factory does not hold the first attempt’s headers: it gets its stream, then the result', async () => {
    const state = { runs: 0, declare: false };
    let built = false;
    log = new MemoryEventLog();
    memo = new MemoryMemoStore({ memoWindowMs: 60_000 });
    continuity = createContinuityServer({
      createMcpServer: () => new McpServerV1({ name: 'legacy', version: '1.0.0' }),
      heartbeatMs: 0,
      modern: {
        // Every modern request builds its server; this one takes 3 s (a cold database pool, say).
        createServer: async () => {
          await new Promise((r) => setTimeout(r, 3_000));
          built = true;
          return chargingServer(state);
        },
        keyed: createKeyedRequests({ log, memo, pollMs: 50 }),
      },
    });
    http = createServer(continuity.nodeHandler);
    const url = `http://127.0.0.1:${await listenOnLoopback(http)}/mcp`;
    const call = keyedCall(1, 'charge', { cents: 3, region: 'eu' }, 'k-slow');
    const response = await fetch(url, {
      method: 'POST',
      headers: modernHeaders(call),
      body: JSON.stringify(call),
      signal: AbortSignal.timeout(20_000),
    });
    // The headers came while the factory was still building (the wait is bounded: KEYED_START_WAIT_MS).
    expect(built).toBe(false);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect(await response.text()).toContain('charged 3 (#1)');
    expect(state.runs).toBe(1);
  });
});
