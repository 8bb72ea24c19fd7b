import { createServer, type Server as HttpServer } from 'node:http';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { listenOnLoopback } from '../support/listen.js';

const MODERN = '2026-07-28';
const envelope = (version = MODERN) => ({
  'io.modelcontextprotocol/protocolVersion': version,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
});
const call = (name = 'echo', meta: Record<string, unknown> = envelope()) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name, arguments: { text: 'x' }, _meta: meta },
});
const headers = (extra: Record<string, string> = {}) => ({
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': MODERN,
  'mcp-method': 'tools/call',
  'mcp-name': 'echo',
  ...extra,
});

describe('raw and hostile 2026-07-28 requests', () => {
  let continuity: ContinuityServer;
  let http: HttpServer;
  let url: URL;
  const errors: unknown[] = [];
  beforeAll(async () => {
    continuity = createContinuityServer({
      createMcpServer: () => new McpServerV1({ name: 'h', version: '1.0.0' }),
      modern: {
        createServer: () => {
          const s = new McpServerV2({ name: 'h', version: '1.0.0' });
          s.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
            content: [{ type: 'text', text }],
          }));
          return s;
        },
      },
      authenticate: (request) =>
        request.headers.get('authorization') === 'Bearer ok' ? { principal: 'alice' } : null,
      maxBodyBytes: 64 * 1024,
      onError: (e) => errors.push(e),
    });
    http = createServer(continuity.nodeHandler);
    url = new URL(`http://127.0.0.1:${await listenOnLoopback(http)}/mcp`);
  });
  afterAll(async () => {
    await continuity.close();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  });

  const post = (body: string, extra: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { authorization: 'Bearer ok', ...headers(extra) }, body });
  const errorOf = async (response: Response) =>
    ((await response.json()) as { error: { code: number } }).error;

  it('a well-formed call is served (the baseline for the rows below)', async () => {
    const response = await post(JSON.stringify(call()));
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).toContain('"resultType":"complete"');
  });

  it('Mcp-Method disagreeing with the body: 400 HeaderMismatch (-32020)', async () => {
    const response = await post(JSON.stringify(call()), { 'mcp-method': 'tools/list' });
    expect(response.status).toBe(400);
    expect((await errorOf(response)).code).toBe(-32020);
  });

  it('Mcp-Name disagreeing with params.name: 400 -32020', async () => {
    const response = await post(JSON.stringify(call()), { 'mcp-name': 'other' });
    expect(response.status).toBe(400);
    expect((await errorOf(response)).code).toBe(-32020);
  });

  it('missing Mcp-Method: 400 -32020', async () => {
    const h = headers();
    delete (h as Record<string, string>)['mcp-method'];
    const response = await fetch(url, {
      method: 'POST',
      headers: { authorization: 'Bearer ok', ...h },
      body: JSON.stringify(call()),
    });
    expect(response.status).toBe(400);
    expect((await errorOf(response)).code).toBe(-32020);
  });

  it('header and envelope naming different versions: 400 -32020', async () => {
    const response = await post(JSON.stringify(call('echo', envelope('2027-01-01'))));
    expect(response.status).toBe(400);
    expect((await errorOf(response)).code).toBe(-32020);
  });

  it('an envelope naming a version nobody serves: 400 -32022 with the supported list', async () => {
    const response = await post(JSON.stringify(call('echo', envelope('2027-01-01'))), {
      'mcp-protocol-version': '2027-01-01',
    });
    expect(response.status).toBe(400);
    const error = (await response.json()).error;
    expect(error.code).toBe(-32022);
    expect(error.data.supported).toEqual([MODERN, '2025-11-25', '2025-06-18', '2025-03-26']);
  });

  it('bad JSON under a modern header: 400 parse error, no session', async () => {
    const response = await post('{"jsonrpc":"2.0",');
    expect(response.status).toBe(400);
    expect((await errorOf(response)).code).toBe(-32700);
  });

  it('JSON that is not an object (null, a number, a string) under a modern header: 400, nothing thrown', async () => {
    for (const body of ['null', '42', '"x"', '[]']) {
      const response = await post(body);
      expect(response.status, body).toBe(400);
      expect(typeof (await errorOf(response)).code, body).toBe('number');
    }
  });

  it('a huge _meta: 413 from our admission before anything parses it', async () => {
    const big = { ...envelope(), pad: 'x'.repeat(100 * 1024) };
    const response = await post(JSON.stringify(call('echo', big)));
    expect(response.status).toBe(413);
  });

  it('deeply nested _meta: 400 from our depth limit', async () => {
    let nested: unknown = 1;
    for (let i = 0; i < 200; i++) nested = { a: nested };
    const response = await post(JSON.stringify(call('echo', { ...envelope(), nested })));
    expect(response.status).toBe(400);
  });

  it('no credentials: 401; a foreign Origin: 403 — our admission applies to modern requests too', async () => {
    const anonymous = await fetch(url, { method: 'POST', headers: headers(), body: JSON.stringify(call()) });
    expect(anonymous.status).toBe(401);
    const foreign = await post(JSON.stringify(call()), { origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
  });

  it('GET or DELETE without a session id is a 2025 session operation: 400, as before', async () => {
    const get = await fetch(url, {
      headers: { authorization: 'Bearer ok', accept: 'text/event-stream', 'mcp-protocol-version': MODERN },
    });
    expect(get.status).toBe(400);
    const del = await fetch(url, {
      method: 'DELETE',
      headers: { authorization: 'Bearer ok', 'mcp-session-id': 'nope' },
    });
    expect(del.status).toBe(404);
  });

  it('none of it left state behind or reported an error', () => {
    expect(continuity.sessionCount()).toBe(0);
    expect(errors.map((e) => `${(e as Error).name}: ${(e as Error).message} ${JSON.stringify(e)}`)).toEqual(
      [],
    );
  });
});
