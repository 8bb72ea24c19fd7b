import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { ContinuityClientTransport, isContinuityError } from '../../src/index.js';
import { event, hostileServer, type Misbehave, sse } from './hostile-server.js';

/**
 * Issue 22: a server that answers the standalone GET 404 while it serves the session's POSTs (the
 * conformance suite's `tools_call` server routes only POST). The GET's 404 says nothing about the session:
 * calls complete on the one session, with no re-initialize. Real HTTP on loopback, the SDK's Client.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const POLICY = { initialDelayMs: 20, maxDelayMs: 200, factor: 2, maxRetries: 3, jitter: 'full' } as const;
const CALLS = 3;

const answerCall: Misbehave = ({ res, body }) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({ jsonrpc: '2.0', id: body?.id, result: { content: [{ type: 'text', text: 'ok' }] } }),
  );
};

/** Express's answer to a route it does not have, as the conformance suite's server gives it. */
const expressNotFound: Misbehave = ({ res }) => {
  res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' }).end('Cannot GET /mcp');
};
/** A bare 404, as a proxy that routes only POST may give. */
const emptyNotFound: Misbehave = ({ res }) => {
  res.writeHead(404).end();
};
/** The JSON-RPC body a session-aware server gives with its 404. */
const sessionNotFound: Misbehave = ({ res }) => {
  res.writeHead(404, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }),
  );
};

async function connect(getAnswer: Misbehave, sessionId: string | null) {
  const s = await hostileServer(
    (request) => (request.req.method === 'GET' ? getAnswer(request) : answerCall(request)),
    sessionId,
  );
  cleanups.push(s.close);
  const transport = new ContinuityClientTransport(s.url, { reconnect: POLICY });
  const client = new Client({ name: 'standalone-404-test', version: '1.0.0' });
  const errors: Error[] = [];
  await client.connect(transport);
  transport.onerror = (e) => errors.push(e);
  cleanups.push(() => client.close());
  return { s, client, errors };
}

describe('a standalone GET answered 404 while POSTs succeed (issue 22, loopback)', () => {
  it.each([
    ['a session id', 'not-found-session', expressNotFound],
    ['a session id', 'not-found-session', emptyNotFound],
    ['no session id (stateless)', null, expressNotFound],
  ] as const)(
    'with %s, 404 %#: calls complete on the one session, no re-initialize',
    async (_, sessionId, getAnswer) => {
      const { s, client, errors } = await connect(getAnswer, sessionId);
      for (let i = 0; i < CALLS; i++) {
        const result = await client.callTool({ name: 'anything', arguments: {} }, undefined, {
          timeout: 30_000,
        });
        expect(result.content).toEqual([{ type: 'text', text: 'ok' }]);
      }
      expect(s.count('initialize')).toBe(1);
      expect(s.count('tools/call')).toBe(CALLS);
      // The stream stopped: asked for once, not polled (as a 405 would be).
      expect(s.count('GET')).toBe(1);
      expect(errors.filter((e) => isContinuityError(e) && e.code === 'MCPC_REINITIALIZE_GIVEN_UP')).toEqual(
        [],
      );
    },
    30_000,
  );

  it("a standalone GET that never opened, answered the server's JSON-RPC 'Session not found': that session is gone, one re-initialize", async () => {
    // The MCP server itself says it does not know the session (a restored client, or a server restart
    // between initialize and the GET): re-initialize, once; the new session's stream opens.
    const { s, client } = await connect((request) => {
      if (request.nth === 0) {
        sessionNotFound(request);
        return;
      }
      sse(request.res);
    }, 'gone-before-get');
    await expect.poll(() => s.count('initialize'), { timeout: 30_000 }).toBe(2);
    const result = await client.callTool({ name: 'anything', arguments: {} }, undefined, { timeout: 30_000 });
    expect(result.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(s.count('initialize')).toBe(2);
  }, 40_000);

  it('a standalone stream the server had opened, then 404: that session is gone, one re-initialize', async () => {
    // The first GET opens and ends at once (the server is polling); the reconnect is answered 404; the new
    // session's stream opens and stays.
    const { s, client } = await connect((request) => {
      if (request.nth === 0) {
        sse(request.res);
        request.res.end(event('', 'e1'));
        return;
      }
      if (request.nth === 1) {
        sessionNotFound(request);
        return;
      }
      sse(request.res);
    }, 'served-then-gone');
    await expect.poll(() => s.count('initialize'), { timeout: 30_000 }).toBe(2);
    const result = await client.callTool({ name: 'anything', arguments: {} }, undefined, { timeout: 30_000 });
    expect(result.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(s.count('initialize')).toBe(2);
  }, 40_000);
});
