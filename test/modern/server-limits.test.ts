import { createServer, type Server as HttpServer } from 'node:http';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JsonRpcCode } from '../../machines/codes.js';
import { ContinuityMetrics } from '../../src/metrics/continuity-metrics.js';
import {
  type ContinuityServer,
  type ContinuityServerOptions,
  createContinuityServer,
} from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { listenOnLoopback } from '../support/listen.js';
import { listenRequestInit } from '../support/listen-request.js';
import { postFrom } from '../support/post-from.js';

/**
 * The 2026-07-28 server's bounds (issue 22, items 1, 4, 6), over real HTTP on 127.0.0.1: open listens per
 * principal, idempotency keys per address without `authenticate`, and the request id's length. Every
 * refusal is a clean status with `Retry-After` (bounds) and a JSON-RPC error body, counted, never an error
 * reported to `onError`.
 */

const MODERN = '2026-07-28';
const M = 'mcp_continuity.server';
const envelope = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': {},
};
const callHeaders = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': MODERN,
  'mcp-method': 'tools/call',
  'mcp-name': 'echo',
};
const keyedCall = (id: number | string, key: string) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: {
      name: 'echo',
      arguments: { text: 'x' },
      _meta: { ...envelope, 'io.github.mcp-continuity/idempotencyKey': key },
    },
  });

interface World {
  continuity: ContinuityServer;
  http: HttpServer;
  url: URL;
  errors: unknown[];
  metrics: ContinuityMetrics;
}
const worlds: World[] = [];
afterEach(async () => {
  for (const w of worlds.splice(0)) {
    await w.continuity.close();
    w.http.closeAllConnections();
    await new Promise((r) => w.http.close(r));
  }
});

async function start(
  options: Partial<ContinuityServerOptions>,
  keyedOptions: { maxEntriesPerPrincipal?: number; maxEntriesPerAddress?: number } = {},
): Promise<World> {
  const errors: unknown[] = [];
  const metrics = new ContinuityMetrics();
  const continuity = createContinuityServer({
    createMcpServer: () => new McpServerV1({ name: 'l', version: '1.0.0' }),
    modern: {
      createServer: () => {
        const s = new McpServerV2({ name: 'l', version: '1.0.0' });
        s.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
          content: [{ type: 'text', text }],
        }));
        return s;
      },
      keyed: createKeyedRequests({
        log: new MemoryEventLog(),
        memo: new MemoryMemoStore({ memoWindowMs: 60_000 }),
        onError: (e) => errors.push(e),
        ...keyedOptions,
      }),
      keepAliveMs: 0,
    },
    metrics,
    onError: (e) => errors.push(e),
    ...options,
  });
  const http = createServer(continuity.nodeHandler);
  const url = new URL(`http://127.0.0.1:${await listenOnLoopback(http)}/mcp`);
  const world = { continuity, http, url, errors, metrics };
  worlds.push(world);
  return world;
}

/** An open listen stream: its status, and (when 200) a way to close it once its acknowledgement came. */
async function openListen(url: URL, token: string, id: string) {
  const abort = new AbortController();
  const init = listenRequestInit(id, envelope, abort.signal);
  const response = await fetch(url, {
    ...init,
    headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
  });
  if (response.status !== 200 || !response.body) {
    return { response, body: await response.text(), close: () => abort.abort() };
  }
  const reader = response.body.getReader();
  let seen = '';
  for (let i = 0; i < 100 && !seen.includes('notifications/subscriptions/acknowledged'); i++) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += new TextDecoder().decode(value);
  }
  return { response, body: seen, close: () => abort.abort() };
}

describe('2026 limits: open subscriptions/listen streams (item 1)', () => {
  it('a principal at its bound gets 429 + Retry-After + JSON-RPC error; another principal still listens; a full process answers 503', async () => {
    const w = await start({
      authenticate: (r) => {
        const token = r.headers.get('authorization')?.replace('Bearer ', '');
        return token ? { principal: token } : null;
      },
      limits: { maxListensPerPrincipal: 5, maxListens: 8, retryAfterSeconds: 7 },
    });
    const alice = [];
    for (let i = 0; i < 5; i++) {
      const l = await openListen(w.url, 'alice', `a${i}`);
      expect(l.response.status).toBe(200);
      expect(l.body).toContain('notifications/subscriptions/acknowledged');
      alice.push(l);
    }
    const refused = await openListen(w.url, 'alice', 'a5');
    expect(refused.response.status).toBe(429);
    expect(refused.response.headers.get('retry-after')).toBe('7');
    const error = JSON.parse(refused.body) as { id: unknown; error: { code: number; message: string } };
    expect(error.id).toBe('a5');
    expect(error.error.code).toBe(JsonRpcCode.LIMIT_EXCEEDED);

    // Another principal is not affected by alice's bound.
    const bob = [];
    for (let i = 0; i < 3; i++) {
      const l = await openListen(w.url, 'bob', `b${i}`);
      expect(l.response.status).toBe(200);
      expect(l.body).toContain('notifications/subscriptions/acknowledged');
      bob.push(l);
    }
    // 8 open: the process bound answers 503 with Retry-After (the SDK's own bound never answers).
    const full = await openListen(w.url, 'carol', 'c0');
    expect(full.response.status).toBe(503);
    expect(full.response.headers.get('retry-after')).toBe('7');
    expect((JSON.parse(full.body) as { error: { code: number } }).error.code).toBe(
      JsonRpcCode.LIMIT_EXCEEDED,
    );

    // Closed streams give their slots back.
    for (const l of alice) l.close();
    let again: Awaited<ReturnType<typeof openListen>> | undefined;
    for (let i = 0; i < 150 && again === undefined; i++) {
      const l = await openListen(w.url, 'alice', `a-again-${i}`);
      if (l.response.status === 200) again = l;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(again?.body).toContain('notifications/subscriptions/acknowledged');
    again?.close();
    for (const l of bob) l.close();

    const f = w.metrics.figures();
    expect(f[`${M}.limited_requests{reason=max_listens_per_principal}`]).toBe(1);
    expect(f[`${M}.limited_requests{reason=max_listens}`]).toBeGreaterThanOrEqual(1);
    expect(w.errors).toEqual([]);
  }, 60_000);
});

describe('2026 limits: idempotency keys per address without authenticate (item 4)', () => {
  it("one address filling its share does not refuse another address's key", async () => {
    const w = await start({}, { maxEntriesPerPrincipal: 20, maxEntriesPerAddress: 5 });
    const statuses: number[] = [];
    let refusal: Awaited<ReturnType<typeof postFrom>> | undefined;
    // Address A tries as many keys as the whole (anonymous) principal may hold, and one more.
    for (let i = 0; i < 21; i++) {
      const r = await postFrom(w.url, '127.0.0.2', callHeaders, keyedCall(i, `key-a-${i}`));
      statuses.push(r.status);
      if (r.status === 429) refusal ??= r;
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(16);
    expect(Number(refusal?.headers['retry-after'])).toBeGreaterThan(0);
    const body = JSON.parse(refusal?.text ?? '{}') as { error: { code: number; message: string } };
    expect(body.error.code).toBe(JsonRpcCode.LIMIT_EXCEEDED);
    expect(body.error.message).toContain('address');

    // Address B is served.
    const b = await postFrom(w.url, '127.0.0.3', callHeaders, keyedCall('b', 'key-b-0'));
    expect(b.status).toBe(200);
    expect(b.text).toContain('"resultType":"complete"');
    // A's re-issue of a key it holds is still answered (a bound refuses new keys only).
    const reissue = await postFrom(w.url, '127.0.0.2', callHeaders, keyedCall('a0-again', 'key-a-0'));
    expect(reissue.status).toBe(200);

    expect(w.metrics.figures()[`${M}.limited_requests{reason=max_keys_per_address}`]).toBe(16);
    expect(w.errors).toEqual([]);
  }, 60_000);
});

describe('2026 limits: the request id (item 6)', () => {
  it('a 1 MB id is refused 400 with a JSON-RPC error; an id at the bound is served', async () => {
    const w = await start({ limits: { maxRequestIdLength: 256 } });
    const post = (id: string) =>
      fetch(w.url, {
        method: 'POST',
        headers: callHeaders,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'echo', arguments: { text: 'x' }, _meta: envelope },
        }),
      });
    const long = await post('x'.repeat(1_000_000));
    expect(long.status).toBe(400);
    const body = (await long.json()) as { id: unknown; error: { code: number; message: string } };
    expect(body.error.code).toBe(JsonRpcCode.INVALID_REQUEST);
    expect(body.error.message).toContain('id longer than 256');
    expect(body.id).toBeNull();

    const atBound = await post('y'.repeat(256));
    expect(atBound.status).toBe(200);
    expect(await atBound.text()).toContain('"resultType":"complete"');
    expect(w.metrics.figures()[`${M}.rejected_requests{reason=id_too_long}`]).toBe(1);
    expect(w.errors).toEqual([]);
  }, 60_000);
});
