import { createServer, type Server as HttpServer } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CANCEL_METHOD, ContinuityErrorCode, ContinuityMeta } from '../../machines/continuity-extension.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { listenOnLoopback } from '../support/listen.js';
import { until } from '../support/until.js';

/**
 * The extension's explicit cancel (docs/continuity-extension.md §13) over real HTTP on 127.0.0.1: the
 * `io.github.mcp-continuity/cancel` request, as `createContinuityServer` answers it, and as our client
 * (`continuityFetch` under the official v2 `Client`) sends it when the application aborts a keyed call.
 */

const MODERN = '2026-07-28';
const envelope = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': {},
};
const ledger = { started: 0, aborted: 0, completed: 0 };

function modernServer(): McpServerV2 {
  const server = new McpServerV2({ name: 'cancel', version: '1.0.0' });
  // Works for up to 10 s, and stops when its abort signal fires.
  server.registerTool('slow', { inputSchema: z.object({ n: z.number() }) }, async (_args, ctx) => {
    ledger.started++;
    const signal = ctx.mcpReq.signal;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 10_000);
      signal.addEventListener(
        'abort',
        () => {
          clearTimeout(t);
          resolve();
        },
        { once: true },
      );
    });
    if (signal.aborted) {
      ledger.aborted++;
      return { content: [{ type: 'text', text: 'aborted' }], isError: true };
    }
    ledger.completed++;
    return { content: [{ type: 'text', text: 'done' }] };
  });
  server.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  return server;
}

let continuity: ContinuityServer;
let http: HttpServer;
let url: URL;
let errors: unknown[];

beforeEach(async () => {
  ledger.started = ledger.aborted = ledger.completed = 0;
  errors = [];
  continuity = createContinuityServer({
    createMcpServer: () => new McpServerV1({ name: 'cancel', version: '1.0.0' }),
    modern: {
      createServer: modernServer,
      keepAliveMs: 0,
      keyed: createKeyedRequests({
        log: new MemoryEventLog(),
        memo: new MemoryMemoStore({ memoWindowMs: 60_000 }),
        onError: (e) => errors.push(e),
      }),
    },
    authenticate: (r) => {
      const token = r.headers.get('authorization')?.replace('Bearer ', '');
      return token ? { principal: token } : null;
    },
    onError: (e) => errors.push(e),
  });
  http = createServer(continuity.nodeHandler);
  url = new URL(`http://127.0.0.1:${await listenOnLoopback(http)}/mcp`);
});

afterEach(async () => {
  await continuity.close();
  http.closeAllConnections();
  await new Promise((r) => http.close(r));
});

const headers = (who: string, method: string, name?: string): Record<string, string> => ({
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  authorization: `Bearer ${who}`,
  'mcp-protocol-version': MODERN,
  'mcp-method': method,
  ...(name ? { 'mcp-name': name } : {}),
});
const keyedCall = (who: string, id: string, name: string, args: object, key: string, reissue = false) =>
  fetch(url, {
    method: 'POST',
    headers: headers(who, 'tools/call', name),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: {
        name,
        arguments: args,
        _meta: {
          ...envelope,
          [ContinuityMeta.idempotencyKey]: key,
          ...(reissue ? { [ContinuityMeta.lastEventId]: null } : {}),
        },
      },
    }),
  });
/** `id` null: sent without one (the notification form). */
const cancel = (who: string, key: unknown, id: string | null = `c-${Math.random()}`) =>
  fetch(url, {
    method: 'POST',
    headers: headers(who, CANCEL_METHOD),
    body: JSON.stringify({
      jsonrpc: '2.0',
      ...(id === null ? {} : { id }),
      method: CANCEL_METHOD,
      params: { idempotencyKey: key, _meta: envelope },
    }),
  });
const keyStateOf = async (response: Response) => {
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('application/json');
  return ((await response.json()) as { result: { resultType: string; keyState: string } }).result;
};

describe('the explicit cancel request (§13)', () => {
  it('cancels a running key of the same principal only; idempotent; re-issues then get -32013', async () => {
    const first = await keyedCall('alice', '1', 'slow', { n: 1 }, 'key-1');
    const firstText = first.text();
    await until('the tool started', () => ledger.started === 1, 15_000);

    // Another principal's cancel finds nothing and changes nothing.
    expect(await keyStateOf(await cancel('bob', 'key-1'))).toEqual({
      resultType: 'complete',
      keyState: 'unknown',
    });
    expect(ledger.aborted).toBe(0);

    expect((await keyStateOf(await cancel('alice', 'key-1'))).keyState).toBe('cancelled');
    await until('the tool saw its abort', () => ledger.aborted === 1, 15_000);
    // The attached stream ends with -32013.
    expect(await firstText).toContain(`"code":${ContinuityErrorCode.CANCELLED}`);
    // Again: the same answer, nothing else happens.
    expect((await keyStateOf(await cancel('alice', 'key-1'))).keyState).toBe('cancelled');
    const reissue = await keyedCall('alice', '2', 'slow', { n: 1 }, 'key-1', true);
    expect(await reissue.text()).toContain(`"code":${ContinuityErrorCode.CANCELLED}`);
    expect(ledger).toEqual({ started: 1, aborted: 1, completed: 0 });
    expect(errors).toEqual([]);
  }, 60_000);

  it('a finished key keeps its outcome; an unknown key is `unknown`; malformed cancels are 400 -32602', async () => {
    const done = await keyedCall('alice', '1', 'echo', { text: 'hi' }, 'key-done');
    expect(await done.text()).toContain('"text":"hi"');
    expect(['committed', 'answered']).toContain(
      (await keyStateOf(await cancel('alice', 'key-done'))).keyState,
    );
    const again = await keyedCall('alice', '2', 'echo', { text: 'hi' }, 'key-done', true);
    expect(await again.text()).toContain('"text":"hi"');
    expect((await keyStateOf(await cancel('alice', 'never-seen'))).keyState).toBe('unknown');

    for (const [key, id] of [
      [42, 'c1'],
      ['', 'c2'],
      ['has space', 'c3'],
      ['k'.repeat(256), 'c4'],
      ['fine-key', null],
    ] as const) {
      const r = await cancel('alice', key, id);
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: { code: number } }).error.code).toBe(-32602);
    }
    // Headers that disagree with the body: the spec's -32020, as for every request.
    const mismatch = await fetch(url, {
      method: 'POST',
      headers: headers('alice', 'tools/call'),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'c5',
        method: CANCEL_METHOD,
        params: { idempotencyKey: 'fine-key', _meta: envelope },
      }),
    });
    expect(mismatch.status).toBe(400);
    expect(((await mismatch.json()) as { error: { code: number } }).error.code).toBe(-32020);
    expect(errors).toEqual([]);
  }, 60_000);
});

describe('our client sends it', () => {
  it("the application's abort of a keyed call reaches the server as the cancel request: the tool stops", async () => {
    const cancels: { status: number; body: string }[] = [];
    const spying: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (typeof init?.body === 'string' && init.body.includes(CANCEL_METHOD)) {
        cancels.push({ status: response.status, body: await response.clone().text() });
      }
      return response;
    };
    const client = new Client(
      { name: 'c', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: MODERN } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(url, {
        fetch: continuityFetch({ fetch: spying }),
        requestInit: { headers: { authorization: 'Bearer alice' } },
      }),
    );
    const abort = new AbortController();
    const call = client.callTool({ name: 'slow', arguments: { n: 1 } }, { signal: abort.signal });
    await until('the tool started', () => ledger.started === 1, 15_000);
    abort.abort();
    await expect(call).rejects.toBeDefined();
    await until('the cancel was answered', () => cancels.length === 1, 15_000);
    expect(cancels[0]?.status).toBe(200);
    expect(JSON.parse(cancels[0]?.body ?? '{}').result.keyState).toBe('cancelled');
    await until('the tool saw its abort', () => ledger.aborted === 1, 15_000);
    expect(ledger.completed).toBe(0);
    await client.close();
    expect(errors).toEqual([]);
  }, 60_000);
});
