import { createServer, type Server as HttpServer } from 'node:http';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CONTINUITY_EXTENSION,
  ContinuityMeta,
  DEFAULT_CONTINUITY_SETTINGS,
} from '../../machines/continuity-extension.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import type { KeyedRequests } from '../../src/server/modern/keyed-hook.js';
import { listenOnLoopback } from '../support/listen.js';

const MODERN = '2026-07-28';

/** The application's 2026 server: one per request (the v2 SDK's factory model). */
function modernServer(): McpServerV2 {
  const server = new McpServerV2(
    { name: 'eras', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } } },
  );
  server.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
    content: [{ type: 'text', text: `2026:${text}` }],
  }));
  server.registerTool('steps', { inputSchema: z.object({ n: z.number() }) }, async ({ n }, ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (let i = 1; i <= n; i++) {
      if (token !== undefined)
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken: token, progress: i, total: n },
        });
      await new Promise((r) => setTimeout(r, 20));
    }
    return { content: [{ type: 'text', text: `done ${n}` }] };
  });
  return server;
}

/** The application's 2025 server (v1 SDK 1.32), one per session, as today. */
function legacyServer(): McpServerV1 {
  const server = new McpServerV1({ name: 'eras', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text: `2025:${text}` }],
  }));
  return server;
}

async function start(continuity: ContinuityServer): Promise<{ http: HttpServer; url: URL }> {
  const http = createServer(continuity.nodeHandler);
  const port = await listenOnLoopback(http);
  return { http, url: new URL(`http://127.0.0.1:${port}/mcp`) };
}

const modernClient = () =>
  new ClientV2({ name: 'v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });

const textOf = (result: unknown) => (result as { content: { text: string }[] }).content[0]?.text;

describe('one endpoint, both eras', () => {
  let continuity: ContinuityServer;
  let http: HttpServer;
  let url: URL;
  beforeAll(async () => {
    continuity = createContinuityServer({
      createMcpServer: legacyServer,
      modern: { createServer: modernServer },
    });
    ({ http, url } = await start(continuity));
  });
  afterAll(async () => {
    await continuity.close();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  });

  it('a v2 client pinned to 2026-07-28 and a v1 client on 2025-11-25 use the same running server at once', async () => {
    const v2 = modernClient();
    const v1 = new ClientV1({ name: 'v1', version: '1.0.0' });
    await Promise.all([v2.connect(new TransportV2(url)), v1.connect(new TransportV1(url))]);
    expect(v2.getNegotiatedProtocolVersion()).toBe(MODERN);
    expect((v1.transport as TransportV1).sessionId).toBeTruthy();
    const [tools2, tools1] = await Promise.all([v2.listTools(), v1.listTools()]);
    expect(tools2.tools.map((t) => t.name).sort()).toEqual(['echo', 'steps']);
    expect(tools1.tools.map((t) => t.name)).toEqual(['echo']);
    const progress: number[] = [];
    const [a, b, c] = await Promise.all([
      v2.callTool({ name: 'echo', arguments: { text: 'hi' } }),
      v1.callTool({ name: 'echo', arguments: { text: 'hi' } }),
      v2.callTool({ name: 'steps', arguments: { n: 3 } }, { onprogress: (p) => progress.push(p.progress) }),
    ]);
    expect(textOf(a)).toBe('2026:hi');
    expect(textOf(b)).toBe('2025:hi');
    expect(textOf(c)).toBe('done 3');
    expect(progress).toEqual([1, 2, 3]);
    // Modern requests leave no session behind; the v1 client holds the only one.
    expect(continuity.sessionCount()).toBe(1);
    await Promise.all([v2.close(), v1.close()]);
  });

  it('server/discover lists 2026-07-28 and the 2025 versions; no extension without keyed requests', async () => {
    const v2 = modernClient();
    await v2.connect(new TransportV2(url));
    const discovered = await v2.discover();
    expect(discovered.supportedVersions).toContain(MODERN);
    for (const v of ['2025-11-25', '2025-06-18', '2025-03-26'])
      expect(discovered.supportedVersions).toContain(v);
    expect(discovered.capabilities.extensions?.[CONTINUITY_EXTENSION]).toBeUndefined();
    await v2.close();
  });

  it('subscriptions/listen delivers a tools list_changed on 2026-07-28', async () => {
    const v2 = modernClient();
    await v2.connect(new TransportV2(url));
    const heard = new Promise<string>((resolve) =>
      v2.setNotificationHandler('notifications/tools/list_changed', (n) => resolve(n.method)),
    );
    const subscription = await v2.listen({ toolsListChanged: true });
    continuity.notifyModern.toolsChanged();
    expect(await heard).toBe('notifications/tools/list_changed');
    await subscription.close();
    await v2.close();
  });
});

describe('without a modern server', () => {
  let continuity: ContinuityServer;
  let http: HttpServer;
  let url: URL;
  beforeAll(async () => {
    continuity = createContinuityServer({ createMcpServer: legacyServer });
    ({ http, url } = await start(continuity));
  });
  afterAll(async () => {
    await continuity.close();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  });

  it('a 2026-07-28 request gets 400 UnsupportedProtocolVersionError naming the 2025 versions we serve', async () => {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'tools/list',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/list',
        params: {
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    });
    expect(response.status).toBe(400);
    const body = await response.json();
    expect(body).toMatchObject({
      jsonrpc: '2.0',
      id: 7,
      error: {
        code: -32022,
        data: { supported: ['2025-11-25', '2025-06-18', '2025-03-26'], requested: MODERN },
      },
    });
    expect(continuity.sessionCount()).toBe(0);
  });

  it('a v2 client that negotiates (its default) uses us on 2025', async () => {
    const v2 = new ClientV2({ name: 'v2', version: '1.0.0' });
    await v2.connect(new TransportV2(url));
    expect(v2.getNegotiatedProtocolVersion()).toBe('2025-11-25');
    expect(textOf(await v2.callTool({ name: 'echo', arguments: { text: 'x' } }))).toBe('2025:x');
    await v2.close();
  });
});

describe('with keyed requests configured (a test fixture, not the extension)', () => {
  let continuity: ContinuityServer;
  let http: HttpServer;
  let url: URL;
  const seen: string[] = [];
  /** Serves the one fake key `fixture-key` with a canned result; everything else is left to the SDK. */
  const fixture: KeyedRequests = {
    settings: DEFAULT_CONTINUITY_SETTINGS,
    serve(call) {
      seen.push(call.message.method);
      const key = (call.message.params?._meta as Record<string, unknown> | undefined)?.[
        ContinuityMeta.idempotencyKey
      ];
      if (key !== 'fixture-key') return undefined;
      return Promise.resolve(
        Response.json({
          jsonrpc: '2.0',
          id: call.message.id,
          result: { resultType: 'complete', content: [{ type: 'text', text: 'from the fixture' }] },
        }),
      );
    },
    close: async () => undefined,
  };
  beforeAll(async () => {
    continuity = createContinuityServer({
      createMcpServer: legacyServer,
      modern: { createServer: modernServer, keyed: fixture },
    });
    ({ http, url } = await start(continuity));
  });
  afterAll(async () => {
    await continuity.close();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  });

  it('server/discover advertises the extension; tools/call goes to the seam first, unkeyed calls are served by the SDK', async () => {
    const v2 = modernClient();
    await v2.connect(new TransportV2(url));
    const discovered = await v2.discover();
    expect(discovered.capabilities.extensions?.[CONTINUITY_EXTENSION]).toEqual({
      ...DEFAULT_CONTINUITY_SETTINGS,
    });
    expect(textOf(await v2.callTool({ name: 'echo', arguments: { text: 'u' } }))).toBe('2026:u');
    expect(seen).toEqual(['tools/call']);
    const keyed = await v2.callTool({
      name: 'echo',
      arguments: { text: 'k' },
      _meta: { [ContinuityMeta.idempotencyKey]: 'fixture-key' },
    });
    expect(textOf(keyed)).toBe('from the fixture');
    await v2.close();
  });
});

describe('one v2 factory for both eras', () => {
  let continuity: ContinuityServer;
  let http: HttpServer;
  let url: URL;
  beforeAll(async () => {
    // The same v2 McpServer factory serves 2025 sessions (through our session transport) and 2026 requests.
    continuity = createContinuityServer({
      createMcpServer: () => modernServer(),
      modern: { createServer: modernServer },
    });
    ({ http, url } = await start(continuity));
  });
  afterAll(async () => {
    await continuity.close();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  });

  it('a v1 client on 2025-11-25 gets a session served by the v2 McpServer, with progress', async () => {
    const v1 = new ClientV1({ name: 'v1', version: '1.0.0' });
    await v1.connect(new TransportV1(url));
    expect((v1.transport as TransportV1).sessionId).toBeTruthy();
    expect(textOf(await v1.callTool({ name: 'echo', arguments: { text: 'one' } }))).toBe('2026:one');
    const progress: number[] = [];
    const done = await v1.callTool({ name: 'steps', arguments: { n: 2 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    expect(textOf(done)).toBe('done 2');
    expect(progress).toEqual([1, 2]);
    await v1.close();
  });
});
