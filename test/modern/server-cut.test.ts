import { createServer, type Server as HttpServer } from 'node:http';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * Without the continuity extension a 2026-07-28 request follows the spec: closing its response stream
 * cancels it. A balancer that cuts idle connections after 300 ms, during a 2.5 s `charge`.
 */
describe('2026-07-28 without the extension: a cut stream is a cancellation', () => {
  // The cut comes at ~300 ms; the 2.5 s charge leaves a wide margin for a stalled event loop.
  const CHARGE_MS = 2_500;
  const IDLE_MS = 300;
  let continuity: ContinuityServer;
  let http: HttpServer;
  let proxy: FaultProxy;
  let charges = 0;
  const aborts: number[] = [];
  let started = 0;
  let finished!: Promise<void>;
  let finish!: () => void;
  let progressCharges = 0;
  const progressAborts: number[] = [];
  let finishProgress!: () => void;
  const progressFinished = new Promise<void>((r) => {
    finishProgress = r;
  });

  beforeAll(async () => {
    finished = new Promise((r) => {
      finish = r;
    });
    continuity = createContinuityServer({
      createMcpServer: () => new McpServerV1({ name: 'cut', version: '1.0.0' }),
      modern: {
        createServer: () => {
          const server = new McpServerV2({ name: 'cut', version: '1.0.0' });
          server.registerTool(
            'charge',
            { inputSchema: z.object({ cents: z.number() }) },
            async (_args, ctx) => {
              started = Date.now();
              ctx.mcpReq.signal.addEventListener('abort', () => aborts.push(Date.now() - started), {
                once: true,
              });
              // A tool that ignores its signal: the side effect happens anyway.
              await new Promise((r) => setTimeout(r, CHARGE_MS));
              charges++;
              finish();
              return { content: [{ type: 'text', text: 'charged' }] };
            },
          );
          server.registerTool(
            'chargeWithProgress',
            { inputSchema: z.object({ cents: z.number() }) },
            async (_args, ctx) => {
              const t = Date.now();
              ctx.mcpReq.signal.addEventListener('abort', () => progressAborts.push(Date.now() - t), {
                once: true,
              });
              const token = ctx.mcpReq._meta?.progressToken;
              if (token !== undefined)
                await ctx.mcpReq.notify({
                  method: 'notifications/progress',
                  params: { progressToken: token, progress: 0 },
                });
              await new Promise((r) => setTimeout(r, CHARGE_MS));
              progressCharges++;
              finishProgress();
              return { content: [{ type: 'text', text: 'charged' }] };
            },
          );
          return server;
        },
      },
    });
    http = createServer(continuity.nodeHandler);
    const port = await listenOnLoopback(http);
    // The idle timeout is armed after each client connects (`connectThenArm`): under load the set-up
    // requests could sit idle past 300 ms and be cut, which is not what this suite is about.
    proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port } });
  });
  async function connectThenArm(client: ClientV2): Promise<void> {
    proxy.setIdleTimeout(undefined);
    await client.connect(new TransportV2(proxy.url()));
    proxy.setIdleTimeout(IDLE_MS);
  }
  afterAll(async () => {
    await proxy.close();
    await continuity.close();
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  });

  it('the tool’s abort signal fires at the cut, the caller gets fetch failed, the charge completes anyway', async () => {
    const client = new ClientV2(
      { name: 'v2', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    // The 2.5 s call is what sits idle.
    await connectThenArm(client);
    const t0 = Date.now();
    const outcome = await client.callTool({ name: 'charge', arguments: { cents: 100 } }).then(
      () => 'result',
      (e: unknown) => String((e as Error).message ?? e),
    );
    const callMs = Date.now() - t0;
    // Usually `fetch failed`; under load undici may name the closed socket differently. Never a result.
    expect(outcome).not.toBe('result');
    expect(callMs).toBeLessThan(CHARGE_MS);
    await finished;
    expect(aborts).toHaveLength(1);
    expect(aborts[0]).toBeGreaterThan(0);
    expect(aborts[0]).toBeLessThan(CHARGE_MS);
    expect(charges).toBe(1);
    console.log(
      `cut: caller got "${outcome}" after ${callMs} ms; abort signal at ${aborts[0]} ms; charges ${charges}`,
    );
    await client.close();
  }, 20_000);

  it('a cut after a progress event also cancels; the v2 client then waits for its request timeout', async () => {
    const client = new ClientV2(
      { name: 'v2', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await connectThenArm(client);
    const t0 = Date.now();
    const outcome = await client
      .callTool(
        { name: 'chargeWithProgress', arguments: { cents: 100 } },
        { onprogress: () => undefined, timeout: 3_000 },
      )
      .then(
        () => 'result',
        (e: unknown) => String((e as Error).message ?? e),
      );
    const callMs = Date.now() - t0;
    await progressFinished;
    expect(progressAborts).toHaveLength(1);
    expect(progressAborts[0]).toBeLessThan(CHARGE_MS);
    expect(progressCharges).toBe(1);
    expect(outcome).not.toBe('result');
    console.log(
      `cut after progress: caller got "${outcome}" after ${callMs} ms; abort at ${progressAborts[0]} ms`,
    );
    await client.close();
  }, 20_000);
});
