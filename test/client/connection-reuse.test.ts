import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { ContinuityClientTransport } from '../../src/index.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * A request stream is done as soon as its answer is in, and the server's end of the body may come a
 * moment later (a proxy, a slow network). Aborting the fetch then would destroy a connection that could
 * be reused; the transport reads the rest of the body instead (src/client/exchange.ts, DRAIN_MS).
 */

const END_DELAY_MS = 10;

/** Just enough MCP over bare node:http: every tool call is answered at once, its body ended 10 ms later. */
async function lateEndingServer() {
  const sockets = { opened: 0, closed: 0 };
  const server = http.createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST') {
        res.writeHead(200).end();
        return;
      }
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        id?: number;
        method?: string;
        params?: { protocolVersion?: string; arguments?: { text?: string } };
      };
      if (message.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      if (message.method === 'initialize') {
        const result = {
          protocolVersion: message.params?.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: 'late', version: '1' },
        };
        res.writeHead(200, { 'Content-Type': 'application/json', 'Mcp-Session-Id': 'late-session' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
        return;
      }
      const result = { content: [{ type: 'text', text: message.params?.arguments?.text ?? '' }] };
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(`id: s${message.id}-0\ndata: \n\n`);
      res.write(
        `id: s${message.id}-1\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result })}\n\n`,
      );
      setTimeout(() => res.end(), END_DELAY_MS);
    });
  });
  server.on('connection', (socket) => {
    sockets.opened++;
    socket.on('close', () => sockets.closed++);
  });
  const port = await listenOnLoopback(server);
  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    sockets,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

describe('connection reuse', () => {
  it('a call whose body ends after its answer leaves its connection open for the next call', async () => {
    const server = await lateEndingServer();
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(new ContinuityClientTransport(server.url, { deleteOnClose: false }));
    cleanup = async () => {
      await client.close();
      await server.close();
    };
    for (let i = 0; i < 5; i++) {
      const result = await client.callTool({ name: 'echo', arguments: { text: `call ${i}` } });
      expect((result.content as Array<{ text: string }>)[0]?.text).toBe(`call ${i}`);
      // The next call goes out while the previous body is still open: it may need a connection of its own.
      await new Promise((r) => setTimeout(r, END_DELAY_MS * 2));
    }
    // Aborted after each answer, every call's connection was destroyed (5 closes, 6+ connections).
    expect(server.sockets.closed).toBe(0);
    // initialize, notifications/initialized and the GET that runs beside it open up to three; the five
    // calls, one at a time, share one more.
    expect(server.sockets.opened).toBeLessThanOrEqual(4);
  });
});
