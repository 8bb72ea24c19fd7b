import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../src/testing/index.js';

/** The fault proxy itself: each fault does what it says, against a real HTTP server on loopback. */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(options: { idleTimeoutMs?: number; latencyMs?: number } = {}) {
  const server = http.createServer((req, res) => {
    if (req.url === '/slow') {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.write('a');
      setTimeout(() => res.end('b'), 300);
      return;
    }
    res.end('hello');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const proxy = await FaultProxy.start({
    target: { host: '127.0.0.1', port: (server.address() as AddressInfo).port },
    ...options,
  });
  cleanups.push(async () => {
    await proxy.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return proxy;
}

describe('FaultProxy', () => {
  it('forwards', async () => {
    const proxy = await setup();
    expect(await (await fetch(proxy.url('/'))).text()).toBe('hello');
  });

  it('answers the next connections with an injected status, then forwards again', async () => {
    const proxy = await setup();
    proxy.failNext(2, 503);
    const statuses = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await fetch(proxy.url('/'), { headers: { Connection: 'close' } })).status);
    expect(statuses).toEqual([503, 503, 200]);
  });

  it('resets a connection mid-response: the client sees the reset', async () => {
    const proxy = await setup();
    const response = await fetch(proxy.url('/slow'));
    const reader = response.body?.getReader();
    await reader?.read();
    expect(proxy.reset((c) => c.label === 'GET /slow')).toBe(1);
    await expect(reader?.read()).rejects.toThrow();
  });

  it('cuts connections idle longer than the idle timeout', async () => {
    const proxy = await setup({ idleTimeoutMs: 100 });
    const cuts: string[] = [];
    proxy.on('fault', (e) => e.type === 'cut' && cuts.push(`${e.reason} ${e.label}`));
    const response = await fetch(proxy.url('/slow'));
    await expect(response.text()).rejects.toThrow();
    expect(cuts).toEqual(['idle GET /slow']);
  });

  it('latency delays each way by the set time, and the bytes of a line keep their order when it drops', async () => {
    const proxy = await setup({ latencyMs: 150 });
    const started = performance.now();
    const response = await fetch(proxy.url('/slow'));
    // Request and answer each waited 150 ms: the head cannot come sooner than 300 ms after the send.
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    const reader = response.body?.getReader();
    const first = await reader?.read();
    proxy.setLatency(0);
    const rest = [];
    for (let chunk = await reader?.read(); chunk && !chunk.done; chunk = await reader?.read())
      rest.push(Buffer.from(chunk.value).toString());
    expect(Buffer.from(first?.value ?? new Uint8Array()).toString() + rest.join('')).toBe('ab');
  });

  it('an outage resets open connections and refuses new ones until it is over', async () => {
    const proxy = await setup();
    const response = await fetch(proxy.url('/slow'));
    const reader = response.body?.getReader();
    await reader?.read();
    proxy.outage(300);
    await expect(reader?.read()).rejects.toThrow();
    expect((await fetch(proxy.url('/'), { headers: { Connection: 'close' } })).status).toBe(503);
    await new Promise((r) => setTimeout(r, 350));
    expect((await fetch(proxy.url('/'), { headers: { Connection: 'close' } })).status).toBe(200);
  });

  it('a black hole forwards nothing and closes nothing', async () => {
    const proxy = await setup();
    const response = await fetch(proxy.url('/slow'));
    const reader = response.body?.getReader();
    await reader?.read();
    proxy.blackhole();
    const next = reader?.read();
    const winner = await Promise.race([
      next?.then(() => 'data'),
      new Promise((r) => setTimeout(() => r('silence'), 500)),
    ]);
    expect(winner).toBe('silence');
    expect(proxy.connections.size).toBe(1);
  });
});
