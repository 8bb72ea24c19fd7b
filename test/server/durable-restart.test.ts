import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ContinuityClientTransport, isOutcomeUnknown } from '../../src/index.js';
import { RedisEventLog } from '../../src/redis.js';
import { SqliteEventLog } from '../../src/sqlite.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';
import { restartableServer } from '../support/restartable-server.js';
import { type DemoWorld, demoMcpServer } from './harness.js';

/**
 * Sessions outlive the process with a durable log: the server restarts on the same SQLite file, the
 * client resumes the same session, and a call that was running when the process died ends as outcome
 * unknown instead of hanging. Real HTTP on loopback, real SDK Client and McpServer.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

let redis: RedisServer | undefined;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.dispose();
});

type Backend = 'sqlite' | 'redis';

async function durableServer(backend: Backend) {
  const dir = await mkdtemp(join(tmpdir(), 'mcpc-durable-'));
  const path = join(dir, 'log.db');
  const keyPrefix = `durable-${Math.random().toString(36).slice(2)}:`;
  const p = await restartableServer({ retryMs: 20 }, () =>
    backend === 'sqlite'
      ? new SqliteEventLog({ path })
      : new RedisEventLog({ url: redis?.url as string, keyPrefix }),
  );
  cleanups.push(async () => {
    await p.dispose();
    await rm(dir, { recursive: true, force: true });
  });
  return Object.assign(p, { restart: () => p.deploy() });
}

describe.each(['sqlite', 'redis'] as const)('a durable log (%s) across a server restart', (backend) => {
  it('the client resumes the same session; the call that was running ends outcome unknown; the session keeps working', async () => {
    const p = await durableServer(backend);
    const transport = new ContinuityClientTransport(p.url, {
      reconnect: { initialDelayMs: 20, maxDelayMs: 200, jitter: 'none' },
    });
    const client = new Client({ name: 'durable', version: '1.0.0' });
    cleanups.push(() => client.close());
    await client.connect(transport);
    const session = transport.sessionId;
    expect(text(await client.callTool({ name: 'echo', arguments: { text: 'before' } }))).toBe('before');
    const running = client.callTool({ name: 'charge', arguments: { key: 'k', ms: 500 } });
    await new Promise((r) => setTimeout(r, 100));
    await p.restart();
    const err = await running.catch((e) => e);
    expect(err).toBeInstanceOf(McpError);
    expect(isOutcomeUnknown(err)).toBe(true);
    // A shared store (Redis) cannot tell a restart from the death of one of several instances.
    const reason = backend === 'redis' ? 'instance_lost' : 'server_restarted';
    expect((err as McpError).data).toMatchObject({ reason });
    expect(p.world.effects.get('k')).toBe(1);
    expect(transport.sessionId).toBe(session);
    expect(p.continuity.sessionCount()).toBe(1);
    expect(text(await client.callTool({ name: 'echo', arguments: { text: 'after' } }))).toBe('after');
    expect(p.world.servers).toHaveLength(2); // the session's SDK server was re-created, not re-initialized by the client
  });

  it('a request id admitted before the restart is never executed again after it', async () => {
    const p = await durableServer(backend);
    const post = (body: unknown, sessionId?: string) =>
      fetch(p.url, {
        method: 'POST',
        headers: {
          Accept: 'application/json, text/event-stream',
          'Content-Type': 'application/json',
          Connection: 'close', // a pooled socket would die with the restart; that is not what this test is about
          ...(sessionId ? { 'Mcp-Session-Id': sessionId } : {}),
        },
        body: JSON.stringify(body),
      });
    const init = await post({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    const sessionId = init.headers.get('mcp-session-id') as string;
    await init.text();
    const call = {
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'charge', arguments: { key: 'once' } },
    };
    expect(await (await post(call, sessionId)).text()).toContain('charged once');
    await p.restart();
    const again = await (await post(call, sessionId)).text();
    expect(again).toContain('charged once');
    expect(p.world.effects.get('once')).toBe(1);
  });
});

describe('requests that arrive while a session is being restored', () => {
  it('wait for the restore: none runs on a half-restored session, each is answered once', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-durable-'));
    const path = join(dir, 'log.db');
    const world: DemoWorld = { effects: new Map(), servers: [] };
    // The restarted process is slow to build the session's SDK server: the window in which the session is
    // known to the handler but not yet restored is wide enough for every request below to fall into it.
    let slow = false;
    const p = await restartableServer(
      {
        retryMs: 20,
        createMcpServer: async () => {
          if (slow) await new Promise((r) => setTimeout(r, 400));
          return demoMcpServer(world);
        },
      },
      () => new SqliteEventLog({ path }),
    );
    cleanups.push(async () => {
      await p.dispose();
      await rm(dir, { recursive: true, force: true });
    });
    const transport = new ContinuityClientTransport(p.url, {
      reconnect: { initialDelayMs: 20, maxDelayMs: 200, jitter: 'none' },
    });
    const client = new Client({ name: 'restoring', version: '1.0.0' });
    cleanups.push(() => client.close());
    await client.connect(transport);
    expect(text(await client.callTool({ name: 'echo', arguments: { text: 'before' } }))).toBe('before');
    slow = true;
    await p.deploy();
    const calls = await Promise.all(
      Array.from({ length: 4 }, (_, i) => client.callTool({ name: 'charge', arguments: { key: `r${i}` } })),
    );
    for (let i = 0; i < 4; i++) {
      expect(text(calls[i])).toContain(`charged r${i}`);
      expect(world.effects.get(`r${i}`)).toBe(1);
    }
    // One restore for all of them: one SDK server before the deploy and one after.
    expect(world.servers).toHaveLength(2);
  });
});

const text = (r: unknown) => (r as { content: Array<{ text: string }> }).content[0]?.text;
