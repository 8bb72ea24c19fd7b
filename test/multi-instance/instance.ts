import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createClient } from 'redis';
import { z } from 'zod';
import { createContinuityServer } from '../../src/index.js';
import { RedisEventLog } from '../../src/redis.js';

/**
 * One server instance of the multi-instance test, run as its own process (so it can be killed with
 * SIGKILL). Env: REDIS_URL, KEY_PREFIX, LEASE_MS. Prints `ready <port>` when it listens. Its tools'
 * side effects are counted in Redis, so the test sees every instance's effects in one place.
 */
const url = process.env.REDIS_URL as string;
const keyPrefix = process.env.KEY_PREFIX as string;
const effects = createClient({ url });
effects.on('error', () => undefined);
await effects.connect();

const label = `pid ${process.pid}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function mcpServer(): McpServer {
  const server = new McpServer({ name: 'instance', version: '1.0.0' });
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text: `${text} @ ${label}` }],
  }));
  server.registerTool('charge', { inputSchema: { key: z.string(), ms: z.number() } }, async ({ key, ms }) => {
    await effects.incr(`${keyPrefix}charges:${key}`);
    await effects.set(`${keyPrefix}ran:${key}`, label);
    await sleep(ms);
    return { content: [{ type: 'text', text: `charged ${key} @ ${label}` }] };
  });
  server.registerTool(
    'chatty',
    { inputSchema: { count: z.number(), intervalMs: z.number() }, annotations: { readOnlyHint: true } },
    async ({ count, intervalMs }, extra) => {
      for (let n = 1; n <= count; n++) {
        await sleep(intervalMs);
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken: extra._meta?.progressToken ?? 'chatty', progress: n, total: count },
        });
      }
      return { content: [{ type: 'text', text: `sent ${count} @ ${label}` }] };
    },
  );
  return server;
}

const continuity = createContinuityServer({
  createMcpServer: () => mcpServer(),
  eventLog: new RedisEventLog({ url, keyPrefix, onError: () => undefined }),
  instanceLeaseMs: Number(process.env.LEASE_MS ?? 1000),
  heartbeatMs: 0,
  retryMs: 50,
  onError: (error) => console.error(`${label}:`, error),
});
const server = http.createServer(continuity.nodeHandler);
server.listen(0, '127.0.0.1', () => {
  console.log(`ready ${(server.address() as AddressInfo).port}`);
});
process.on('SIGTERM', () => {
  void continuity.close().then(() => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
});
