import http from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CANCEL_METHOD,
  CONTINUITY_EXTENSION,
  ContinuityMeta,
  continuityCapability,
  DEFAULT_CONTINUITY_SETTINGS,
} from '../../machines/continuity-extension.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * The runtime's with-extension path (the end-to-end tests against our own server come with the merge):
 * a small scripted 2026-07-28 server on 127.0.0.1 that advertises the extension and answers each attempt
 * of a keyed call as the extension's document says (§4, §5), so what the v2 Client sees through
 * `continuityFetch` can be checked message by message.
 */

type Body = {
  id: string | number;
  method: string;
  params?: { _meta?: Record<string, unknown> } & Record<string, unknown>;
};

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function scripted(onCall: (body: Body, attempt: number, res: http.ServerResponse) => void) {
  const calls: Body[] = [];
  const notifications: Body[] = [];
  const server = http.createServer(async (req, res) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    const body = JSON.parse(text) as Body;
    if (body.method === 'server/discover') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: body.id,
          result: {
            resultType: 'complete',
            supportedVersions: ['2026-07-28'],
            capabilities: { tools: {}, ...continuityCapability(DEFAULT_CONTINUITY_SETTINGS) },
            serverInfo: { name: 'scripted', version: '1.0.0' },
            ttlMs: 60_000,
            cacheScope: 'private',
          },
        }),
      );
      return;
    }
    if (body.method === CANCEL_METHOD) {
      notifications.push(body);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: body.id,
          result: { resultType: 'complete', keyState: 'cancelled' },
        }),
      );
      return;
    }
    calls.push(body);
    onCall(body, calls.length - 1, res);
  });
  const url = new URL(`http://127.0.0.1:${await listenOnLoopback(server)}/mcp`);
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { url, calls, notifications };
}

const sse = (res: http.ServerResponse, id: string, message: object) =>
  res.write(`id: ${id}\nevent: message\ndata: ${JSON.stringify(message)}\n\n`);
const progress = (token: unknown, n: number) => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { progressToken: token, progress: n },
});

async function connect(url: URL) {
  const client = new Client(
    { name: 'ext', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(new StreamableHTTPClientTransport(url, { fetch: continuityFetch() }));
  cleanups.push(() => client.close());
  return client;
}

describe('continuityFetch with a server that advertises the continuity extension', () => {
  it('a cut keyed call is re-issued with the same key and the last event id; the app sees each message once', async () => {
    const s = await scripted((body, attempt, res) => {
      const token = body.params?._meta?.progressToken;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (attempt === 0) {
        sse(res, 'k-1', progress(token, 1));
        // The balancer cuts the connection after the first event.
        setTimeout(() => res.socket?.destroy(), 30);
        return;
      }
      // The re-issue: the server replays from after k-1 (and, as a proxy might, k-1 itself again).
      sse(res, 'k-1', progress(token, 1));
      sse(res, 'k-2', progress(token, 2));
      sse(res, 'k-3', {
        jsonrpc: '2.0',
        id: body.id,
        result: { resultType: 'complete', content: [{ type: 'text', text: 'charged once' }] },
      });
      res.end();
    });
    const client = await connect(s.url);
    const seen: unknown[] = [];
    const result = await client.callTool(
      { name: 'charge', arguments: { cents: 100 } },
      { onprogress: (p) => seen.push(p.progress) },
    );
    expect(result.content).toEqual([{ type: 'text', text: 'charged once' }]);
    expect(seen).toEqual([1, 2]);
    expect(s.calls).toHaveLength(2);
    const [first, second] = s.calls as [Body, Body];
    const key = first.params?._meta?.[ContinuityMeta.idempotencyKey];
    expect(typeof key).toBe('string');
    expect(ContinuityMeta.lastEventId in (first.params?._meta ?? {})).toBe(false);
    expect(first.params?._meta?.['io.modelcontextprotocol/clientCapabilities']).toMatchObject({
      extensions: { [CONTINUITY_EXTENSION]: {} },
    });
    expect(second.id).not.toBe(first.id);
    expect(second.params?._meta?.[ContinuityMeta.idempotencyKey]).toBe(key);
    expect(second.params?._meta?.[ContinuityMeta.lastEventId]).toBe('k-1');
    expect(second.params?.arguments).toEqual(first.params?.arguments);
  });

  it("the application's cancel also sends the explicit cancel request (§13) with the key", async () => {
    const s = await scripted((_body, _attempt, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': working\n\n');
    });
    const client = await connect(s.url);
    const abort = new AbortController();
    const call = client.callTool({ name: 'charge', arguments: { cents: 1 } }, { signal: abort.signal });
    const deadline = performance.now() + 5_000;
    while (s.calls.length === 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    abort.abort();
    await expect(call).rejects.toBeDefined();
    while (s.notifications.length === 0 && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    const key = s.calls[0]?.params?._meta?.[ContinuityMeta.idempotencyKey];
    expect(s.notifications).toHaveLength(1);
    expect(s.notifications[0]?.params?.idempotencyKey).toBe(key);
    expect(s.notifications[0]?.id).toBe(`${s.calls[0]?.id}~cancel`);
    expect(s.notifications[0]?.params?._meta?.['io.modelcontextprotocol/protocolVersion']).toBe('2026-07-28');
  });
});
