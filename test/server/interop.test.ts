import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  type StreamableHTTPClientTransportOptions,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  LoggingMessageNotificationSchema,
  type Progress,
  ProgressNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { createParser } from 'eventsource-parser';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ADVERTISEMENT_HEADER, formatAdvertisement } from '../../machines/advertisement.js';
import { JsonRpcCode } from '../../machines/codes.js';
import { parseEventId } from '../../machines/event-id.js';
import { type ContinuityServerOptions, MemoryEventLog } from '../../src/index.js';
import { startServer } from './harness.js';

/**
 * Interoperability with the official SDK client (`Client` + `StreamableHTTPClientTransport`) over real
 * HTTP on 127.0.0.1. The only thing between the two is `Wire`, a `fetch` the transport is given: it records
 * every exchange (and the SSE event ids the client was handed), and can cut one response mid-stream, as a
 * dropped connection would, or hold GETs back. It never changes what the server sent before the cut.
 */

type World = Awaited<ReturnType<typeof startServer>>;

interface Exchange {
  readonly method: string;
  readonly body: string | undefined;
  readonly lastEventId: string | null;
  readonly requestHeaders: Headers;
  status?: number;
  responseHeaders?: Headers;
  /** Ids of the SSE events handed to the client, in order (nothing after a cut). */
  readonly eventIds: string[];
  /** Set once this response was cut. */
  cut: boolean;
}

const isToolCall = (x: Exchange) => x.method === 'POST' && (x.body ?? '').includes('"method":"tools/call"');
const isResume = (x: Exchange) => x.method === 'GET' && x.lastEventId !== null;
const isStandaloneGet = (x: Exchange) => x.method === 'GET' && x.lastEventId === null;
const seqs = (ids: readonly string[]) => ids.map((id) => parseEventId(id)?.seq);
const streamOf = (id: string | undefined) => (id === undefined ? undefined : parseEventId(id)?.stream);

class Wire {
  readonly exchanges: Exchange[] = [];
  private cutPlan: { match: (x: Exchange) => boolean; frames: number } | undefined;
  private hold: { match: (x: Exchange) => boolean; gate: Promise<void>; open: () => void } | undefined;

  /** The next response matching `match` is cut after `frames` complete SSE frames (priming included). */
  cutNext(match: (x: Exchange) => boolean, frames: number): void {
    this.cutPlan = { match, frames };
  }

  /** Requests matching `match` wait (before reaching the server) until `release()`. */
  holdBack(match: (x: Exchange) => boolean): void {
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    this.hold = { match, gate, open };
  }

  release(): void {
    this.hold?.open();
    this.hold = undefined;
  }

  find(match: (x: Exchange) => boolean): Exchange | undefined {
    return this.exchanges.find(match);
  }

  filter(match: (x: Exchange) => boolean): Exchange[] {
    return this.exchanges.filter(match);
  }

  readonly fetch: FetchLike = async (url, init) => {
    const headers = new Headers(init?.headers);
    const exchange: Exchange = {
      method: (init?.method ?? 'GET').toUpperCase(),
      body: typeof init?.body === 'string' ? init.body : undefined,
      lastEventId: headers.get('last-event-id'),
      requestHeaders: headers,
      eventIds: [],
      cut: false,
    };
    this.exchanges.push(exchange);
    if (this.hold?.match(exchange)) await this.hold.gate;
    const response = await fetch(url, init);
    exchange.status = response.status;
    exchange.responseHeaders = response.headers;
    if (!response.body || !(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      return response;
    }
    let cutAfter: number | undefined;
    if (this.cutPlan?.match(exchange)) {
      cutAfter = this.cutPlan.frames;
      this.cutPlan = undefined;
    }
    const body = relay(response.body, exchange, cutAfter);
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/**
 * Passes an SSE body through, recording event ids. With `cutAfter`, stops after that many complete frames:
 * the connection to the server is dropped at once, and the client's stream errors shortly after (late
 * enough that what was passed through is parsed first; an errored stream discards queued chunks).
 */
function relay(
  source: ReadableStream<Uint8Array>,
  exchange: Exchange,
  cutAfter?: number,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  const decoder = new TextDecoder();
  const parser = createParser({
    onEvent: (e) => {
      if (e.id) exchange.eventIds.push(e.id);
    },
  });
  let frames = 0;
  let previous = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (exchange.cut) {
        await new Promise((r) => setTimeout(r, 50));
        controller.error(new TypeError('terminated: connection cut by the test'));
        return;
      }
      const { done, value } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      let chunk = value;
      if (cutAfter !== undefined) {
        for (let i = 0; i < value.length; i++) {
          const byte = value[i] as number;
          if (byte === 10 && previous === 10) {
            frames++;
            previous = 0;
            if (frames === cutAfter) {
              chunk = value.slice(0, i + 1);
              exchange.cut = true;
              break;
            }
          } else {
            previous = byte;
          }
        }
      }
      parser.feed(decoder.decode(chunk, { stream: true }));
      controller.enqueue(chunk);
      if (exchange.cut) await reader.cancel().catch(() => undefined);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

const cleanups: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function start(options: Partial<ContinuityServerOptions> = {}): Promise<World> {
  const world = await startServer(options);
  cleanups.push(() => world.close());
  return world;
}

/** A fresh SDK client; it initializes unless `sessionId` is given (then it only attaches). */
async function connect(world: World, wire: Wire, options: StreamableHTTPClientTransportOptions = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(world.url), { fetch: wire.fetch, ...options });
  const client = new Client({ name: 'interop', version: '1.0.0' });
  const errors: Error[] = [];
  client.onerror = (e) => errors.push(e);
  cleanups.push(() => client.close());
  return { client, transport, errors, connected: client.connect(transport) };
}

/** Reconnection off: a cut stream stays cut until the test resumes it. */
const NO_AUTO_RESUME: StreamableHTTPClientTransportOptions = {
  reconnectionOptions: {
    maxRetries: 0,
    initialReconnectionDelay: 10,
    maxReconnectionDelay: 10,
    reconnectionDelayGrowFactor: 1,
  },
};

const chatty = (count: number, intervalMs: number) =>
  ({ method: 'tools/call', params: { name: 'chatty', arguments: { count, intervalMs } } }) as const;

describe('interop with the official SDK client (StreamableHTTPClientTransport)', () => {
  it('initializes, lists the demo tools, and sees the continuity capability', async () => {
    const world = await start({ sessionIdleTtlMs: 120_000 });
    const wire = new Wire();
    const { client, transport, connected } = await connect(world, wire);
    await connected;

    expect(transport.sessionId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(transport.protocolVersion).toBe('2025-11-25');
    expect(world.continuity.sessionCount()).toBe(1);
    expect(client.getServerVersion()).toMatchObject({ name: 'demo', version: '1.0.0' });

    const capabilities = client.getServerCapabilities();
    expect(capabilities?.tools).toBeDefined();
    expect(capabilities?.logging).toEqual({});
    expect(capabilities?.experimental?.['mcp-continuity']).toMatchObject({
      retentionMs: 600_000,
      maxEventsPerStream: 1000,
      idleTtlMs: 120_000,
      gapSignalling: true,
      duplicateRequestProtection: true,
    });
    expect(capabilities?.experimental?.['mcp-continuity']).toEqual(world.continuity.advertisement);

    // The initialize response also carried the session id and the advertisement header.
    const init = wire.exchanges[0];
    expect(init?.body).toContain('"method":"initialize"');
    expect(init?.responseHeaders?.get('mcp-session-id')).toBe(transport.sessionId);
    expect(init?.responseHeaders?.get(ADVERTISEMENT_HEADER)).toBe(
      formatAdvertisement(world.continuity.advertisement),
    );
    expect(init?.responseHeaders?.get(ADVERTISEMENT_HEADER)).toContain('idle-ttl-ms=120000');

    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['ask-client', 'charge', 'chatty', 'echo', 'slow']);
    expect(tools.find((t) => t.name === 'echo')?.inputSchema.properties).toHaveProperty('text');
    const echoed = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    expect(echoed.content).toEqual([{ type: 'text', text: 'hello' }]);
    // Every request after initialize carried the session id and the negotiated protocol version.
    expect(world.continuity.sessionCount()).toBe(1);
    const after = wire.exchanges.slice(1);
    expect(after.map((x) => x.method).sort()).toEqual(['GET', 'POST', 'POST', 'POST']);
    for (const x of after) {
      expect(x.requestHeaders.get('mcp-session-id')).toBe(transport.sessionId);
      expect(x.requestHeaders.get('mcp-protocol-version')).toBe('2025-11-25');
    }
  });

  it('streams progress notifications of a tool call, in order, before its result', async () => {
    const world = await start();
    const wire = new Wire();
    const { client, connected } = await connect(world, wire);
    await connected;

    const progress: Progress[] = [];
    const result = await client.callTool(
      { name: 'chatty', arguments: { count: 5, intervalMs: 5 } },
      undefined,
      {
        onprogress: (p) => progress.push(p),
      },
    );

    expect(progress.map((p) => p.progress)).toEqual([1, 2, 3, 4, 5]);
    expect(result.content).toEqual([{ type: 'text', text: 'sent 5' }]);
    // On the wire: one SSE response, the priming event then 5 notifications and the result, ids dense.
    const post = wire.find(isToolCall);
    expect(post?.responseHeaders?.get('content-type')).toBe('text/event-stream');
    expect(seqs(post?.eventIds ?? [])).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(new Set(post?.eventIds.map(streamOf)).size).toBe(1);
  });

  it('the SDK resumes a POST stream cut mid-call by itself (GET + Last-Event-ID): nothing lost, nothing twice', async () => {
    const world = await start({ retryMs: 50 });
    const wire = new Wire();
    const { client, connected } = await connect(world, wire);
    await connected;

    wire.cutNext(isToolCall, 3); // the priming event, progress 1 and 2 get through
    const progress: number[] = [];
    const tokens: string[] = [];
    const result = await client.request(chatty(5, 100), CallToolResultSchema, {
      onprogress: (p) => progress.push(p.progress),
      onresumptiontoken: (t) => tokens.push(t),
      timeout: 10_000,
    });

    expect(result.content).toEqual([{ type: 'text', text: 'sent 5' }]);
    expect(progress).toEqual([1, 2, 3, 4, 5]);
    const post = wire.find(isToolCall);
    expect(post?.cut).toBe(true);
    expect(seqs(post?.eventIds ?? [])).toEqual([0, 1, 2]);
    // Exactly one resume, from the last event the client had; the request was never POSTed again.
    const resumes = wire.filter(isResume);
    expect(resumes).toHaveLength(1);
    expect(resumes[0]?.lastEventId).toBe(post?.eventIds.at(-1));
    expect(resumes[0]?.status).toBe(200);
    expect(wire.filter(isToolCall)).toHaveLength(1);
    // The resumed response continues exactly after the cursor, on the same stream, up to the result.
    const ids = [...(post?.eventIds ?? []), ...(resumes[0]?.eventIds ?? [])];
    expect(seqs(ids)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(new Set(ids.map(streamOf)).size).toBe(1);
    expect(tokens).toEqual(ids);
  });

  it('a new Client with the same sessionId resumes a cut call by resumptionToken and gets the rest', async () => {
    const world = await start();
    const wireA = new Wire();
    const a = await connect(world, wireA, NO_AUTO_RESUME);
    await a.connected;
    const sessionId = a.transport.sessionId;
    const protocolVersion = a.transport.protocolVersion;

    wireA.cutNext(isToolCall, 3);
    const tokens: string[] = [];
    const progressA: number[] = [];
    const callA = a.client
      .request(chatty(5, 100), CallToolResultSchema, {
        onprogress: (p) => progressA.push(p.progress),
        onresumptiontoken: (t) => tokens.push(t),
        timeout: 10_000,
      })
      .then(
        () => 'resolved',
        (e: unknown) => e,
      );
    await vi.waitFor(
      () => {
        expect(wireA.find(isToolCall)?.cut).toBe(true);
        expect(tokens).toHaveLength(3);
      },
      { timeout: 5_000 },
    );
    // Client A goes away with the call running (its POST stream is gone; it does not DELETE the session).
    await a.client.close();
    expect(await callA).toBeInstanceOf(Error);
    expect(progressA).toEqual([1, 2]);
    const post = wireA.find(isToolCall);
    const originalId = JSON.parse(post?.body ?? '{}').id;
    const token = tokens.at(-1) as string;
    expect(token).toBe(post?.eventIds.at(-1));

    // Client B attaches to the same session (connect() skips initialize when the transport has a sessionId).
    const wireB = new Wire();
    const b = await connect(world, wireB, { ...NO_AUTO_RESUME, sessionId });
    const progressB: Array<{ progressToken: unknown; progress: number }> = [];
    // The replayed notifications carry A's progress token; B has no progress handler for it, so take them raw.
    b.client.setNotificationHandler(ProgressNotificationSchema, (n) => {
      progressB.push({ progressToken: n.params.progressToken, progress: n.params.progress });
    });
    await b.connected;
    expect(wireB.exchanges).toHaveLength(0);
    if (protocolVersion) b.transport.setProtocolVersion(protocolVersion);

    const result = await b.client.request(chatty(5, 100), CallToolResultSchema, {
      resumptionToken: token,
      timeout: 10_000,
    });

    expect(result.content).toEqual([{ type: 'text', text: 'sent 5' }]);
    expect(progressB).toEqual([3, 4, 5].map((progress) => ({ progressToken: originalId, progress })));
    // B only GETs with the cursor: no POST, so the call is not run again.
    expect(wireB.exchanges.map((x) => x.method)).toEqual(['GET']);
    const resume = wireB.find(isResume);
    expect(resume?.lastEventId).toBe(token);
    expect(resume?.status).toBe(200);
    expect(seqs(resume?.eventIds ?? [])).toEqual([3, 4, 5, 6]);
    expect(new Set(resume?.eventIds.map(streamOf))).toEqual(new Set([streamOf(token)]));
    expect(world.continuity.sessionCount()).toBe(1);
  });

  it('resuming a cut non-idempotent call by token delivers its original result; the tool ran once', async () => {
    const world = await start();
    const wire = new Wire();
    const { client, connected } = await connect(world, wire, NO_AUTO_RESUME);
    await connected;

    wire.cutNext(isToolCall, 1); // only the priming event gets through; the result is lost in transit
    const tokens: string[] = [];
    const abandon = new AbortController();
    const original = client
      .request(
        { method: 'tools/call', params: { name: 'charge', arguments: { key: 'k1' } } },
        CallToolResultSchema,
        {
          onresumptiontoken: (t) => tokens.push(t),
          signal: abandon.signal,
          timeout: 10_000,
        },
      )
      .then(
        () => 'resolved',
        (e: unknown) => e,
      );
    await vi.waitFor(
      () => {
        expect(wire.find(isToolCall)?.cut).toBe(true);
        expect(tokens).toHaveLength(1);
        expect(world.effects.get('k1')).toBe(1);
      },
      { timeout: 5_000 },
    );
    expect(seqs(tokens)).toEqual([0]);

    const resumed = await client.request(
      { method: 'tools/call', params: { name: 'charge', arguments: { key: 'k1' } } },
      CallToolResultSchema,
      { resumptionToken: tokens[0], timeout: 5_000 },
    );

    expect(resumed.content).toEqual([{ type: 'text', text: 'charged k1' }]);
    expect(world.effects.get('k1')).toBe(1);
    expect(wire.filter(isToolCall)).toHaveLength(1);
    const resume = wire.find(isResume);
    expect(resume?.lastEventId).toBe(tokens[0]);
    expect(seqs(resume?.eventIds ?? [])).toEqual([1]);
    // The SDK hands the replayed result to the resuming request; the original one is abandoned here.
    abandon.abort('resumed elsewhere');
    expect(await original).not.toBe('resolved');
  });

  it('terminateSession() sends DELETE; afterwards the session id gets 404 on POST and GET', async () => {
    const world = await start();
    const wire = new Wire();
    const { client, transport, connected } = await connect(world, wire);
    await connected;
    await client.listTools();
    const sessionId = transport.sessionId as string;
    expect(sessionId).toBeDefined();

    await transport.terminateSession();

    expect(transport.sessionId).toBeUndefined();
    const del = wire.find((x) => x.method === 'DELETE');
    expect(del?.status).toBe(200);
    await vi.waitFor(() => expect(world.continuity.sessionCount()).toBe(0), { timeout: 5_000 });
    const listed = wire.find((x) => (x.body ?? '').includes('"method":"tools/list"'));
    expect(listed?.eventIds.length).toBeGreaterThan(0);

    const headers = {
      'Mcp-Session-Id': sessionId,
      'MCP-Protocol-Version': '2025-11-25',
    };
    const post = await fetch(world.url, {
      method: 'POST',
      headers: {
        ...headers,
        Accept: 'application/json, text/event-stream',
        'Content-Type': 'application/json',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list', params: {} }),
    });
    expect(post.status).toBe(404);
    expect(await post.json()).toMatchObject({ error: { code: JsonRpcCode.SESSION_NOT_FOUND } });
    const get = await fetch(world.url, {
      method: 'GET',
      headers: { ...headers, Accept: 'text/event-stream' },
    });
    expect(get.status).toBe(404);
    await get.body?.cancel();
    const resume = await fetch(world.url, {
      method: 'GET',
      headers: { ...headers, Accept: 'text/event-stream', 'Last-Event-ID': listed?.eventIds[0] ?? 'x' },
    });
    expect(resume.status).toBe(404);
    await resume.body?.cancel();
  });

  it('a server notification sent before the client opens its standalone GET stream is delivered once it does', async () => {
    const world = await start();
    const wire = new Wire();
    wire.holdBack(isStandaloneGet);
    const { client, connected } = await connect(world, wire);
    const logged: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logged.push(n.params.data);
    });
    await connected;

    // The SDK opens the standalone GET by itself after `notifications/initialized` is accepted (202).
    await vi.waitFor(() => expect(wire.find(isStandaloneGet)).toBeDefined(), { timeout: 5_000 });
    const mcp = world.servers[0];
    if (!mcp) throw new Error('no SDK server was created');
    await mcp.server.sendLoggingMessage({ level: 'info', data: 'before the GET' });
    await new Promise((r) => setTimeout(r, 50));
    expect(logged).toEqual([]);
    expect(wire.find(isStandaloneGet)?.status).toBeUndefined(); // still held: the server has not seen it

    wire.release();
    await vi.waitFor(() => expect(logged).toEqual(['before the GET']), { timeout: 5_000 });
    // Live messages follow on the same response, once each.
    await mcp.server.sendLoggingMessage({ level: 'info', data: 'after the GET' });
    await vi.waitFor(() => expect(logged).toEqual(['before the GET', 'after the GET']), { timeout: 5_000 });
    const get = wire.find(isStandaloneGet);
    expect(get?.status).toBe(200);
    expect(seqs(get?.eventIds ?? [])).toEqual([0, 1, 2]);
    expect(get?.eventIds.map(streamOf)).toEqual([0, 0, 0]);
    expect(wire.filter((x) => x.method === 'GET')).toHaveLength(1);
  });

  it('the SDK reconnects a dropped standalone GET with Last-Event-ID and gets what was sent meanwhile', async () => {
    const world = await start({ retryMs: 50 });
    const wire = new Wire();
    wire.cutNext(isStandaloneGet, 1); // the standalone GET drops right after its priming event
    wire.holdBack(isResume); // and its reconnection waits until a message was sent while it was down
    const { client, errors, connected } = await connect(world, wire);
    const logged: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logged.push(n.params.data);
    });
    await connected;
    await vi.waitFor(() => expect(wire.find(isResume)).toBeDefined(), { timeout: 5_000 });
    expect(errors.map((e) => e.message).join('\n')).toContain('SSE stream disconnected');
    const mcp = world.servers[0];
    if (!mcp) throw new Error('no SDK server was created');
    await mcp.server.sendLoggingMessage({ level: 'info', data: 'while down' });

    wire.release();
    await vi.waitFor(() => expect(logged).toEqual(['while down']), { timeout: 5_000 });
    await mcp.server.sendLoggingMessage({ level: 'info', data: 'live' });
    await vi.waitFor(() => expect(logged).toEqual(['while down', 'live']), { timeout: 5_000 });

    const first = wire.find(isStandaloneGet);
    const resume = wire.find(isResume);
    expect(first?.cut).toBe(true);
    expect(resume?.lastEventId).toBe(first?.eventIds.at(-1));
    expect(seqs([resume?.lastEventId ?? ''])).toEqual([0]);
    expect(resume?.status).toBe(200);
    expect(seqs(resume?.eventIds ?? [])).toEqual([1, 2]);
    expect(resume?.eventIds.map(streamOf)).toEqual([0, 0]);
    expect(wire.filter(isResume)).toHaveLength(1);
  });

  it('an evicted cursor reaches the SDK as 410 (the SDK reports it via onerror; the request only times out)', async () => {
    const world = await start({ eventLog: new MemoryEventLog({ maxEventsPerStream: 2 }) });
    const wire = new Wire();
    const { client, errors, connected } = await connect(world, wire, NO_AUTO_RESUME);
    await connected;
    const tokens: string[] = [];
    await client.request(chatty(5, 0), CallToolResultSchema, { onresumptiontoken: (t) => tokens.push(t) });
    expect(seqs(tokens)).toEqual([0, 1, 2, 3, 4, 5, 6]);

    // Only seq 5 and 6 are retained: resuming after seq 1 would silently skip 2..4, so the server says 410.
    const outcome = await client
      .request(chatty(5, 0), CallToolResultSchema, { resumptionToken: tokens[1], timeout: 1_000 })
      .then(
        () => 'resolved',
        (e: unknown) => e,
      );

    expect(outcome).not.toBe('resolved');
    const resume = wire.find(isResume);
    expect(resume?.lastEventId).toBe(tokens[1]);
    expect(resume?.status).toBe(410);
    const gone = [outcome, ...errors].find((e) => e instanceof StreamableHTTPError);
    expect(gone).toBeInstanceOf(StreamableHTTPError);
    expect((gone as StreamableHTTPError).code).toBe(410);
    expect(wire.filter(isToolCall)).toHaveLength(1);
  });
});
