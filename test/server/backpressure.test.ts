import http from 'node:http';
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseEventId } from '../../machines/event-id.js';
import { createContinuityServer, MemoryEventLog } from '../../src/index.js';
import { SSE_MAX_BUFFERED_BYTES, toResponse, writeNodeResponse } from '../../src/server/http.js';
import { SSE_PACE_BYTES, type SseSink } from '../../src/server/sse.js';
import { listenOnLoopback } from '../support/listen.js';
import { RawClient, type SseEvent } from './harness.js';

/**
 * Server write backpressure. Every event is stored before it is written, so a reader too slow to keep up
 * loses nothing when its response is ended: it resumes with Last-Event-ID. What must not happen is the
 * server buffering an unread stream without bound.
 */

// A forced collection, so the memory a test measures is what is still referenced.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const MiB = 1024 * 1024;

describe('SSE backpressure, Web response', () => {
  it('an unread response queues at most its limit, then ends after what it queued', async () => {
    const limit = MiB;
    const frame = `data: ${'x'.repeat(100 * 1024)}\n\n`;
    let sink: SseSink | undefined;
    let accepted = 0;
    const response = toResponse(
      {
        kind: 'sse',
        start: (s) => {
          sink = s;
          // 10 MiB written at once, nobody reading.
          for (let i = 0; i < 100 && !s.closed; i++) {
            s.write(frame);
            if (!s.closed) accepted++;
          }
        },
      },
      { maxBufferedBytes: limit },
    );
    expect(sink?.closed).toBe(true);
    expect(accepted * frame.length).toBeGreaterThanOrEqual(limit);
    expect(accepted * frame.length).toBeLessThanOrEqual(limit + frame.length);
    // What was queued is still delivered, then the body ends (the client resumes from there).
    const text = await response.text();
    expect(text.length).toBe(accepted * frame.length);
  });

  it('pacing: past the pace limit a producer is told to wait, and released as the reader takes the backlog', async () => {
    const frame = `data: ${'z'.repeat(100 * 1024)}\n\n`;
    let sink: SseSink | undefined;
    const response = toResponse(
      {
        kind: 'sse',
        start: (s) => {
          sink = s;
        },
      },
      { maxBufferedBytes: 8 * MiB, paceBytes: MiB },
    );
    const s = sink as SseSink;
    let written = 0;
    while (s.whenWritable?.() === undefined && written < 100) {
      s.write(frame);
      written++;
    }
    // It had to wait just past the pace limit, long before the cut-off.
    expect(written * frame.length).toBeGreaterThan(MiB);
    expect(written * frame.length).toBeLessThanOrEqual(MiB + frame.length);
    expect(s.closed).toBe(false);
    let released = false;
    const wait = s.whenWritable?.()?.then(() => {
      released = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(released).toBe(false);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let taken = 0;
    while (!released && taken < written) {
      await reader.read();
      taken++;
      await new Promise((r) => setImmediate(r));
    }
    await wait;
    expect(released).toBe(true);
    // Released once the reader took the backlog below the limit, not only at the very end.
    expect(taken).toBeLessThan(written);
    s.end();
    await reader.cancel();
  });

  it('pacing on a Web response: a reader that takes nothing releases its producer by ending; one that is slow but reads does not', async () => {
    const frame = `data: ${'w'.repeat(64 * 1024)}\n\n`;
    /** A producer that writes `frames` frames, waiting whenever told to; resolves with how it ended. */
    const produce = (frames: number) => {
      let sink: SseSink | undefined;
      let written = 0;
      const done = new Promise<{ written: number; closed: boolean }>((resolve) => {
        const response = toResponse(
          {
            kind: 'sse',
            start: async (s) => {
              sink = s;
              for (; written < frames && !s.closed; written++) {
                s.write(frame);
                await s.whenWritable?.();
              }
              resolve({ written, closed: s.closed });
            },
          },
          { maxBufferedBytes: 8 * MiB, paceBytes: 256 * 1024, stallMs: 150 },
        );
        produced.push(response);
      });
      return { done, sink: () => sink };
    };
    const produced: Response[] = [];

    // Nobody reads: the producer is held, then released when the response is ended after the stall time.
    const stalled = produce(200);
    const started = Date.now();
    expect(await stalled.done).toEqual({ written: expect.any(Number), closed: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);

    // A reader that takes a frame every 20 ms (slower than the producer, never idle for 150 ms): paced, not ended.
    const slow = produce(40);
    const reader = (produced[1] as Response).body?.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    let reading = true;
    const readLoop = (async () => {
      while (reading) {
        const { done } = await reader.read();
        if (done) break;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    expect(await slow.done).toEqual({ written: 40, closed: false });
    reading = false;
    slow.sink()?.end();
    await readLoop;
  });

  it('a frame larger than the limit is still written whole: every response makes progress', async () => {
    const big = `data: ${'y'.repeat(2 * MiB)}\n\n`;
    const response = toResponse(
      {
        kind: 'sse',
        start: (s) => {
          s.write(big);
          s.write(big);
          s.end();
        },
      },
      { maxBufferedBytes: MiB },
    );
    expect((await response.text()).length).toBe(big.length);
  });
});

interface FloodState {
  /** Every notification has been handed to the transport. */
  done: boolean;
  /** Sends that have returned. */
  sent: number;
}

/**
 * A tool that sends `count` progress notifications of `bytes` each as fast as it can: awaiting each send
 * (`await`, so the transport can pace it) or not (`fire`, all at once, as a tool that ignores its sends).
 */
function floodServer(state: FloodState, mode: 'await' | 'fire'): McpServer {
  const server = new McpServer({ name: 'flood', version: '1.0.0' });
  server.registerTool(
    'flood',
    { inputSchema: { count: z.number(), bytes: z.number() } },
    async ({ count, bytes }, extra) => {
      const padding = 'p'.repeat(bytes);
      const sends: Array<Promise<void>> = [];
      for (let n = 1; n <= count; n++) {
        const send = extra
          .sendNotification({
            method: 'notifications/progress',
            params: { progressToken: extra._meta?.progressToken ?? 0, progress: n, message: padding },
          })
          .then(() => {
            state.sent++;
          });
        if (mode === 'await') await send;
        else sends.push(send);
      }
      state.done = true;
      await Promise.all(sends);
      return { content: [{ type: 'text', text: `flooded ${count}` }] };
    },
  );
  return server;
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/**
 * A server whose `flood` tool sends `count` notifications of `bytes` each, an initialized session, and the
 * call's POST, whose response is not read. `before`: the process's array buffers before the call.
 */
async function floodCall(mode: 'await' | 'fire', count: number, bytes: number) {
  const state: FloodState = { done: false, sent: 0 };
  const continuity = createContinuityServer({
    createMcpServer: () => floodServer(state, mode),
    eventLog: new MemoryEventLog({ maxEventsPerStream: count + 10 }),
    heartbeatMs: 0,
    onError: () => undefined,
  });
  const server = http.createServer(continuity.nodeHandler);
  const port = await listenOnLoopback(server);
  stop = async () => {
    await continuity.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
  const client = new RawClient(`http://127.0.0.1:${port}/mcp`);
  await client.initialize();
  gc();
  const before = process.memoryUsage().arrayBuffers;
  const call = await fetch(client.url, {
    method: 'POST',
    headers: client.headers(),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'flood', arguments: { count, bytes }, _meta: { progressToken: 7 } },
    }),
  });
  return { state, client, call, before };
}

describe('the sse option of createContinuityServer', () => {
  it('paceBytes sets how far an unread response may fall behind before the tool waits (fetch handler)', async () => {
    const heldAt = async (sse: { paceBytes: number } | undefined) => {
      const state: FloodState = { done: false, sent: 0 };
      const continuity = createContinuityServer({
        createMcpServer: () => floodServer(state, 'await'),
        heartbeatMs: 0,
        onError: () => undefined,
        ...(sse ? { sse } : {}),
      });
      const url = 'http://localhost/mcp';
      const headers = {
        Accept: 'application/json, text/event-stream',
        'Content-Type': 'application/json',
        'MCP-Protocol-Version': '2025-11-25',
      };
      const post = (body: unknown, more: Record<string, string> = {}) =>
        continuity.fetch(
          new Request(url, { method: 'POST', headers: { ...headers, ...more }, body: JSON.stringify(body) }),
        );
      const init = await post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      });
      const session = { 'Mcp-Session-Id': init.headers.get('mcp-session-id') as string };
      await init.text();
      await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session)).text();
      // 64 KiB notifications; the call's response is never read.
      const call = await post(
        {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'flood', arguments: { count: 100, bytes: 64 * 1024 }, _meta: { progressToken: 2 } },
        },
        session,
      );
      await until(() => state.sent > 0, 5_000, 'the first sends');
      let held = -1;
      for (let i = 0; i < 20 && held !== state.sent; i++) {
        held = state.sent;
        await new Promise((r) => setTimeout(r, 50));
      }
      await call.body?.cancel();
      await continuity.close();
      return held;
    };
    // With nothing read and no socket, the send that takes the backlog past the limit waits: the tool has
    // completed just under limit / frame size sends (a frame is 64 KiB plus its JSON and SSE framing).
    const byDefault = await heldAt(undefined);
    const tight = await heldAt({ paceBytes: 256 * 1024 });
    expect(byDefault).toBeGreaterThanOrEqual(SSE_PACE_BYTES / (64 * 1024) - 2);
    expect(byDefault).toBeLessThanOrEqual(SSE_PACE_BYTES / (64 * 1024));
    expect(tight).toBeGreaterThanOrEqual(2);
    expect(tight).toBeLessThanOrEqual(4);
  });
});

describe('SSE backpressure over HTTP', () => {
  it('a paced producer is released when its reader stalls: a socket that takes nothing for the stall time is destroyed', async () => {
    const frame = `data: ${'s'.repeat(64 * 1024)}\n\n`;
    const outcome = { waits: 0, lastWaitMs: 0, closed: false, done: false };
    const server = http.createServer((_req, res) => {
      const response = toResponse(
        {
          kind: 'sse',
          start: async (sink) => {
            // At most 128 MiB: far more than the kernel buffers of a socket nobody reads.
            for (let i = 0; i < 2_000 && !sink.closed; i++) {
              sink.write(frame);
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
        },
        { paceBytes: 256 * 1024 },
      );
      void writeNodeResponse(response, res, 300);
    });
    const port = await listenOnLoopback(server);
    stop = async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    };
    // A client that sends its request and then never reads a byte.
    const socket = net.connect(port, '127.0.0.1');
    socket.pause();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n');
    await until(() => outcome.done, 10_000, 'the producer to stop');
    socket.destroy();
    // It waited, and its last wait ended with the response, after the stall time.
    expect(outcome.waits).toBeGreaterThan(0);
    expect(outcome.closed).toBe(true);
    expect(outcome.lastWaitMs).toBeGreaterThanOrEqual(250);
  });

  it('a producer that does not wait for its sends outruns a reader that stops reading: the reader is cut after a bounded backlog, then resumes with Last-Event-ID and loses nothing', async () => {
    const count = 1_200;
    const bytes = 64 * 1024; // 75 MiB in all: far more than the limit plus what the kernel buffers
    const { state, client, call, before } = await floodCall('fire', count, bytes);
    expect(call.status).toBe(200);
    await until(() => state.done, 30_000, 'the tool to append every notification');
    await new Promise((r) => setTimeout(r, 200));
    gc();
    const buffered = process.memoryUsage().arrayBuffers - before;
    // Unbounded, the server held everything the kernel had not taken (~65 MiB here).
    expect(buffered).toBeLessThan(SSE_MAX_BUFFERED_BYTES + 4 * MiB);

    // Now read: the response holds part of the stream and ends cleanly, with no `event: close`.
    const first = await readAll(call);
    expect(first.some((e) => e.event === 'close')).toBe(false);
    const progressOf = (events: SseEvent[]) =>
      events
        .filter((e) => e.data !== '')
        .map((e) => JSON.parse(e.data) as { params?: { progress: number }; result?: unknown });
    const received = progressOf(first);
    expect(received.length).toBeGreaterThan(0);
    expect(received.length).toBeLessThan(count);

    // Resume until the answer is in. A replay is bounded the same way, so it may take a few responses.
    let cursor = first.filter((e) => e.id).at(-1)?.id as string;
    for (let round = 0; round < 50 && !received.some((m) => m.result); round++) {
      const resumed = await fetch(client.url, {
        headers: { ...client.headers({ Accept: 'text/event-stream' }), 'Last-Event-ID': cursor },
      });
      expect(resumed.status).toBe(200);
      const events = await readAll(resumed);
      received.push(...progressOf(events));
      cursor = events.filter((e) => e.id).at(-1)?.id ?? cursor;
      expect(parseEventId(cursor)).toBeDefined();
    }
    const progress = received.filter((m) => m.params).map((m) => m.params?.progress);
    expect(progress).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    expect(received.filter((m) => m.result)).toHaveLength(1);
  }, 60_000);

  it('a producer that awaits its sends is paced by its reader: held while the reader lags, then one response carries everything, uncut', async () => {
    const count = 1_200;
    const bytes = 64 * 1024; // 75 MiB in all, as above
    const { state, call, before } = await floodCall('await', count, bytes);
    expect(call.status).toBe(200);
    // Nobody reads: the tool goes as far as the pace limit and what the kernel takes, then waits.
    await until(() => state.sent > 0, 10_000, 'the first sends');
    let held = -1;
    for (let i = 0; i < 50 && held !== state.sent; i++) {
      held = state.sent;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(state.sent).toBe(held);
    expect(state.done).toBe(false);
    expect(held * bytes).toBeLessThan(SSE_PACE_BYTES + 16 * MiB);
    gc();
    // Unpaced, the server held everything it could not write (cut off at 16 MiB, see above).
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(SSE_PACE_BYTES + 4 * MiB);

    // Now read: the tool goes on at the reader's pace, and the one response ends with the answer.
    const events = await readAll(call);
    const messages = events
      .filter((e) => e.data !== '')
      .map((e) => JSON.parse(e.data) as { params?: { progress: number }; result?: unknown });
    const progress = messages.filter((m) => m.params).map((m) => m.params?.progress);
    expect(progress).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    expect(messages.at(-1)?.result).toBeDefined();
    expect(state.done).toBe(true);
  }, 60_000);
});

/** Reads a whole SSE body into events (a small parser: frames are `field: value` lines). */
async function readAll(response: Response): Promise<SseEvent[]> {
  const text = await response.text();
  const events: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    if (block === '' || block.startsWith(':')) continue;
    const fields: Record<string, string> = {};
    for (const line of block.split('\n')) {
      const at = line.indexOf(': ');
      if (at > 0) fields[line.slice(0, at)] = line.slice(at + 2);
      else if (line.endsWith(':')) fields[line.slice(0, -1)] = '';
    }
    if ('data' in fields || 'event' in fields)
      events.push({ id: fields.id, event: fields.event, data: fields.data ?? '' });
  }
  return events;
}
