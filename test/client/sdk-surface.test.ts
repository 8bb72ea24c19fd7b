/**
 * The rest of the SDK transport's surface on `ContinuityClientTransport`, against the official SDK server
 * over real HTTP on 127.0.0.1: the `sessionId` option, `terminateSession()`, `redirectPolicy`, and
 * `finishAuth` without a provider.
 */
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { type CallToolResult, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { ContinuityClientTransport } from '../../src/index.js';
import { type SdkWorld, startSdkServer, Wire } from './sdk-server-harness.js';

const worlds: SdkWorld[] = [];
afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close();
});

const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

/** A server whose old path `/old` answers 307 to `/mcp` (same origin). */
async function movedWorld(): Promise<SdkWorld> {
  const w = await startSdkServer({
    gate: (req, res, url) => {
      if (!req.url?.startsWith('/old')) return false;
      req.resume();
      res.writeHead(307, { location: url }).end();
      return true;
    },
  });
  worlds.push(w);
  return w;
}

describe("the SDK transport's surface", () => {
  it('sessionId: a second transport joins the session; the SDK Client skips initialize', async () => {
    const w = await startSdkServer();
    worlds.push(w);
    const first = new ContinuityClientTransport(new URL(w.url), { deleteOnClose: false });
    await new Client({ name: 'a', version: '1' }).connect(first);
    const sessionId = first.sessionId as string;
    await first.close();
    const wire = new Wire();
    const joined = new ContinuityClientTransport(new URL(w.url), { sessionId, fetch: wire.fetch });
    const client = new Client({ name: 'b', version: '1' });
    await client.connect(joined);
    expect(joined.sessionId).toBe(sessionId);
    expect(text(await client.callTool({ name: 'echo', arguments: { text: 'again' } }))).toBe('again');
    expect(wire.filter((x) => x.body?.includes('"initialize"') === true)).toHaveLength(0);
    expect(w.created).toHaveLength(1);
    await joined.close();
  }, 30_000);

  it('terminateSession: DELETE ends the session on the server, then the transport closes', async () => {
    const w = await startSdkServer();
    worlds.push(w);
    const transport = new ContinuityClientTransport(new URL(w.url));
    let closes = 0;
    const client = new Client({ name: 'a', version: '1' });
    await client.connect(transport);
    client.onclose = () => closes++;
    const sessionId = transport.sessionId as string;
    expect(w.sessions.has(sessionId)).toBe(true);
    await transport.terminateSession();
    expect(w.sessions.has(sessionId)).toBe(false);
    expect(closes).toBe(1);
    await expect(client.callTool({ name: 'echo', arguments: { text: 'x' } })).rejects.toThrow();
  }, 30_000);

  it('redirectPolicy: by default a redirect is not followed (-32053); with follow it is', async () => {
    const w = await movedWorld();
    const old = new URL(w.url.replace('/mcp', '/old'));
    const refused = await new Client({ name: 'a', version: '1' })
      .connect(new ContinuityClientTransport(old))
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).code).toBe(-32053);
    const transport = new ContinuityClientTransport(old, { redirectPolicy: 'follow' });
    const client = new Client({ name: 'b', version: '1' });
    await client.connect(transport);
    expect(text(await client.callTool({ name: 'echo', arguments: { text: 'moved' } }))).toBe('moved');
    await transport.close();
  }, 30_000);

  it('finishAuth without an authProvider fails with UnauthorizedError, as the SDK transport does', async () => {
    const transport = new ContinuityClientTransport(new URL('http://127.0.0.1:9/mcp'));
    await expect(transport.finishAuth('code')).rejects.toBeInstanceOf(UnauthorizedError);
  });
});
