import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { writeNodeReply } from '../../src/server/http.js';
import type { Reply } from '../../src/server/reply.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * The Node direct write path (`writeNodeReply`): a Reply written to a `ServerResponse` without a Web
 * Response in between keeps the Web path's status, headers, body, stall cut, backpressure cut and
 * client-close handling.
 */

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

async function serve(reply: () => Reply, limits?: Parameters<typeof writeNodeReply>[2]): Promise<number> {
  const server = http.createServer((_req, res) => void writeNodeReply(reply(), res, limits));
  const port = await listenOnLoopback(server);
  stops.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return port;
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('writeNodeReply', () => {
  it('a JSON reply: its status, its headers, a JSON content type and the body', async () => {
    const port = await serve(() => ({
      kind: 'json',
      status: 404,
      headers: { 'Mcp-Session-Id': 'abc' },
      body: { a: 1 },
    }));
    const response = await fetch(`http://127.0.0.1:${port}/`);
    expect(response.status).toBe(404);
    expect(response.headers.get('mcp-session-id')).toBe('abc');
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.json()).toEqual({ a: 1 });
  });

  it('an empty reply: its status and no body', async () => {
    const port = await serve(() => ({ kind: 'empty', status: 202 }));
    const response = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(202);
    expect(await response.text()).toBe('');
  });

  it('an SSE reply: event-stream headers, frames in order, then the end; a start that throws ends it', async () => {
    const port = await serve(() => ({
      kind: 'sse',
      headers: { 'Mcp-Session-Id': 's' },
      start: (sink) => {
        sink.write('data: 1\n\n');
        sink.write('data: 2\n\n');
        setTimeout(() => sink.end(), 10);
      },
    }));
    const response = await fetch(`http://127.0.0.1:${port}/`);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    expect(response.headers.get('mcp-session-id')).toBe('s');
    expect(await response.text()).toBe('data: 1\n\ndata: 2\n\n');
    const failing = await serve(() => ({
      kind: 'sse',
      start: (sink) => {
        sink.write('data: x\n\n');
        throw new Error('broken');
      },
    }));
    expect(await (await fetch(`http://127.0.0.1:${failing}/`)).text()).toBe('data: x\n\n');
  });

  it('a client that goes away closes the sink', async () => {
    let closed = false;
    const port = await serve(() => ({
      kind: 'sse',
      start: (sink) => {
        sink.write('data: open\n\n');
        sink.onClose(() => {
          closed = true;
        });
      },
    }));
    const controller = new AbortController();
    const response = await fetch(`http://127.0.0.1:${port}/`, { signal: controller.signal });
    const reader = response.body?.getReader();
    await reader?.read();
    controller.abort();
    await until(() => closed, 10_000, 'the sink to close');
    expect(closed).toBe(true);
  });

  it('a producer that does not wait outruns a reader that reads nothing: cut past the bound; a paced one is released by the stall cut', async () => {
    const frame = `data: ${'s'.repeat(64 * 1024)}\n\n`;
    const outcome = { written: 0, closed: false, done: false, waits: 0, lastWaitMs: 0 };
    const port = await serve(
      () => ({
        kind: 'sse',
        start: async (sink) => {
          for (let i = 0; i < 2_000 && !sink.closed; i++) {
            sink.write(frame);
            if (!sink.closed) outcome.written++;
            const wait = sink.whenWritable?.();
            if (wait) {
              outcome.waits++;
              const from = Date.now();
              await wait;
              outcome.lastWaitMs = Date.now() - from;
            }
          }
          outcome.closed = sink.closed;
          outcome.done = true;
        },
      }),
      { paceBytes: 256 * 1024, stallMs: 300 },
    );
    const socket = net.connect(port, '127.0.0.1');
    socket.pause();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n');
    await until(() => outcome.done, 10_000, 'the producer to stop');
    socket.destroy();
    expect(outcome.waits).toBeGreaterThan(0);
    expect(outcome.closed).toBe(true);
    // The stall watch starts with the first wait, so the last one may be a little shorter than stallMs.
    expect(outcome.lastWaitMs).toBeGreaterThanOrEqual(150);
    expect(outcome.written).toBeLessThan(2_000);

    const unpaced = { written: 0, closed: false };
    const limit = 1024 * 1024;
    const port2 = await serve(
      () => ({
        kind: 'sse',
        start: (sink) => {
          // Not awaiting: 128 MiB at once, far past the bound.
          for (let i = 0; i < 2_000 && !sink.closed; i++) {
            sink.write(frame);
            if (!sink.closed) unpaced.written++;
          }
          unpaced.closed = sink.closed;
        },
      }),
      { maxBufferedBytes: limit, stallMs: 300 },
    );
    const socket2 = net.connect(port2, '127.0.0.1');
    socket2.pause();
    socket2.write('GET / HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n');
    await until(() => unpaced.closed, 10_000, 'the reader to be cut');
    socket2.destroy();
    // Cut once the socket's unsent bytes passed the bound: a few frames past what the kernel took.
    expect(unpaced.written).toBeLessThan(200);
  });
});
