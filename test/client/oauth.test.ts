/**
 * OAuth on `ContinuityClientTransport`, over real HTTP on 127.0.0.1: the official SDK server (`McpServer`)
 * behind a bearer check, with a small authorization server on the same origin (test/support/oauth-server.ts),
 * and the SDK's own `auth()` running the application's `OAuthClientProvider`. An expired token is a fact
 * about the transport: the stream resumes after a refresh with the same Last-Event-ID, a refused POST goes
 * again with the same id; no session is lost, no event, no call runs twice.
 */
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_AUTHORIZATIONS } from '../../machines/client/authorization.js';
import {
  type ContinuityClientOptions,
  ContinuityClientTransport,
  type CursorStore,
  type FetchLike,
  type GapReport,
  isContinuityError,
} from '../../src/index.js';
import { HeadlessOAuthProvider } from '../support/oauth-provider.js';
import { TestAuthorizationServer } from '../support/oauth-server.js';
import { type SdkWorld, startSdkServer, Wire } from './sdk-server-harness.js';

const worlds: SdkWorld[] = [];
const wires: Wire[] = [];
afterEach(async () => {
  for (const w of wires.splice(0)) await w.dispose();
  for (const w of worlds.splice(0)) await w.close();
});

async function world(): Promise<{ world: SdkWorld; oauth: TestAuthorizationServer }> {
  const oauth = new TestAuthorizationServer();
  const w = await startSdkServer({ gate: oauth.gate });
  worlds.push(w);
  return { world: w, oauth };
}

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;
const isCharge = (body: string | undefined) => body?.includes('"name":"charge"') === true;

/**
 * Connects as an application written for the SDK transport does: `connect` fails with `UnauthorizedError`
 * when the user must authorize, the application hands the code to `finishAuth`, then connects a new
 * transport (the failed `connect` closed the first).
 */
async function connectAuthorized(
  url: string,
  provider: HeadlessOAuthProvider,
  options: ContinuityClientOptions,
) {
  const errors: Error[] = [];
  const gaps: GapReport[] = [];
  const first = new ContinuityClientTransport(new URL(url), { ...options, authProvider: provider });
  const rejected = await new Client({ name: 't', version: '1' }).connect(first).catch((e: unknown) => e);
  expect(rejected).toBeInstanceOf(UnauthorizedError);
  await first.finishAuth(provider.codes.at(-1) as string);
  const transport = new ContinuityClientTransport(new URL(url), {
    ...options,
    authProvider: provider,
    onGap: (g) => gaps.push(g),
  });
  const client = new Client({ name: 't', version: '1' });
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return { client, transport, errors, gaps };
}

describe('OAuth: ContinuityClientTransport with the SDK OAuthClientProvider', () => {
  it('connect fails with UnauthorizedError until finishAuth, as with the SDK transport; then calls carry the token', async () => {
    const { world: w, oauth } = await world();
    const provider = new HeadlessOAuthProvider('pre-registered');
    const { client, transport } = await connectAuthorized(w.url, provider, {});
    expect(provider.uses.redirects).toBe(1);
    expect(text(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }))).toBe('hi');
    expect(oauth.grants.get('authorization_code')).toBe(1);
    expect(oauth.admitted.length).toBeGreaterThan(0);
    await transport.close();
  }, 30_000);

  it('the token expires mid-stream during a charge: the stream resumes after a refresh, same Last-Event-ID; one charge, no gap, same session', async () => {
    const { world: w, oauth } = await world();
    const provider = new HeadlessOAuthProvider('pre-registered');
    const wire = new Wire();
    wires.push(wire);
    // The charge's POST is let through with a good token; the token expires while the charge runs, and the
    // charge's stream is cut after its first (priming) event: the resume meets the expired token.
    const fetchFn: FetchLike = async (url, init) => {
      const response = await wire.fetch(url, init);
      if (init?.method === 'POST' && typeof init.body === 'string' && isCharge(init.body)) oauth.expireAll();
      return response;
    };
    // Every record written to the cursor store, as it would reach a cursor file.
    const saved: string[] = [];
    const cursorStore: CursorStore = {
      durable: true,
      load: async () => null,
      save: async (record) => {
        saved.push(JSON.stringify(record));
      },
    };
    const { client, transport, errors, gaps } = await connectAuthorized(w.url, provider, {
      fetch: fetchFn,
      cursorStore,
    });
    const session = transport.sessionId;
    wire.cutNext((x) => x.method === 'POST' && isCharge(x.body), 0);
    const result = await client.callTool({ name: 'charge', arguments: { key: 'card', delayMs: 600 } });
    expect(text(result)).toBe('charged card (1)');
    expect(w.charges.get('card')).toBe(1);
    expect(wire.filter((x) => x.method === 'POST' && isCharge(x.body))).toHaveLength(1);
    // The resume was refused for the expired token, the provider refreshed it, and the same cursor went again.
    const refused = oauth.challenged.filter((c) => c.method === 'GET' && c.lastEventId !== undefined);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    const cursor = refused[0]?.lastEventId;
    expect(oauth.admitted.some((a) => a.method === 'GET' && a.lastEventId === cursor)).toBe(true);
    expect(oauth.grants.get('refresh_token')).toBeGreaterThanOrEqual(1);
    expect(transport.sessionId).toBe(session);
    expect(w.created).toHaveLength(1);
    expect(gaps).toEqual([]);
    expect(errors.filter((e) => isContinuityError(e) && e.code === 'MCPC_EVENTS_LOST')).toEqual([]);
    // The cursor store kept the session and the cursors, never a token: tokens stay in the provider.
    expect(saved.some((r) => r.includes(session as string))).toBe(true);
    expect(saved.filter((r) => /access-|refresh-|Bearer/.test(r))).toEqual([]);
    await transport.close();
  }, 30_000);

  it('a provider whose tokens() throws: the call was never sent, so it fails definitely, never as outcome unknown', async () => {
    const { world: w } = await world();
    const provider = new HeadlessOAuthProvider('pre-registered');
    const wire = new Wire();
    wires.push(wire);
    const { client, transport } = await connectAuthorized(w.url, provider, {
      fetch: wire.fetch,
      reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxRetries: 2, jitter: 'none' },
    });
    provider.tokens = () => {
      throw new Error('keychain locked');
    };
    const failure = await client
      .callTool({ name: 'charge', arguments: { key: 'never' } }, undefined, { timeout: 20_000 })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number },
      );
    expect(failure).toBeDefined();
    expect(failure?.code, JSON.stringify(failure)).not.toBe(-32050);
    expect(wire.filter((x) => x.method === 'POST' && isCharge(x.body))).toHaveLength(0);
    expect(w.charges.get('never')).toBeUndefined();
    await transport.close();
  }, 30_000);

  it('a POST answered 401 never ran: after the refresh it is sent again with the same id; one charge', async () => {
    const { world: w, oauth } = await world();
    const provider = new HeadlessOAuthProvider('pre-registered');
    const wire = new Wire();
    const { client, transport } = await connectAuthorized(w.url, provider, { fetch: wire.fetch });
    oauth.expireAll();
    const result = await client.callTool({ name: 'charge', arguments: { key: 'once' } });
    expect(text(result)).toBe('charged once (1)');
    expect(w.charges.get('once')).toBe(1);
    const posts = wire.filter((x) => x.method === 'POST' && isCharge(x.body));
    expect(posts.map((x) => x.status)).toEqual([401, 200]);
    const ids = posts.map((x) => (JSON.parse(x.body as string) as { id: unknown }).id);
    expect(ids[0]).toBe(ids[1]);
    expect(oauth.grants.get('refresh_token')).toBe(1);
    await transport.close();
  }, 30_000);

  it('refresh refused mid-stream: UnauthorizedError is reported, the call waits; after finishAuth it is answered, one charge, same session', async () => {
    const { world: w, oauth } = await world();
    const provider = new HeadlessOAuthProvider('pre-registered');
    const wire = new Wire();
    wires.push(wire);
    const fetchFn: FetchLike = async (url, init) => {
      const response = await wire.fetch(url, init);
      if (init?.method === 'POST' && typeof init.body === 'string' && isCharge(init.body)) {
        oauth.expireAll();
        oauth.refreshAllowed = false;
      }
      return response;
    };
    const { client, transport, errors } = await connectAuthorized(w.url, provider, { fetch: fetchFn });
    const session = transport.sessionId;
    wire.cutNext((x) => x.method === 'POST' && isCharge(x.body), 0);
    const call = client.callTool({ name: 'charge', arguments: { key: 'card', delayMs: 300 } });
    await expect
      .poll(() => errors.some((e) => e instanceof UnauthorizedError), { timeout: 20_000 })
      .toBe(true);
    // The user authorizes again (the provider was redirected), the application completes it.
    expect(provider.uses.redirects).toBe(2);
    await transport.finishAuth(provider.codes.at(-1) as string);
    expect(text(await call)).toBe('charged card (1)');
    expect(w.charges.get('card')).toBe(1);
    expect(transport.sessionId).toBe(session);
    expect(w.created).toHaveLength(1);
    await transport.close();
  }, 30_000);

  it('a server that refuses every token gets a bounded number of authorizations, then the call fails with UnauthorizedError (no 401 loop)', async () => {
    const { world: w, oauth } = await world();
    const provider = new HeadlessOAuthProvider('pre-registered');
    const wire = new Wire();
    const { client, transport } = await connectAuthorized(w.url, provider, { fetch: wire.fetch });
    // Every token is expired the moment it is issued.
    const gate = oauth.gate;
    const refusing = (req: Parameters<typeof gate>[0], res: Parameters<typeof gate>[1], url: string) => {
      oauth.expireAll();
      return gate(req, res, url);
    };
    w.httpServer.removeAllListeners('request');
    w.httpServer.on('request', (req, res) => {
      if (!refusing(req, res, w.url)) res.writeHead(500).end();
    });
    const err = await client
      .callTool({ name: 'charge', arguments: { key: 'never' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnauthorizedError);
    expect(wire.filter((x) => x.method === 'POST' && isCharge(x.body))).toHaveLength(1 + MAX_AUTHORIZATIONS);
    expect(w.charges.get('never')).toBeUndefined();
    await transport.close();
  }, 30_000);
});
