import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import type { CursorRecord } from '../../machines/client/cursor.js';
import type { RetryPolicy } from '../../machines/client/ledger.js';
import { COMMON_CHECKS, type TraceCheck } from '../../properties/checks/common.js';
import {
  DELIVERY_CHECKS,
  type DeliveryCheck,
  type DeliveryTrace,
  type ProgressDelivery,
  type StreamDelivery,
} from '../../properties/checks/delivery.js';
import type { CallTrace, InstanceDeath, Trace } from '../../properties/checks/trace.js';
import { RULES_2025 } from '../../properties/checks.js';
import {
  type ContinuityClientOptions,
  ContinuityClientTransport,
  type ContinuityServer,
  type CursorStore,
  createContinuityServer,
  FileCursorStore,
  type GapReport,
  isOutcomeUnknown,
  MemoryEventLog,
} from '../../src/index.js';
import { RedisEventLog } from '../../src/redis.js';
import { FaultProxy } from '../../src/testing/index.js';
import { type DemoWorld, demoMcpServer } from '../server/harness.js';
import { type RoundRobinProxy, startRoundRobinProxy } from '../support/round-robin-proxy.js';
import {
  FaultLoop,
  isNetworkCommand,
  type NetworkCommand,
  runSeed,
  settleWithin,
  sleep,
} from './fault-loop.js';

/**
 * The property model's world, on the real stack: SDK Client + ContinuityClientTransport → FaultProxy →
 * createContinuityServer + SDK McpServer (the demo tools), over loopback, in real time. Commands are data,
 * so fast-check generates, shrinks and prints them. Everything the checks judge is recorded outside the
 * system under test: side effects in the tool handlers, progress as the application receives it, gaps and
 * outcomes as the application is told, sessions as the server creates them.
 */
export type StackCommand =
  /** A non-idempotent tool call: its side effect is counted per call. */
  | { readonly kind: 'charge'; readonly ms: number }
  /** A read-only call that sends `count` numbered progress notifications. */
  | { readonly kind: 'chatty'; readonly count: number; readonly intervalMs: number }
  /** A call that outlives the proxy's idle timeout. */
  | { readonly kind: 'slow'; readonly ms: number }
  /** The server process dies and a new one starts on the same port; sessions (memory log) die with it. */
  | { readonly kind: 'serverRestart' }
  /** The client process dies (no DELETE) and a new one starts with the same durable cursor file. */
  | { readonly kind: 'clientRestart' }
  /** The network faults and waits both worlds share (fault-loop.ts). */
  | NetworkCommand;

export interface StackConfig {
  /** Server heartbeats every 100 ms (keeping idle streams alive through the proxy), or none. */
  readonly heartbeat: boolean;
  /** The server keeps only BOUNDED_LOG events per stream (a client away too long gets a gap), or the default. */
  readonly boundedLog?: boolean;
  /**
   * Two server instances sharing sessions through the Redis at this URL, behind a round-robin balancer
   * (every request may land on either). `serverRestart` then restarts one instance: its sessions live on
   * in Redis, and the calls it was running end as outcome unknown.
   */
  readonly sharedRedisUrl?: string;
}

/** Shared instances: a dead instance's calls are answered for after this long. */
const SHARED_LEASE_MS = 600;

/** A deliberately weakened client, to show the checks can fail. */
export interface StackVariant {
  readonly retryPolicy?: RetryPolicy;
}

export const PROXY_IDLE_MS = 250;
export const HEARTBEAT_MS = 100;
export const STALL_MS = 300;
export const SETTLE_BOUND_MS = 8_000;
export const BOUNDED_LOG = 8;
const DRAIN_MS = 150;
const BREATH_MS = 5;
const RECONNECT: ContinuityClientOptions['reconnect'] = {
  initialDelayMs: 10,
  maxDelayMs: 100,
  maxRetries: 30,
  jitter: 'full',
};

const CALL_META = 'stack/call';
const ORIGIN_META = 'stack/origin';

export const callArb: fc.Arbitrary<StackCommand> = fc.oneof(
  fc.record({ kind: fc.constant('charge' as const), ms: fc.integer({ min: 0, max: 300 }) }),
  fc.record({
    kind: fc.constant('chatty' as const),
    count: fc.integer({ min: 5, max: 30 }),
    intervalMs: fc.integer({ min: 1, max: 5 }),
  }),
  fc.record({ kind: fc.constant('slow' as const), ms: fc.integer({ min: 100, max: 600 }) }),
);

export const commandArb: fc.Arbitrary<StackCommand> = fc.oneof(
  { arbitrary: callArb, weight: 4 },
  {
    arbitrary: fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 10, max: 300 }) }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant('reset' as const), pick: fc.nat({ max: 7 }) }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'resetAll' as const }), weight: 1 },
  {
    arbitrary: fc.record({
      kind: fc.constant('serverError' as const),
      count: fc.integer({ min: 1, max: 4 }),
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ kind: fc.constant('blackhole' as const), pick: fc.nat({ max: 7 }) }), weight: 1 },
  {
    arbitrary: fc.record({ kind: fc.constant('latency' as const), ms: fc.integer({ min: 0, max: 40 }) }),
    weight: 1,
  },
  { arbitrary: fc.constant({ kind: 'serverRestart' as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'clientRestart' as const }), weight: 1 },
);

/** Schedules of 2–8 commands that start with a call, so there is something in flight to break. */
export const scheduleArb: fc.Arbitrary<StackCommand[]> = fc
  .tuple(callArb, fc.array(commandArb, { minLength: 1, maxLength: 7 }))
  .map(([first, rest]) => [first, ...rest]);

export const configArb: fc.Arbitrary<StackConfig> = fc.record({
  heartbeat: fc.boolean(),
  boundedLog: fc.boolean(),
});

type Outcome =
  | { readonly kind: 'result'; readonly origin: string | undefined; readonly text: string | undefined }
  | { readonly kind: 'unknown'; readonly detail: string }
  | { readonly kind: 'error'; readonly detail: string };

interface Delivered {
  readonly n: number;
  /** The session whose server execution sent it (tagged on the server side). */
  readonly origin: string | undefined;
  /** The wire request id the server sent it for. */
  readonly request: string | undefined;
}

export interface CallRecord {
  readonly key: string;
  readonly tool: 'charge' | 'chatty' | 'slow';
  readonly args: Record<string, unknown>;
  readonly pid: number;
  readonly startedAt: number;
  /** Wire ids the transport used for this call (one, unless a process re-sent it under another id). */
  readonly wireIds: Set<string>;
  /** POSTs of this call that left the client (re-sends included): the session they named, how they ended. */
  readonly posts: Array<{ readonly session: string | null; status?: number | 'network-error' | 'aborted' }>;
  readonly delivered: Delivered[];
  outcome?: Outcome;
  /** Outcome unknown's `error.data.reason`. */
  reason?: string;
  settledAt?: number;
  /** Outcomes the application was given (more than one is a duplicate). */
  outcomes: number;
  /** Its client process died before it settled: nobody waits for it any more. */
  abandoned: boolean;
  /** Server instances that received it. */
  readonly owners: string[];
}

interface ClientProcess {
  readonly pid: number;
  readonly client: Client;
  readonly transport: ContinuityClientTransport;
  readonly store: ProcessCursorStore;
  /** Session ids this process's machine held, in order. */
  readonly sessions: string[];
  /** The session its cursor file gave it at start (undefined for the first process). */
  readonly restoredSession: string | undefined;
}

export interface SessionTransition {
  readonly pid: number;
  readonly from: string;
  readonly to: string | undefined;
  /** Server generation that owned `from`, and the live generation when the client left it. */
  readonly fromGeneration: number | undefined;
  readonly liveGeneration: number;
  readonly at: number;
}

export interface StackOutcome {
  readonly config: StackConfig;
  readonly commands: readonly StackCommand[];
  readonly calls: Map<string, CallRecord>;
  /** Side effects per charge call key, counted inside the tool handler. */
  readonly effects: Map<string, number>;
  /** Every McpServer created: its session and the server generation that created it. */
  readonly mcpServers: Array<{ readonly sessionId: string; readonly generation: number }>;
  readonly serverRestarts: number;
  /** Client restarts whose cursor file did not hold the dead process's last session, still alive. */
  readonly clientRestartsWithoutCursor: number;
  /** Session ids some client process adopted. */
  readonly adoptedSessions: Set<string>;
  readonly transitions: SessionTransition[];
  readonly deaths: readonly InstanceDeath[];
  readonly annotationsKnownAt: ReadonlyMap<number, number>;
  readonly gaps: Array<GapReport & { readonly pid: number; readonly at: number }>;
  /** Progress the servers sent, per wire request id, per session: the numbers in send order. */
  readonly appended: Map<string, Map<string, number[]>>;
  readonly orphans: Array<{ readonly pid: number; readonly message: JSONRPCMessage }>;
  readonly hung: string[];
  readonly settledAfterMs: number;
  readonly log: string[];
  readonly errors: string[];
}

/** A FileCursorStore that dies with its process: writes issued before the crash land, later ones do not. */
class ProcessCursorStore implements CursorStore {
  readonly durable = true;
  private readonly file: FileCursorStore;
  private last: Promise<void> = Promise.resolve();
  private dead = false;
  loaded: CursorRecord | null = null;
  lastSaved: CursorRecord | null = null;

  constructor(path: string) {
    this.file = new FileCursorStore(path);
  }

  async load(): Promise<CursorRecord | null> {
    this.loaded = await this.file.load();
    return this.loaded;
  }

  save(record: CursorRecord | null): Promise<void> {
    if (this.dead) return Promise.resolve();
    this.lastSaved = record;
    this.last = this.file.save(record);
    return this.last;
  }

  /** Waits until the writes the dead process queued have landed, then ignores any later save. */
  async kill(): Promise<void> {
    for (;;) {
      const seen = this.last;
      await seen.catch(() => undefined);
      await sleep(15);
      if (this.last === seen) break;
    }
    this.dead = true;
  }
}

/** The client transport with a hook that runs as soon as its machine exists (before initialize). */
class ObservedTransport extends ContinuityClientTransport {
  constructor(
    url: URL,
    options: ContinuityClientOptions,
    private readonly onStart: (t: ContinuityClientTransport) => void,
  ) {
    super(url, options);
  }

  override async start(): Promise<void> {
    await super.start();
    this.onStart(this);
  }
}

export class StackWorld {
  private readonly demo: DemoWorld = { effects: new Map(), servers: [] };
  private readonly t0 = Date.now();
  private generation = 0;
  /** One server per instance slot (one slot unless `sharedRedisUrl`), each on its own HTTP server. */
  private readonly slots: Array<{ current: ContinuityServer; httpServer: http.Server; instance: string }> =
    [];
  /** Server processes started: each is an instance of its own (`i<slot>#<n>`). */
  private started = 0;
  /** Instances that died (a restart), and when: they excuse only the calls they ran. */
  readonly deaths: InstanceDeath[] = [];
  /** Client process → when its `tools/list` answer arrived (it knows the annotations since). */
  readonly annotationsKnownAt = new Map<number, number>();
  private readonly retired: ContinuityServer[] = [];
  private balancer: RoundRobinProxy | undefined;
  private readonly keyPrefix = `stack-${Math.random().toString(36).slice(2)}:`;
  /** Shared instances: restarts of one instance (sessions survive them). */
  private instanceRestarts = 0;
  private proxy!: FaultProxy;
  private dir!: string;
  private process!: ClientProcess;
  private readonly dead: ClientProcess[] = [];
  private pid = 0;
  private callCount = 0;
  private closing = false;
  private network!: FaultLoop;
  /** Wire request id → call key, learned from the POST bodies the client sends. */
  private readonly wire = new Map<string, string>();
  readonly calls = new Map<string, CallRecord>();
  readonly mcpServers: StackOutcome['mcpServers'] = [];
  readonly sessionGeneration = new Map<string, number>();
  readonly adoptedSessions = new Set<string>();
  readonly transitions: SessionTransition[] = [];
  readonly gaps: StackOutcome['gaps'] = [];
  readonly appended: StackOutcome['appended'] = new Map();
  readonly orphans: StackOutcome['orphans'] = [];
  readonly log: string[] = [];
  readonly errors: string[] = [];
  serverRestarts = 0;
  clientRestartsWithoutCursor = 0;
  readonly commands: StackCommand[] = [];

  private constructor(
    readonly config: StackConfig,
    private readonly variant: StackVariant,
  ) {}

  static async start(config: StackConfig, variant: StackVariant = {}): Promise<StackWorld> {
    const world = new StackWorld(config, variant);
    try {
      await world.boot();
    } catch (error) {
      await world.close();
      throw error;
    }
    return world;
  }

  private now(): number {
    return Date.now() - this.t0;
  }

  private note(line: string): void {
    this.log.push(`${String(this.now()).padStart(5)}ms ${line}`);
  }

  private async boot(): Promise<void> {
    this.dir = await mkdtemp(join(tmpdir(), 'mcpc-stack-'));
    const count = this.config.sharedRedisUrl ? 2 : 1;
    for (let i = 0; i < count; i++) {
      const instance = `i${i}#${++this.started}`;
      const slot = { current: this.makeServer(), httpServer: http.createServer(), instance };
      slot.httpServer.on('request', (req, res) => {
        slot.current.nodeHandler(req, res);
        this.watchAdmission(req, slot.instance);
      });
      this.slots.push(slot);
      await new Promise<void>((r) => slot.httpServer.listen(0, '127.0.0.1', r));
    }
    const ports = this.slots.map((s) => (s.httpServer.address() as AddressInfo).port);
    if (count > 1) this.balancer = await startRoundRobinProxy(ports);
    const target = this.balancer ? Number(new URL(this.balancer.url).port) : (ports[0] as number);
    this.proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port: target },
      idleTimeoutMs: PROXY_IDLE_MS,
    });
    this.network = new FaultLoop(this.proxy);
    this.proxy.on('fault', (e) => {
      if (e.type === 'cut') this.note(`proxy cut #${e.id} ${e.label} (${e.reason})`);
      else if (e.type === 'refused') this.note(`proxy refused #${e.id} with ${e.status}`);
    });
    this.process = await this.spawnClient();
    // The transport learns the tools' annotations (chatty is read-only) from the list.
    await this.process.client.listTools();
    this.annotationsKnownAt.set(this.process.pid, this.now());
  }

  /**
   * One server process: its own memory event log (sessions die with it), or, sharing, its own connection
   * to the shared Redis (sessions outlive it: they all belong to generation 1). Every McpServer it creates
   * is recorded, also those an instance re-creates for a session another instance began.
   */
  private makeServer(): ContinuityServer {
    const shared = this.config.sharedRedisUrl;
    this.generation = shared ? 1 : this.generation + 1;
    const generation = this.generation;
    return createContinuityServer({
      createMcpServer: (info) => {
        this.mcpServers.push({ sessionId: info.id, generation });
        this.sessionGeneration.set(info.id, generation);
        this.note(`server g${generation} created session ${short(info.id)}`);
        return this.tagged(demoMcpServer(this.demo), info.id);
      },
      heartbeatMs: this.config.heartbeat ? HEARTBEAT_MS : 0,
      retryMs: 20,
      ...(shared
        ? {
            eventLog: new RedisEventLog({
              url: shared,
              keyPrefix: this.keyPrefix,
              ...(this.config.boundedLog ? { maxEventsPerStream: BOUNDED_LOG } : {}),
            }),
            instanceLeaseMs: SHARED_LEASE_MS,
          }
        : this.config.boundedLog
          ? { eventLog: new MemoryEventLog({ maxEventsPerStream: BOUNDED_LOG }) }
          : {}),
      onError: () => undefined,
    });
  }

  /**
   * Wraps the demo McpServer so what it sends names its origin: progress notifications carry the session
   * and the request they belong to (in `message`), results carry the session in `_meta`. Also records every
   * progress notification the server appended, per request and session. The tools themselves are untouched.
   */
  private tagged(mcp: ReturnType<typeof demoMcpServer>, sessionId: string) {
    return {
      connect: (transport: Transport) => {
        const send = transport.send.bind(transport);
        transport.send = (message, options) => {
          const request = options?.relatedRequestId;
          const m = message as { method?: string; params?: Record<string, unknown>; result?: unknown };
          if (m.method === 'notifications/progress' && m.params) {
            const wire = String(request);
            const perSession = this.appended.get(wire) ?? new Map<string, number[]>();
            const list = perSession.get(sessionId) ?? [];
            list.push(Number(m.params.progress));
            perSession.set(sessionId, list);
            this.appended.set(wire, perSession);
            message = {
              ...message,
              params: { ...m.params, message: JSON.stringify({ o: sessionId, r: wire }) },
            } as JSONRPCMessage;
          } else if (m.result && typeof m.result === 'object') {
            const result = m.result as { _meta?: Record<string, unknown> };
            message = {
              ...message,
              result: { ...result, _meta: { ...result._meta, [ORIGIN_META]: sessionId } },
            } as JSONRPCMessage;
          }
          return send(message, options);
        };
        return mcp.connect(transport);
      },
      close: () => mcp.close(),
    };
  }

  /**
   * Which instance took each call: a POST carrying it reached that instance's HTTP server (the handler
   * reads the body with its own 'data' listener; this one only listens along). An instance's death
   * excuses only the calls it took.
   */
  private watchAdmission(req: http.IncomingMessage, instance: string): void {
    if (req.method !== 'POST') return;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let key: unknown;
      try {
        key = JSON.parse(Buffer.concat(chunks).toString('utf8'))?.params?._meta?.[CALL_META];
      } catch {
        return;
      }
      const call = typeof key === 'string' ? this.calls.get(key) : undefined;
      if (call && !call.owners.includes(instance)) call.owners.push(instance);
    });
  }

  private async spawnClient(): Promise<ClientProcess> {
    const pid = ++this.pid;
    const store = new ProcessCursorStore(join(this.dir, 'cursor.json'));
    const sessions: string[] = [];
    const observe = (t: ContinuityClientTransport) => {
      const seen = (sid: string | undefined) => {
        const last = sessions.at(-1);
        if (sid === last || sid === undefined) return;
        if (last !== undefined) {
          this.transitions.push({
            pid,
            from: last,
            to: sid,
            fromGeneration: this.sessionGeneration.get(last),
            liveGeneration: this.generation,
            at: this.now(),
          });
        }
        this.note(`client p${pid} session ${last ? short(last) : '-'} → ${short(sid)}`);
        sessions.push(sid);
        this.adoptedSessions.add(sid);
      };
      seen(t.actor.getSnapshot().context.sessionId);
      t.actor.subscribe((s) => seen(s.context.sessionId));
    };
    const transport = new ObservedTransport(
      this.proxy.url(),
      {
        cursorStore: store,
        reconnect: RECONNECT,
        stallTimeoutMs: STALL_MS,
        closeTimeoutMs: 300,
        onGap: (g) => {
          this.gaps.push({ ...g, pid, at: this.now() });
          this.note(
            `gap p${pid} ${g.streamKey}→${this.callOfStream(g.streamKey) ?? '?'} ${g.reason} lost=${g.lostCount}`,
          );
        },
        onOrphanResult: (message) => {
          this.orphans.push({ pid, message });
          this.note(`orphan p${pid} ${JSON.stringify(message).slice(0, 100)}`);
        },
        fetch: (url, init) => this.observedFetch(pid, url, init),
        ...(this.variant.retryPolicy ? { retryPolicy: this.variant.retryPolicy } : {}),
      },
      observe,
    );
    const client = new Client({ name: `stack-p${pid}`, version: '1.0.0' });
    await client.connect(transport);
    client.onerror = (e) => {
      if (this.errors.length < 200) this.errors.push(`p${pid}: ${e.message}`);
    };
    const restoredSession = store.loaded?.sessionId;
    this.note(`client p${pid} connected (restored ${restoredSession ? short(restoredSession) : 'nothing'})`);
    return { pid, client, transport, store, sessions, restoredSession };
  }

  /** The client's fetch: learns which call each POST carries, and notes how each exchange of a call ends. */
  private async observedFetch(
    pid: number,
    url: string | URL,
    init: RequestInit | undefined,
  ): Promise<Response> {
    const headers = new Headers(init?.headers);
    const post = this.observePost(init, headers.get('mcp-session-id'));
    const resume = headers.get('last-event-id');
    const what = post ? `POST ${post.key}` : resume ? `GET resume ${resume}` : undefined;
    try {
      const response = await fetch(url, init);
      if (post) post.attempt.status = response.status;
      if (what) this.note(`p${pid} ${what} → ${response.status}`);
      return response;
    } catch (error) {
      const aborted = (error as Error).name === 'AbortError';
      if (post) post.attempt.status = aborted ? 'aborted' : 'network-error';
      if (what) this.note(`p${pid} ${what} → ${(error as Error).name}: ${(error as Error).message}`);
      throw error;
    }
  }

  /** Learns which wire id carries which call, from the POST bodies that leave the client. */
  private observePost(
    init: RequestInit | undefined,
    session: string | null,
  ): { key: string; attempt: CallRecord['posts'][number] } | undefined {
    if (init?.method !== 'POST' || typeof init.body !== 'string') return;
    let body: { id?: unknown; method?: string; params?: { _meta?: Record<string, unknown> } };
    try {
      body = JSON.parse(init.body);
    } catch {
      return;
    }
    const key = body.params?._meta?.[CALL_META];
    if (body.method !== 'tools/call' || typeof key !== 'string' || body.id === undefined) return;
    const call = this.calls.get(key);
    if (!call) return;
    const wire = String(body.id);
    this.wire.set(wire, key);
    call.wireIds.add(wire);
    const attempt: CallRecord['posts'][number] = { session };
    call.posts.push(attempt);
    return { key, attempt };
  }

  /** The call a gap's stream key (`s:<wire id>`, a request's ledger key) belongs to. */
  callOfStream(streamKey: string): string | undefined {
    return streamKey.startsWith('s:') ? this.wire.get(streamKey.slice(2)) : undefined;
  }

  async apply(cmd: StackCommand): Promise<void> {
    this.commands.push(cmd);
    this.note(`> ${JSON.stringify(cmd)}`);
    if (isNetworkCommand(cmd)) await this.network.apply(cmd);
    else if (cmd.kind === 'serverRestart') await this.restartServer();
    else if (cmd.kind === 'clientRestart') await this.restartClient();
    else this.call(cmd);
    await sleep(BREATH_MS);
  }

  private call(cmd: Extract<StackCommand, { kind: 'charge' | 'slow' | 'chatty' }>): void {
    const key = `c${++this.callCount}`;
    const args: Record<string, unknown> =
      cmd.kind === 'charge'
        ? { key, ms: cmd.ms }
        : cmd.kind === 'slow'
          ? { ms: cmd.ms }
          : { count: cmd.count, intervalMs: cmd.intervalMs };
    const proc = this.process;
    const record: CallRecord = {
      key,
      tool: cmd.kind,
      args,
      pid: proc.pid,
      startedAt: this.now(),
      wireIds: new Set(),
      posts: [],
      delivered: [],
      abandoned: false,
      outcomes: 0,
      owners: [],
    };
    this.calls.set(key, record);
    const settle = (outcome: Outcome) => {
      // A dead process's SDK client is released at teardown: nobody was waiting for that answer.
      if (this.closing) return;
      record.outcomes++;
      if (record.outcome) {
        this.errors.push(
          `${key} settled twice: ${JSON.stringify(record.outcome)} then ${JSON.stringify(outcome)}`,
        );
        return;
      }
      record.outcome = outcome;
      record.settledAt = this.now();
      this.note(`${key} (${cmd.kind}, p${proc.pid}) → ${JSON.stringify(outcome)}`);
    };
    proc.client
      .callTool({ name: cmd.kind, arguments: args, _meta: { [CALL_META]: key } }, undefined, {
        onprogress: (p) => {
          let tag: { o?: string; r?: string } = {};
          try {
            tag = JSON.parse(p.message ?? '{}');
          } catch {}
          record.delivered.push({ n: p.progress, origin: tag.o, request: tag.r });
        },
      })
      .then(
        (r) => {
          const meta = r._meta as Record<string, unknown> | undefined;
          const content = r.content as Array<{ text?: string }> | undefined;
          settle({
            kind: 'result',
            origin: typeof meta?.[ORIGIN_META] === 'string' ? (meta[ORIGIN_META] as string) : undefined,
            text: content?.[0]?.text,
          });
        },
        (e: unknown) => {
          const detail = `${(e as { code?: unknown }).code ?? ''} ${(e as Error).message ?? String(e)}`;
          const reason = (e as { data?: { reason?: unknown } }).data?.reason;
          if (typeof reason === 'string') record.reason = reason;
          settle(isOutcomeUnknown(e) ? { kind: 'unknown', detail } : { kind: 'error', detail });
        },
      );
  }

  /**
   * The process dies and a new one takes the port: every connection drops, memory sessions are gone.
   * Sharing, one instance (in turn) stops: it drops its lease (so the calls it ran are answered for at
   * once by the other) and its sessions live on in Redis.
   */
  private async restartServer(): Promise<void> {
    const slot = this.slots[this.instanceRestarts % this.slots.length] as (typeof this.slots)[number];
    const old = slot.current;
    this.deaths.push({ instance: slot.instance, at: this.now() });
    slot.instance = `i${this.slots.indexOf(slot)}#${++this.started}`;
    if (this.config.sharedRedisUrl) this.instanceRestarts++;
    else this.serverRestarts++;
    this.retired.push(old);
    slot.current = this.makeServer();
    slot.httpServer.closeAllConnections();
    if (this.config.sharedRedisUrl) await old.close().catch(() => undefined);
    this.note(`server restarted as g${this.generation}`);
  }

  /** The client process dies without a goodbye; a new one starts from the same cursor file. */
  private async restartClient(): Promise<void> {
    const old = this.process;
    for (const call of this.calls.values()) {
      if (call.pid === old.pid && call.outcome === undefined) call.abandoned = true;
    }
    const lastSession = old.sessions.at(-1);
    old.transport.actor.stop(); // its fetches abort: its connections close
    await old.store.kill();
    this.dead.push(old);
    this.process = await this.spawnClient();
    // The cursor file should hold the session the dead process was in, if that session is still alive.
    const lastAlive =
      lastSession !== undefined && this.sessionGeneration.get(lastSession) === this.generation;
    if (lastAlive && this.process.restoredSession !== lastSession) {
      this.clientRestartsWithoutCursor++;
      this.note(
        `client p${this.process.pid} restored ${this.process.restoredSession ?? 'nothing'} but p${old.pid} was in ${lastSession}`,
      );
    }
    const pid = this.process.pid;
    void this.process.client.listTools().then(
      () => this.annotationsKnownAt.set(pid, this.now()),
      () => undefined,
    );
  }

  private liveUnsettled(): string[] {
    return [...this.calls.values()].filter((c) => !c.abandoned && !c.outcome).map((c) => c.key);
  }

  /** Faults stop; waits (bounded, real time) until every live call has settled, then lets streams drain. */
  async settle(): Promise<StackOutcome> {
    this.note('settle');
    const settledAfterMs = await settleWithin(() => this.liveUnsettled(), SETTLE_BOUND_MS);
    await sleep(DRAIN_MS);
    return {
      config: this.config,
      commands: this.commands,
      calls: this.calls,
      effects: this.demo.effects,
      mcpServers: this.mcpServers,
      serverRestarts: this.serverRestarts,
      clientRestartsWithoutCursor: this.clientRestartsWithoutCursor,
      adoptedSessions: this.adoptedSessions,
      transitions: this.transitions,
      deaths: this.deaths,
      annotationsKnownAt: this.annotationsKnownAt,
      gaps: this.gaps,
      appended: this.appended,
      orphans: this.orphans,
      hung: this.liveUnsettled(),
      settledAfterMs,
      log: this.log,
      errors: this.errors,
    };
  }

  /** Stops every client, the proxy, every server generation, the HTTP server; removes the temp dir. */
  async close(): Promise<void> {
    this.closing = true;
    for (const p of this.dead) {
      // The dead process's SDK client still holds its pending requests: release them (no network).
      p.transport.onclose?.();
    }
    if (this.process) {
      await this.process.client.close().catch(() => undefined);
      await this.process.store.kill(); // no cursor write may land after the directory is gone
    }
    // FaultProxy.close() also waits for connections it refused with failNext, which it does not track: an
    // idle keep-alive socket holding a refusal slot stays open until fetch's pool lets go of it (~4 s).
    // Don't wait for that; the socket closes on its own.
    if (this.proxy) await Promise.race([this.proxy.close().catch(() => undefined), sleep(250)]);
    await this.balancer?.close().catch(() => undefined);
    for (const s of [...this.retired, ...this.slots.map((x) => x.current)])
      await s.close().catch(() => undefined);
    for (const { httpServer } of this.slots) {
      httpServer.closeAllConnections();
      await new Promise<void>((r) => httpServer.close(() => r()));
    }
    if (this.dir) await rm(this.dir, { recursive: true, force: true, maxRetries: 3 });
  }
}

function short(sessionId: string): string {
  return sessionId.slice(0, 6);
}

/** Runs one schedule on a fresh stack, settles, and tears everything down. */
export async function runStack(
  commands: readonly StackCommand[],
  config: StackConfig,
  variant: StackVariant = {},
): Promise<StackOutcome> {
  const world = await StackWorld.start(config, variant);
  try {
    for (const cmd of commands) await world.apply(cmd);
    return await world.settle();
  } finally {
    await world.close();
  }
}

/**
 * fast-check over random configs and schedules, each run on a fresh stack and judged by every check; a
 * failure throws the violations and the run's timeline. `config` is laid over each generated config.
 * A reported failure is replayed with MCPC_STACK_SEED and MCPC_STACK_PATH, whichever suite printed it.
 */
export async function assertStackProperties(o: {
  readonly runs: number;
  readonly seed?: number;
  readonly path?: string;
  readonly shrink?: boolean;
  readonly config?: Partial<StackConfig>;
}): Promise<void> {
  // Chosen here and printed before the run, so any run can be replayed, not only a failing one.
  const seed = runSeed(o.seed, 'MCPC_STACK_SEED');
  const path = o.path ?? process.env.MCPC_STACK_PATH;
  console.info(`stack properties: ${o.runs} schedules, seed ${seed} (replay: MCPC_STACK_SEED=${seed})`);
  await fc.assert(
    fc.asyncProperty(configArb, scheduleArb, async (config, schedule) => {
      const outcome = await runStack(schedule, { ...config, ...o.config });
      const violations = judge(outcome);
      if (Object.keys(violations).length > 0) throw new Error(report(outcome, violations));
    }),
    {
      numRuns: o.runs,
      endOnFailure: !o.shrink,
      seed,
      ...(path ? { path } : {}),
    },
  );
}

// ---------------------------------------------------------------------------------------------------
// The checks: the model's invariants (properties/checks.ts), judged on what the real stack recorded.
// ---------------------------------------------------------------------------------------------------

export type StackCheck = (o: StackOutcome) => string[];

/** What the real stack recorded, as the neutral trace the era's checks read (properties/checks.ts). */
export function stackTrace(o: StackOutcome): Trace {
  const calls = new Map<string, CallTrace>();
  for (const c of o.calls.values()) {
    const known = o.annotationsKnownAt.get(c.pid);
    calls.set(c.key, {
      key: c.key,
      tool: c.tool,
      at: c.startedAt,
      resendable: STACK_RESENDABLE.has(c.tool) && known !== undefined && known < c.startedAt,
      outcome: c.outcome?.kind,
      reason: c.outcome?.kind === 'error' ? c.outcome.detail : c.reason,
      settledAt: c.settledAt,
      outcomes: c.outcomes,
      abandoned: c.abandoned,
      owners: c.owners,
    });
  }
  // Only a charge's effect is counted (in the tool handler); only a charge has one that must not repeat.
  const charges = new Map([...o.effects].filter(([key]) => o.calls.get(key)?.tool === 'charge'));
  return {
    calls,
    executions: charges,
    sideEffects: charges,
    hung: o.hung,
    sessionEnds: [],
    deaths: o.deaths,
    evictions: [],
  };
}

/** The demo tools annotated read-only (test/server/harness.ts). */
const STACK_RESENDABLE: ReadonlySet<string> = new Set(['chatty']);

/** A check of the 2025 era (properties/checks.ts, checks/common.ts), judged on the real stack. */
const onStack =
  (check: TraceCheck): StackCheck =>
  (o) =>
    check(stackTrace(o), RULES_2025);

/**
 * What the real stack recorded of delivery, as the neutral record the delivery checks read
 * (properties/checks/delivery.ts, shared with the model): per call and source (session, wire request), the
 * progress numbers the application got in arrival order and, for a live call, the numbers the server
 * sent and the gaps it was told of; the client's session moves; whose progress reached which handler.
 */
export function stackDelivery(o: StackOutcome): DeliveryTrace {
  const streams: StreamDelivery[] = [];
  const progress: ProgressDelivery[] = [];
  const sizeless = (session: string, wire: string) =>
    o.gaps.some(
      (g) =>
        g.sessionId === session &&
        g.lostCount === null &&
        (g.streamKey === `s:${wire}` || g.reason === 'session_lost'),
    );
  for (const c of o.calls.values()) {
    const sources = new Map<string, { origin?: string; request?: string; ns: number[] }>();
    for (const d of c.delivered) {
      progress.push({
        receiver: c.key,
        sentFor:
          d.request === undefined || c.wireIds.has(d.request)
            ? c.key
            : `${wireCall(o, d.request) ?? '?'} (request ${d.request})`,
        n: d.n,
      });
      // Another call's notifications are judged by `no misdelivery`, not here.
      if (d.request !== undefined && !c.wireIds.has(d.request)) continue;
      const id = `${d.origin}/${d.request}`;
      const source = sources.get(id) ?? { origin: d.origin, request: d.request, ns: [] };
      source.ns.push(d.n);
      sources.set(id, source);
    }
    // What the server sent for this call, per session: owed to a live call.
    for (const wire of c.abandoned ? [] : c.wireIds)
      for (const session of o.appended.get(wire)?.keys() ?? [])
        if (!sources.has(`${session}/${wire}`))
          sources.set(`${session}/${wire}`, { origin: session, request: wire, ns: [] });
    for (const source of sources.values()) {
      const { origin, request: wire } = source;
      const sent =
        c.abandoned || wire === undefined || origin === undefined
          ? undefined
          : o.appended.get(wire)?.get(origin);
      streams.push({
        label: `${c.key} (${c.tool} ${JSON.stringify(c.args)}, outcome ${c.outcome?.kind ?? 'none'}): progress from ${origin ? short(origin) : '?'}/${wire}`,
        delivered: source.ns,
        sent,
        flagged: o.gaps
          .filter((g) => g.sessionId === origin && g.streamKey === `s:${wire}`)
          .reduce((sum, g) => sum + (g.lostCount ?? 0), 0),
        sizelessLoss:
          c.outcome?.kind === 'unknown' ||
          (wire !== undefined && origin !== undefined && sizeless(origin, wire)),
      });
    }
    // The simple form of the same promise, for a chatty call that ended with a result: all of its count.
    if (c.tool === 'chatty' && c.outcome?.kind === 'result' && !c.abandoned) {
      const origin = c.outcome.origin;
      const own = c.delivered.filter((d) => d.origin === origin && c.wireIds.has(d.request ?? ''));
      const streamGaps = o.gaps.filter((g) => g.sessionId === origin && c.wireIds.has(g.streamKey.slice(2)));
      streams.push({
        label: `${c.key}: result from ${origin ? short(origin) : '?'}`,
        // Any of its wire ids may have delivered a number: once is enough here (duplicates are judged above).
        delivered: [...new Set(own.map((d) => d.n))].sort((x, y) => x - y),
        sent: Array.from({ length: c.args.count as number }, (_, i) => i + 1),
        flagged: streamGaps.reduce((sum, g) => sum + (g.lostCount ?? 0), 0),
        sizelessLoss: streamGaps.some((g) => g.lostCount === null),
      });
    }
  }
  // Distinct sessions: sharing, several instances each re-create an McpServer for one session.
  const adopted = new Set(
    o.mcpServers.filter((m) => o.adoptedSessions.has(m.sessionId)).map((m) => m.sessionId),
  ).size;
  return {
    streams,
    lossReports: [],
    leaves: o.transitions.map((t) => ({
      label: `p${t.pid} left session ${short(t.from)} (server g${t.fromGeneration}) for ${t.to ? short(t.to) : '-'} at ${t.at}ms`,
      serverStillHad: t.fromGeneration === t.liveGeneration,
    })),
    progress,
    sessionsAdopted: {
      adopted,
      allowed: 1 + o.serverRestarts + o.clientRestartsWithoutCursor,
      why: `${o.mcpServers.length} McpServers created, ${o.serverRestarts} server restarts, ${o.clientRestartsWithoutCursor} cursor-less client restarts`,
    },
  };
}

function wireCall(o: StackOutcome, wire: string): string | undefined {
  for (const c of o.calls.values()) if (c.wireIds.has(wire)) return c.key;
  return undefined;
}

/** A delivery check (properties/checks/delivery.ts), judged on the real stack. */
const onDelivery =
  (check: DeliveryCheck): StackCheck =>
  (o) =>
    check(stackDelivery(o));

export const STACK_CHECKS = {
  'at most once': onStack(COMMON_CHECKS['at most once']),
  'honest errors': onStack(COMMON_CHECKS['honest errors']),
  'no unflagged loss': onDelivery(DELIVERY_CHECKS['no unflagged loss']),
  'no hang': onStack(COMMON_CHECKS['no hang']),
  'settled once': onStack(COMMON_CHECKS['settled once']),
  're-sent when safe': onStack(COMMON_CHECKS['re-sent when safe']),
  'deaths excuse only their own calls': onStack(COMMON_CHECKS['deaths excuse only their own calls']),
  'session survives transport': onDelivery(DELIVERY_CHECKS['session survives transport']),
  'no duplicate delivery': onDelivery(DELIVERY_CHECKS['no duplicate delivery']),
  'no misdelivery': onDelivery(DELIVERY_CHECKS['no misdelivery']),
} as const satisfies Record<string, StackCheck>;

export type StackCheckName = keyof typeof STACK_CHECKS;

/** Runs every check (minus `skip`) and returns the violations found, by check. */
export function judge(
  o: StackOutcome,
  skip: ReadonlySet<StackCheckName> = new Set(),
): Partial<Record<StackCheckName, string[]>> {
  const found: Partial<Record<StackCheckName, string[]>> = {};
  for (const [name, check] of Object.entries(STACK_CHECKS) as Array<[StackCheckName, StackCheck]>) {
    if (skip.has(name)) continue;
    const v = check(o);
    if (v.length > 0) found[name] = v;
  }
  return found;
}

/** A readable account of a failing run: the violations, then what happened, in order. */
export function report(o: StackOutcome, violations: Partial<Record<StackCheckName, string[]>>): string {
  const lines = [
    `config ${JSON.stringify(o.config)}; schedule ${JSON.stringify(o.commands)}`,
    ...Object.entries(violations).flatMap(([name, vs]) => [
      `✗ ${name}:`,
      ...(vs ?? []).map((v) => `    ${v}`),
    ]),
    `effects ${JSON.stringify([...o.effects])}; McpServers ${o.mcpServers.length}; server restarts ${o.serverRestarts}`,
    'timeline:',
    ...o.log.map((l) => `  ${l}`),
  ];
  if (o.errors.length > 0) lines.push('client errors:', ...o.errors.slice(0, 30).map((e) => `  ${e}`));
  return lines.join('\n');
}
