import http from 'node:http';
import net from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ModernCallOutput } from '../../machines/client/modern-call.machine.js';
import { ModernCallReason } from '../../machines/client/modern-call-decide.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { isOutcomeUnknown, OUTCOME_UNKNOWN } from '../../src/client/outcome.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { listenOnLoopback } from '../support/listen.js';
import { type OfficialServer, startOfficialServer } from './client-official-server.js';

/**
 * The official v2 `Client` pinned to 2026-07-28, with `continuityFetch()` as its transport's fetch (the one
 * line an application changes), against the OFFICIAL v2 server (no extension) behind a balancer that cuts
 * connections idle for 300 ms. Real HTTP on 127.0.0.1 throughout.
 */

type Ending = ModernCallOutput & { toolName: string };

let server: OfficialServer;
let proxy: FaultProxy;
let endings: Ending[];
let cuts: number[];

beforeEach(async () => {
  server = await startOfficialServer();
  proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: server.port }, idleTimeoutMs: 300 });
  endings = [];
  cuts = [];
  proxy.on('fault', (e) => {
    if (e.type === 'cut') cuts.push(performance.now());
  });
});

afterEach(async () => {
  await proxy.close();
  await server.close();
});

async function connect(
  url: URL,
  fetchImpl: typeof fetch = continuityFetch({ onCallEnded: (e) => endings.push(e) }),
) {
  const client = new Client(
    { name: 'client-fetch-test', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(new StreamableHTTPClientTransport(url, { fetch: fetchImpl }));
  return client;
}

function lastCutBefore(at: number, since: number): number {
  const cut = cuts.filter((t) => t >= since && t <= at).at(-1);
  if (cut === undefined) throw new Error('no cut between the call and its end');
  return cut;
}

/** Waits (bounded) until `check` holds. */
async function until(check: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function settle<T>(p: Promise<T>): Promise<{ value?: T; error?: unknown; at: number }> {
  try {
    const value = await p;
    return { value, at: performance.now() };
  } catch (error) {
    return { error, at: performance.now() };
  }
}

describe('continuityFetch with the official v2 client on 2026-07-28 (official server, no extension)', () => {
  it('a cut during a charge ends as outcome unknown well under a second after the cut; one charge', async () => {
    const client = await connect(proxy.url());
    expect(client.getNegotiatedProtocolVersion?.()).toBe('2026-07-28');
    const started = performance.now();
    const r = await settle(client.callTool({ name: 'charge', arguments: { cents: 500 } }));
    expect(isOutcomeUnknown(r.error)).toBe(true);
    const err = r.error as { code: number; data: { reason: string; idempotencyKey?: string } };
    expect(err.code).toBe(OUTCOME_UNKNOWN);
    expect(err.data.reason).toBe(ModernCallReason.cutBeforeResponse);
    expect(err.data.idempotencyKey).toBeUndefined();
    // The cut that ended the call: the last one before it ended (idle pooled connections are cut too).
    const cut = lastCutBefore(r.at, started);
    const afterCut = r.at - cut;
    expect(afterCut).toBeLessThan(1_000);
    // The call ended on its first attempt: no second charge was ever sent.
    expect(endings).toMatchObject([{ toolName: 'charge', outcome: 'outcome-unknown', attempts: 0 }]);
    // The server charged once (it does not stop on a hang-up): wait for it, then count.
    await until(() => server.charges() >= 1, 5_000);
    expect(server.chargeStarts()).toBe(1);
    expect(server.charges()).toBe(1);
    console.log(`cut during a charge: outcome unknown ${afterCut.toFixed(0)} ms after the cut`);
    await client.close();
  });

  it('a cut after a progress notification ends as outcome unknown at once, not after the 60 s timeout', async () => {
    const client = await connect(proxy.url());
    const progress: unknown[] = [];
    const started = performance.now();
    const r = await settle(
      client.callTool(
        { name: 'charge_with_progress', arguments: { cents: 700 } },
        { onprogress: (p) => progress.push(p) },
      ),
    );
    expect(isOutcomeUnknown(r.error)).toBe(true);
    expect((r.error as { data: { reason: string } }).data.reason).toBe(ModernCallReason.cutMidStream);
    expect(progress).toHaveLength(1);
    const cut = lastCutBefore(r.at, started);
    const afterCut = r.at - cut;
    expect(afterCut).toBeLessThan(1_000);
    expect(r.at - started).toBeLessThan(5_000);
    expect(endings).toMatchObject([{ outcome: 'outcome-unknown', attempts: 0 }]);
    await until(() => server.charges() >= 1, 5_000);
    expect(server.chargeStarts()).toBe(1);
    console.log(`cut after progress: outcome unknown ${afterCut.toFixed(0)} ms after the cut`);
    await client.close();
  });

  it('a read-only tool is re-issued through the same faults and succeeds', async () => {
    const client = await connect(proxy.url());
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === 'lookup')?.annotations?.readOnlyHint).toBe(true);
    const result = await client.callTool({ name: 'lookup', arguments: { account: 'acme' } });
    expect(result.content).toEqual([{ type: 'text', text: 'balance of acme: 42' }]);
    expect(cuts.length).toBeGreaterThanOrEqual(1);
    expect(server.lookups()).toBe(2);
    expect(endings).toMatchObject([
      { toolName: 'lookup', outcome: 'answered', reason: ModernCallReason.answered, attempts: 1 },
    ]);
    await client.close();
  });

  it('a refused connection is re-issued (nothing left, so even a charge), and the charge is made once', async () => {
    const closedPort = await freePort();
    let refuseNext = false;
    // The real network below continuityFetch: the first tools/call POST goes to a port nobody listens on.
    const network: typeof fetch = (input, init) => {
      if (refuseNext) {
        refuseNext = false;
        return fetch(`http://127.0.0.1:${closedPort}/mcp`, init);
      }
      return fetch(input, init);
    };
    const client = await connect(
      server.url,
      continuityFetch({ fetch: network, onCallEnded: (e) => endings.push(e) }),
    );
    refuseNext = true;
    const result = await client.callTool({ name: 'charge', arguments: { cents: 100 } });
    expect(result.content).toEqual([{ type: 'text', text: 'charged 100' }]);
    expect(endings).toMatchObject([{ outcome: 'answered', attempts: 1 }]);
    expect(server.chargeStarts()).toBe(1);
    await client.close();
  });

  it('a definite refusal before any message reaches the SDK as it came (here a 403), not as outcome unknown', async () => {
    // A gateway in front of the server refuses the first tools/call with a JSON-RPC body.
    const gateway = http.createServer((_req, res) => {
      res.writeHead(403, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'forbidden by policy' } }),
      );
    });
    const gatewayPort = await listenOnLoopback(gateway);
    let refuseNext = false;
    const network: typeof fetch = (input, init) => {
      if (!refuseNext) return fetch(input, init);
      refuseNext = false;
      return fetch(`http://127.0.0.1:${gatewayPort}/mcp`, init);
    };
    const client = await connect(
      server.url,
      continuityFetch({ fetch: network, onCallEnded: (e) => endings.push(e) }),
    );
    refuseNext = true;
    const r = await settle(client.callTool({ name: 'charge', arguments: { cents: 2 } }));
    expect(isOutcomeUnknown(r.error)).toBe(false);
    // The SDK's own error for a refused POST, with the status and body it would have seen without us.
    expect(r.error).toMatchObject({ data: { status: 403 } });
    expect(String((r.error as Error).message)).toContain('forbidden by policy');
    expect(endings).toMatchObject([{ outcome: 'failed', reason: ModernCallReason.forbidden, attempts: 0 }]);
    expect(server.chargeStarts()).toBe(0);
    await client.close();
    gateway.closeAllConnections();
    await new Promise<void>((resolve) => gateway.close(() => resolve()));
  });

  it('a stalled stream (no byte for the stall timeout) counts as a cut: outcome unknown, promptly', async () => {
    proxy.setIdleTimeout(undefined);
    let blackholedAt = 0;
    const client = await connect(
      proxy.url(),
      continuityFetch({ stallTimeoutMs: 500, onCallEnded: (e) => endings.push(e) }),
    );
    const call = settle(
      client.callTool(
        { name: 'charge_with_progress', arguments: { cents: 9 } },
        {
          onprogress: () => {
            blackholedAt = performance.now();
            proxy.blackhole();
          },
        },
      ),
    );
    const r = await call;
    expect(isOutcomeUnknown(r.error)).toBe(true);
    expect((r.error as { data: { reason: string } }).data.reason).toBe(ModernCallReason.stalled);
    // The stall timeout (500 ms) after the last byte, with margin for a busy machine.
    expect(r.at - blackholedAt).toBeGreaterThanOrEqual(450);
    expect(r.at - blackholedAt).toBeLessThan(1_500);
    expect(endings).toMatchObject([
      { outcome: 'outcome-unknown', reason: ModernCallReason.stalled, attempts: 0 },
    ]);
    await client.close();
  });

  it("the application's cancel ends the call at once as cancelled by the application, never re-issued", async () => {
    const client = await connect(server.url);
    const abort = new AbortController();
    setTimeout(() => abort.abort(new Error('user pressed stop')), 200);
    const started = performance.now();
    const r = await settle(
      client.callTool({ name: 'charge', arguments: { cents: 5 } }, { signal: abort.signal }),
    );
    expect(r.error).toBeDefined();
    expect(r.at - started).toBeLessThan(1_000);
    await until(() => endings.length === 1, 2_000);
    expect(endings).toMatchObject([
      { outcome: 'outcome-unknown', reason: ModernCallReason.cancelledByApplication, attempts: 0 },
    ]);
    await client.close();
  });

  it('without faults a call answers as it would without continuityFetch, progress included', async () => {
    const client = await connect(server.url);
    const progress: unknown[] = [];
    const result = await client.callTool(
      { name: 'charge_with_progress', arguments: { cents: 1 } },
      { onprogress: (p) => progress.push(p) },
    );
    expect(result.content).toEqual([{ type: 'text', text: 'charged 1' }]);
    expect(progress).toEqual([{ progress: 0, total: 1 }]);
    await client.close();
  });
});

/** A loopback port with nothing listening on it (bound, then released). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
