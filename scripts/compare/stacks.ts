import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  type EventId,
  type EventStore,
  StreamableHTTPServerTransport,
  type StreamId,
} from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import {
  ContinuityClientTransport,
  type ContinuityServer,
  createContinuityServer,
  type GapReport,
  MemoryEventLog,
} from '../../src/index.js';
import { FaultProxy } from '../../src/testing/index.js';
import { sdkSessionRouter } from '../../test/support/sdk-session-router.js';
import { newWorld, toolServer, type World } from './tools.js';

export type StackKind = 'sdk' | 'ours';

export const STACK_LABEL: Record<StackKind, string> = {
  sdk: 'official SDK',
  ours: 'mcp-continuity',
};

export interface StackConfig {
  /** The fault proxy cuts connections idle this long (a load balancer). */
  readonly idleTimeoutMs?: number;
  /** Bound the server's event buffer to this many events per stream. Default: unbounded (SDK) / library default (ours). */
  readonly maxEventsPerStream?: number;
  /** Client reconnect delay, fixed. Default: each client's own default backoff. */
  readonly reconnectDelayMs?: number;
}

/** One client, through the fault proxy, to one server "process" that can be restarted on the same port. */
export interface Stack {
  readonly kind: StackKind;
  readonly world: World;
  readonly proxy: FaultProxy;
  readonly client: Client;
  /** Everything the client reported through `onerror`, as messages. */
  readonly errors: string[];
  /** Loss reports the application received (ours: `onGap`; the SDK has no such signal). */
  readonly gaps: GapReport[];
  /** Server-side notes (what the event store did with a cursor it no longer holds). */
  serverNotes(): string[];
  sessionId(): string | undefined;
  /** The server process dies and a new one starts on the same port: in-memory sessions are gone. */
  restart(): void;
  close(): Promise<void>;
}

export function makeStack(kind: StackKind, config: StackConfig): Promise<Stack> {
  return kind === 'sdk' ? sdkStack(config) : oursStack(config);
}

const within = <T>(p: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([p, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms).unref())]);

async function listen(handler: http.RequestListener): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

async function closeHttp(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await within(new Promise<void>((r) => server.close(() => r())), 1_000);
}

async function connectClient(
  transport: StreamableHTTPClientTransport | ContinuityClientTransport,
  errors: string[],
): Promise<Client> {
  const client = new Client({ name: 'compare', version: '1.0.0' });
  client.onerror = (e) => errors.push(e.message);
  const connected = await within(
    client.connect(transport).then(() => true),
    5_000,
  );
  if (!connected) throw new Error('connect: no answer within 5 s');
  return client;
}

/**
 * A bounded in-memory `EventStore`, written the straightforward way: one list per stream holding the last
 * `maxEventsPerStream` events (the oldest evicted first), event ids `<streamId>_<seq>`, and a replay that
 * sends every retained event whose sequence number is after the cursor's.
 *
 * For a cursor that was evicted, that replay starts at the oldest event still retained, and nothing tells
 * the client that the events in between are gone: it is the silent resume the design note describes.
 * (The SDK's example `InMemoryEventStore` instead replays nothing for an unknown id.)
 */
export class BoundedEventStore implements EventStore {
  private readonly streams = new Map<StreamId, { next: number; events: StoredSdkEvent[] }>();
  /** Replays of a cursor that had already been evicted: what the store did instead. */
  readonly evictedReplays: Array<{ after: number; oldest: number | undefined; sent: number }> = [];

  constructor(private readonly maxEventsPerStream = Number.POSITIVE_INFINITY) {}

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    let s = this.streams.get(streamId);
    if (!s) {
      s = { next: 1, events: [] };
      this.streams.set(streamId, s);
    }
    const seq = s.next++;
    const id = `${streamId}_${seq}`;
    s.events.push({ seq, id, message });
    while (s.events.length > this.maxEventsPerStream) s.events.shift();
    return id;
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    const streamId = parse(eventId)?.streamId;
    return streamId !== undefined && this.streams.has(streamId) ? streamId : undefined;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const cursor = parse(lastEventId);
    const s = cursor && this.streams.get(cursor.streamId);
    if (!cursor || !s) throw new Error(`unknown event id ${lastEventId}`);
    const oldest = s.events[0]?.seq;
    const evicted = oldest !== undefined && cursor.seq < oldest - 1;
    let sent = 0;
    // Reads the live list, so an event stored while `send` awaits is replayed too.
    for (let next = cursor.seq + 1; ; ) {
      const event = s.events.find((e) => e.seq >= next);
      if (!event) break;
      await send(event.id, event.message);
      sent++;
      next = event.seq + 1;
    }
    if (evicted) this.evictedReplays.push({ after: cursor.seq, oldest, sent });
    return cursor.streamId;
  }
}

interface StoredSdkEvent {
  readonly seq: number;
  readonly id: EventId;
  readonly message: JSONRPCMessage;
}

function parse(eventId: EventId): { streamId: StreamId; seq: number } | undefined {
  const at = eventId.lastIndexOf('_');
  const seq = Number(eventId.slice(at + 1));
  if (at <= 0 || !Number.isSafeInteger(seq)) return undefined;
  return { streamId: eventId.slice(0, at), seq };
}

/**
 * (A) The official SDK on both ends. The server is wired as the SDK's `simpleStreamableHttp` example does:
 * stateful, one `StreamableHTTPServerTransport` + `McpServer` per session in a map, unknown id → 404.
 */
async function sdkStack(config: StackConfig): Promise<Stack> {
  const world = newWorld();
  let sessions = new Map<string, StreamableHTTPServerTransport>();
  const created: Array<{ transport: StreamableHTTPServerTransport; server: McpServer }> = [];
  const stores: BoundedEventStore[] = [];

  const { server: httpServer, port } = await listen(
    sdkSessionRouter({
      lookup: (id) => sessions.get(id),
      initialize: async () => {
        const map = sessions; // the process this request reached
        const store = new BoundedEventStore(config.maxEventsPerStream);
        stores.push(store);
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          eventStore: store,
          keepAliveMs: 0, // heartbeats off, as on our side
          onsessioninitialized: (id) => {
            world.sessions++;
            map.set(id, transport);
          },
          onsessionclosed: (id) => {
            map.delete(id);
          },
        });
        const server = toolServer(world);
        created.push({ transport, server });
        await server.connect(transport);
        return transport;
      },
    }),
  );

  const proxy = await FaultProxy.start({
    target: { host: '127.0.0.1', port },
    idleTimeoutMs: config.idleTimeoutMs,
  });
  const errors: string[] = [];
  const delay = config.reconnectDelayMs;
  const transport = new StreamableHTTPClientTransport(proxy.url(), {
    reconnectionOptions:
      delay === undefined
        ? undefined // the SDK default: 1 s, ×1.5, 30 s max, 2 retries
        : {
            initialReconnectionDelay: delay,
            maxReconnectionDelay: delay,
            reconnectionDelayGrowFactor: 1,
            maxRetries: 2,
          },
  });
  const client = await connectClient(transport, errors);

  return {
    kind: 'sdk',
    world,
    proxy,
    client,
    errors,
    gaps: [],
    serverNotes: () =>
      stores.flatMap((s) =>
        s.evictedReplays.map(
          (r) =>
            `SDK server: asked to replay after evicted event ${r.after}, the store resumed silently at its oldest retained event ${r.oldest} and sent ${r.sent} events`,
        ),
      ),
    sessionId: () => transport.sessionId,
    restart() {
      // A new process: an empty session map (the old transports are simply gone), every connection reset.
      sessions = new Map();
      proxy.reset();
      httpServer.closeAllConnections();
    },
    async close() {
      await within(client.close(), 2_000);
      for (const c of created) {
        await within(c.transport.close(), 1_000);
        await within(c.server.close(), 1_000);
      }
      await proxy.close();
      await closeHttp(httpServer);
    },
  };
}

/** (B) mcp-continuity on both ends, the SDK `Client` and `McpServer` on top. */
async function oursStack(config: StackConfig): Promise<Stack> {
  const world = newWorld();
  const make = () =>
    createContinuityServer({
      createMcpServer: () => {
        world.sessions++;
        return toolServer(world);
      },
      eventLog:
        config.maxEventsPerStream === undefined
          ? undefined
          : new MemoryEventLog({ maxEventsPerStream: config.maxEventsPerStream }),
      heartbeatMs: 0, // heartbeats off
      retryMs: 20, // so the `retry:` hint does not lengthen the client's reconnect delay
      onError: () => undefined,
    });
  let current: ContinuityServer = make();
  const retired: ContinuityServer[] = [];
  const { server: httpServer, port } = await listen((req, res) => current.nodeHandler(req, res));
  const proxy = await FaultProxy.start({
    target: { host: '127.0.0.1', port },
    idleTimeoutMs: config.idleTimeoutMs,
  });
  const errors: string[] = [];
  const gaps: GapReport[] = [];
  const delay = config.reconnectDelayMs;
  const transport = new ContinuityClientTransport(proxy.url(), {
    onGap: (g) => gaps.push(g),
    // Default: 500 ms, ×2, 30 s max, 8 retries, full jitter.
    reconnect: delay === undefined ? undefined : { initialDelayMs: delay, maxDelayMs: delay, jitter: 'none' },
  });
  const client = await connectClient(transport, errors);

  return {
    kind: 'ours',
    world,
    proxy,
    client,
    errors,
    gaps,
    serverNotes: () => [],
    sessionId: () => transport.sessionId,
    restart() {
      retired.push(current);
      current = make();
      proxy.reset();
      httpServer.closeAllConnections();
    },
    async close() {
      await within(client.close(), 3_000);
      for (const c of [...retired, current]) await within(c.close(), 1_000);
      await proxy.close();
      await closeHttp(httpServer);
    },
  };
}
