import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer } from '@modelcontextprotocol/server';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { z } from 'zod';
import { continuityCapability, DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { COMMON_CHECKS, type TraceCheck } from '../../properties/checks/common.js';
import {
  DELIVERY_CHECKS,
  type DeliveryTrace,
  type StreamDelivery,
} from '../../properties/checks/delivery.js';
import type { CallTrace, InstanceDeath, Trace } from '../../properties/checks/trace.js';
import {
  RULES_MODERN,
  realResultAfterFaults as realResultAfterFaultsOf,
} from '../../properties/checks-modern.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { isOutcomeUnknown } from '../../src/client/outcome.js';
import type { EventLog } from '../../src/server/event-log.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests, type KeyedRequests } from '../../src/server/keyed/index.js';
import type { MemoStore } from '../../src/server/memo-store.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { SqliteEventLog } from '../../src/server/sqlite-event-log.js';
import { SqliteMemoStore } from '../../src/server/sqlite-memo-store.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import {
  FaultLoop,
  isNetworkCommand,
  type NetworkCommand,
  type ProxyConnection,
  runSeed,
  settleWithin,
  sleep,
} from './fault-loop.js';

/**
 * The model's properties on the REAL stack for MCP 2026-07-28: the official v2 `Client` pinned to
 * 2026-07-28 with `continuityFetch()` → FaultProxy → `createContinuityServer({ modern })` on a v2
 * `McpServer`, with the continuity extension (keyed requests on a durable SQLite memo + log, or on a memory
 * memo that a restart forgets) or without it (the official v2 server path through our endpoint, unkeyed).
 * Commands are data, so fast-check generates, shrinks and prints them. What the checks judge is recorded
 * outside the system under test: side effects in the tool bodies, progress as the application's
 * `onprogress` receives it, outcomes as `client.callTool` settles.
 */
export type ModernCommand =
  /** Not idempotent, not read-only: its side effect (counted per call) lands after `ms`. */
  | { readonly kind: 'charge'; readonly ms: number }
  /** Not read-only: sends progress 1..count, `intervalMs` apart, then answers. Its start is counted. */
  | { readonly kind: 'stream'; readonly count: number; readonly intervalMs: number }
  /** `readOnlyHint: true`: may be re-issued freely; answers after `ms`. */
  | { readonly kind: 'lookup'; readonly ms: number }
  /** No healthy backend for `ms`: open connections reset, new ones get 503. */
  | { readonly kind: 'outage'; readonly ms: number }
  /**
   * The server process dies and a new one takes the port: every connection drops; the dead process does
   * nothing more (its tool bodies stop before their side effect, its stores never answer again). SQLite:
   * the new process opens the same files. Memory: the new process remembers nothing.
   */
  | { readonly kind: 'serverRestart' }
  /** The network faults and waits both worlds share (fault-loop.ts). */
  | NetworkCommand;

export type CallKind = 'charge' | 'stream' | 'lookup';

export interface ModernConfig {
  /** The continuity extension on a durable SQLite memo + log, on a memory memo + log, or off (`none`). */
  readonly memo: 'sqlite' | 'memory' | 'none';
  /** SSE keep-alive comments every HEARTBEAT_MS on modern streams, or none. */
  readonly keepAlive: boolean;
  /** The proxy cuts connections idle for PROXY_IDLE_MS (a load balancer), or never. */
  readonly idleCut: boolean;
}

/** Deliberately wrong systems, to show the checks can fail. */
export interface ModernVariant {
  /**
   * The server advertises the continuity extension in `server/discover` but has no keyed requests: the
   * client trusts the advertisement and re-issues a cut charge with its key, and the server runs it again.
   */
  readonly advertiseWithoutKeyed?: boolean;
  /**
   * Keyed requests whose runs are tied to the client's connection: a closed stream cancels the work (the
   * spec's rule without the extension), so a balancer's idle cut cancels a keyed charge mid-run.
   */
  readonly cancelKeyedOnClose?: boolean;
}

/** The wrong variant `cancelKeyedOnClose`: every keyed run also aborts when the client's request goes away. */
function cancellingOnClose(keyed: KeyedRequests): KeyedRequests {
  return {
    settings: keyed.settings,
    close: () => keyed.close(),
    serve: (call, run) =>
      keyed.serve(call, (message, signal) => run(message, AbortSignal.any([signal, call.request.signal]))),
  };
}

export const PROXY_IDLE_MS = 250;
export const HEARTBEAT_MS = 100;
export const STALL_MS = 400;
export const SETTLE_BOUND_MS = 8_000;
/** After the calls settled: tool bodies still running in the live process finish within this. */
const DRAIN_BOUND_MS = 2_000;
const BREATH_MS = 5;
/** The advertised memo window: longer than the client's memo margin, or it never re-issues through the extension. */
const MEMO_WINDOW_MS = DEFAULT_CONTINUITY_SETTINGS.memoWindowMs;
const MODERN = '2026-07-28';

const callArb: fc.Arbitrary<ModernCommand> = fc.oneof(
  {
    arbitrary: fc.record({ kind: fc.constant('charge' as const), ms: fc.integer({ min: 0, max: 400 }) }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('stream' as const),
      count: fc.integer({ min: 2, max: 8 }),
      intervalMs: fc.integer({ min: 10, max: 80 }),
    }),
    weight: 2,
  },
  {
    // Under the balancer's idle cut (250 ms): an unkeyed call longer than it finishes only through the
    // server's keep-alives (README, limits), which the world may turn off; see the unkeyed-stream test.
    arbitrary: fc.record({ kind: fc.constant('lookup' as const), ms: fc.integer({ min: 0, max: 200 }) }),
    weight: 1,
  },
);

const commandArb: fc.Arbitrary<ModernCommand> = fc.oneof(
  { arbitrary: callArb, weight: 4 },
  {
    arbitrary: fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 10, max: 300 }) }),
    weight: 3,
  },
  { arbitrary: fc.record({ kind: fc.constant('reset' as const), pick: fc.nat({ max: 7 }) }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'resetAll' as const }), weight: 1 },
  {
    arbitrary: fc.record({ kind: fc.constant('outage' as const), ms: fc.integer({ min: 20, max: 300 }) }),
    weight: 1,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('serverError' as const),
      count: fc.integer({ min: 1, max: 3 }),
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ kind: fc.constant('blackhole' as const), pick: fc.nat({ max: 7 }) }), weight: 1 },
  {
    arbitrary: fc.record({ kind: fc.constant('latency' as const), ms: fc.integer({ min: 0, max: 40 }) }),
    weight: 1,
  },
  { arbitrary: fc.constant({ kind: 'serverRestart' as const }), weight: 1 },
);

/** Schedules of 2–8 commands that start with a call, so there is something in flight to break. */
export const modernScheduleArb: fc.Arbitrary<ModernCommand[]> = fc
  .tuple(callArb, fc.array(commandArb, { minLength: 1, maxLength: 7 }))
  .map(([first, rest]) => [first, ...rest]);

export const modernConfigArb: fc.Arbitrary<ModernConfig> = fc.record({
  memo: fc.constantFrom('sqlite' as const, 'memory' as const, 'none' as const),
  keepAlive: fc.boolean(),
  idleCut: fc.boolean(),
});

export type ModernOutcomeKind =
  | { readonly kind: 'result'; readonly text: string | undefined }
  | { readonly kind: 'unknown'; readonly detail: string }
  | { readonly kind: 'error'; readonly detail: string };

export interface ModernCallRecord {
  readonly key: string;
  readonly tool: CallKind;
  readonly args: Record<string, unknown>;
  readonly startedAt: number;
  /** How each HTTP attempt of this call ended, as the client's inner fetch saw it. */
  readonly attempts: string[];
  /** Progress numbers in the order the application's `onprogress` received them. */
  readonly delivered: number[];
  outcome?: ModernOutcomeKind;
  /** Outcome unknown's (or an error's) `error.data.reason`. */
  reason?: string;
  settledAt?: number;
  /** Outcomes the application was given (more than one is a duplicate). */
  outcomes: number;
  /** Server processes (`g<n>`) that started its tool body. */
  readonly owners: string[];
}

export interface ModernOutcome {
  readonly config: ModernConfig;
  readonly variant: ModernVariant;
  readonly commands: readonly ModernCommand[];
  readonly calls: Map<string, ModernCallRecord>;
  /** Side effects per call key: charges that landed, stream bodies that started. */
  readonly effects: Map<string, number>;
  /** Tool bodies started per call key (any tool, any process). */
  readonly starts: Map<string, number>;
  /** When the last fault happened (a restart, a reset, a refusal, a black hole; idle cuts excluded). */
  readonly lastFaultAt: number;
  /** Server processes that died (`g<n>`), and when. */
  readonly deaths: readonly InstanceDeath[];
  readonly gaps: Array<{ readonly toolName: string; readonly lost: unknown; readonly at: number }>;
  readonly hung: string[];
  readonly settledAfterMs: number;
  readonly log: string[];
}

interface Generation {
  readonly g: number;
  dead: boolean;
  readonly server: ContinuityServer;
  /** The raw stores (closed at teardown, after the servers). */
  readonly stores: Array<{ close(): Promise<void> }>;
  /** Tool bodies of this process still running (not counting the dead process's frozen ones). */
  running: number;
}

/** What a dead process's pending work awaits: nothing ever again. */
const never = () => new Promise<never>(() => {});

/**
 * The deployment is older than its memo window: the SQLite memo has kept every key for longer than the
 * window, so it can tell a lost first attempt (an unknown key: run it) from an evicted one. A brand-new
 * memo cannot (docs/continuity-extension.md §4: outcome unknown), which `realResultAfterFaults` allows for.
 * Written the way SqliteMemoStore keeps it (`memo_meta.since`), before the store first opens the file.
 */
function ageMemo(path: string): void {
  const db = new Database(path);
  db.exec('CREATE TABLE IF NOT EXISTS memo_meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID');
  db.prepare("INSERT OR REPLACE INTO memo_meta (k, v) VALUES ('since', ?)").run(
    Date.now() - MEMO_WINDOW_MS - 60_000,
  );
  db.close();
}

/**
 * A store as a process that can die sees it: once `isDead()`, every call hangs forever (a dead process
 * never completes a write, nor reads again), so nothing it did not finish before its death lands.
 */
function mortal<T extends object>(target: T, isDead: () => boolean): T {
  return new Proxy(target, {
    get(t, p) {
      const v = Reflect.get(t, p, t);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => (isDead() ? never() : v.apply(t, args));
    },
  });
}

export class ModernStackWorld {
  private readonly t0 = Date.now();
  private readonly generations: Generation[] = [];
  private gen!: Generation;
  private httpServer!: http.Server;
  private proxy!: FaultProxy;
  private client!: Client;
  private dir!: string;
  private network!: FaultLoop;
  private callCount = 0;
  private closing = false;
  lastFaultAt = -1;
  readonly calls = new Map<string, ModernCallRecord>();
  readonly effects = new Map<string, number>();
  readonly starts = new Map<string, number>();
  readonly gaps: ModernOutcome['gaps'] = [];
  readonly deaths: InstanceDeath[] = [];
  readonly log: string[] = [];
  readonly commands: ModernCommand[] = [];

  private constructor(
    readonly config: ModernConfig,
    readonly variant: ModernVariant,
  ) {}

  static async start(config: ModernConfig, variant: ModernVariant = {}): Promise<ModernStackWorld> {
    const world = new ModernStackWorld(config, variant);
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

  private fault(what: string): void {
    this.lastFaultAt = this.now();
    this.note(what);
  }

  private async boot(): Promise<void> {
    this.dir = await mkdtemp(join(tmpdir(), 'mcpc-modern-stack-'));
    if (this.config.memo === 'sqlite') ageMemo(join(this.dir, 'memo.db'));
    this.gen = this.makeGeneration();
    this.httpServer = http.createServer((req, res) => this.gen.server.nodeHandler(req, res));
    await new Promise<void>((r) => this.httpServer.listen(0, '127.0.0.1', r));
    const port = (this.httpServer.address() as { port: number }).port;
    // The balancer's idle cut starts once the client is connected (below): on a busy machine the set-up's
    // probe may take longer than the cut, and a world that never started proves nothing.
    this.proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port } });
    this.network = new FaultLoop(this.proxy);
    this.proxy.on('fault', (e) => {
      if (e.type === 'cut' && e.reason === 'idle') this.note(`proxy cut #${e.id} ${e.label} (idle)`);
      else if (e.type === 'cut') this.fault(`proxy cut #${e.id} ${e.label} (${e.reason})`);
      else if (e.type === 'refused') this.fault(`proxy refused #${e.id} with ${e.status}`);
      else if (e.type === 'blackhole') this.fault(`proxy black-holed #${e.id} ${e.label}`);
    });
    this.client = new Client(
      { name: 'modern-stack', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: MODERN } } },
    );
    const fetchImpl = continuityFetch({
      fetch: (url, init) => this.observedFetch(url, init),
      stallTimeoutMs: STALL_MS,
      policy: {
        // Short, so a schedule stays short; long enough that some re-issues outlive a short outage.
        backoff: { initialDelayMs: 40, maxDelayMs: 400, factor: 2, maxRetries: 8, jitter: 'full' },
      },
      onGap: (gap, call) => {
        this.gaps.push({ toolName: call.toolName, lost: gap, at: this.now() });
        this.note(`gap ${call.toolName} ${JSON.stringify(gap)}`);
      },
      onCallEnded: (ending) => this.note(`ended ${ending.toolName}: ${JSON.stringify(ending).slice(0, 160)}`),
    });
    await this.client.connect(new StreamableHTTPClientTransport(this.proxy.url(), { fetch: fetchImpl }));
    // continuityFetch learns the tools' annotations (lookup is read-only) from the list as it passes.
    await this.client.listTools();
    if (this.config.idleCut) this.proxy.setIdleTimeout(PROXY_IDLE_MS);
  }

  /** One server process: its stores (wrapped so they die with it), its keyed requests, its endpoint. */
  private makeGeneration(): Generation {
    const g = this.generations.length + 1;
    const stores: Generation['stores'] = [];
    const generation: Generation = { g, dead: false, server: undefined as never, stores, running: 0 };
    const isDead = () => generation.dead;
    let keyed: KeyedRequests | undefined;
    if (this.config.memo !== 'none') {
      const log: EventLog =
        this.config.memo === 'sqlite'
          ? new SqliteEventLog({ path: join(this.dir, 'log.db') })
          : new MemoryEventLog();
      const memo: MemoStore =
        this.config.memo === 'sqlite'
          ? new SqliteMemoStore({ path: join(this.dir, 'memo.db'), memoWindowMs: MEMO_WINDOW_MS })
          : new MemoryMemoStore({ memoWindowMs: MEMO_WINDOW_MS });
      stores.push(log, memo);
      const real = createKeyedRequests({
        log: mortal(log, isDead),
        memo: mortal(memo, isDead),
        pollMs: 50,
        onError: (e) => this.note(`g${g} keyed error: ${(e as Error).message}`),
      });
      keyed = this.variant.cancelKeyedOnClose ? cancellingOnClose(real) : real;
    }
    const keepAliveMs = this.config.keepAlive ? HEARTBEAT_MS : 0;
    const server = createContinuityServer({
      // The 2025 side is never used here; the endpoint needs one.
      createMcpServer: () => new McpServerV1({ name: 'modern-stack-2025', version: '1.0.0' }),
      heartbeatMs: keepAliveMs,
      modern: {
        createServer: () => this.mcpServer(generation),
        keepAliveMs,
        ...(keyed ? { keyed } : {}),
      },
      onError: (e) => this.note(`g${g} server error: ${(e as Error).message}`),
    });
    Object.assign(generation, { server });
    this.generations.push(generation);
    this.note(`server g${g} up (${this.config.memo})`);
    return generation;
  }

  /** The application's v2 McpServer: three tools whose effects are counted here, outside the stack. */
  private mcpServer(gen: Generation): McpServer {
    const server = new McpServer({ name: 'modern-stack', version: '1.0.0' });
    if (this.variant.advertiseWithoutKeyed) {
      server.server.registerCapabilities(
        continuityCapability(DEFAULT_CONTINUITY_SETTINGS) as Parameters<
          typeof server.server.registerCapabilities
        >[0],
      );
    }
    const body = async <T>(key: string, work: () => Promise<T>): Promise<T> => {
      this.starts.set(key, (this.starts.get(key) ?? 0) + 1);
      const call = this.calls.get(key);
      if (call && !call.owners.includes(`g${gen.g}`)) call.owners.push(`g${gen.g}`);
      gen.running++;
      try {
        return await work();
      } finally {
        gen.running--;
      }
    };
    // A dead process does nothing more: the body stops where it is, before its side effect.
    const alive = async () => {
      if (gen.dead) await never();
    };
    server.registerTool(
      'charge',
      { inputSchema: z.object({ call: z.string(), ms: z.number() }) },
      // It ignores every abort signal: a cut connection does not stop a card being charged.
      ({ call, ms }) =>
        body(call, async () => {
          await sleep(ms);
          await alive();
          this.effects.set(call, (this.effects.get(call) ?? 0) + 1);
          this.note(`g${gen.g} charged ${call}`);
          return { content: [{ type: 'text' as const, text: `charged ${call}` }] };
        }),
    );
    server.registerTool(
      'stream',
      { inputSchema: z.object({ call: z.string(), count: z.number(), intervalMs: z.number() }) },
      ({ call, count, intervalMs }, ctx) =>
        body(call, async () => {
          await alive();
          this.effects.set(call, (this.effects.get(call) ?? 0) + 1);
          const token = ctx.mcpReq._meta?.progressToken;
          for (let i = 1; i <= count; i++) {
            await sleep(intervalMs);
            await alive();
            if (token !== undefined)
              await ctx.mcpReq.notify({
                method: 'notifications/progress',
                params: { progressToken: token, progress: i, total: count },
              });
          }
          return { content: [{ type: 'text' as const, text: `streamed ${call} ${count}` }] };
        }),
    );
    server.registerTool(
      'lookup',
      {
        inputSchema: z.object({ call: z.string(), ms: z.number() }),
        annotations: { readOnlyHint: true },
      },
      ({ call, ms }) =>
        body(call, async () => {
          await sleep(ms);
          await alive();
          return { content: [{ type: 'text' as const, text: `looked ${call}` }] };
        }),
    );
    return server;
  }

  /** The client's inner fetch: notes how each attempt of a call ends. */
  private async observedFetch(url: string | URL | Request, init: RequestInit | undefined): Promise<Response> {
    const call = this.callOf(init);
    const record = call ? this.calls.get(call) : undefined;
    try {
      const response = await fetch(url, init);
      if (record) {
        record.attempts.push(String(response.status));
        this.note(`POST ${call} → ${response.status}`);
      }
      return response;
    } catch (error) {
      if (record) {
        record.attempts.push((error as Error).name);
        this.note(`POST ${call} → ${(error as Error).name}: ${(error as Error).message}`);
      }
      throw error;
    }
  }

  private callOf(init: RequestInit | undefined): string | undefined {
    if (init?.method !== 'POST' || typeof init.body !== 'string') return;
    try {
      const body = JSON.parse(init.body) as { method?: string; params?: { arguments?: { call?: unknown } } };
      const call = body.params?.arguments?.call;
      return body.method === 'tools/call' && typeof call === 'string' ? call : undefined;
    } catch {
      return;
    }
  }

  async apply(cmd: ModernCommand): Promise<void> {
    this.commands.push(cmd);
    this.note(`> ${JSON.stringify(cmd)}`);
    if (isNetworkCommand(cmd)) {
      const blackholed = await this.network.apply(cmd);
      if (blackholed) this.faultUntilClosed(blackholed);
    } else if (cmd.kind === 'outage') {
      this.fault(`outage for ${cmd.ms} ms`);
      this.proxy.outage(cmd.ms);
      // The outage lasts: it is a fault until it ends.
      setTimeout(() => this.fault('outage over'), cmd.ms).unref();
    } else if (cmd.kind === 'serverRestart') this.restartServer();
    else this.call(cmd);
    await sleep(BREATH_MS);
  }

  private call(cmd: Extract<ModernCommand, { kind: CallKind }>): void {
    const key = `c${++this.callCount}`;
    const args: Record<string, unknown> =
      cmd.kind === 'stream'
        ? { call: key, count: cmd.count, intervalMs: cmd.intervalMs }
        : { call: key, ms: cmd.ms };
    const record: ModernCallRecord = {
      key,
      tool: cmd.kind,
      args,
      startedAt: this.now(),
      attempts: [],
      delivered: [],
      outcomes: 0,
      owners: [],
    };
    this.calls.set(key, record);
    const settle = (outcome: ModernOutcomeKind) => {
      if (this.closing) return;
      record.outcomes++;
      record.outcome = outcome;
      record.settledAt = this.now();
      this.note(`${key} (${cmd.kind}) → ${JSON.stringify(outcome)}`);
    };
    this.client
      .callTool(
        { name: cmd.kind, arguments: args },
        { onprogress: (p) => void record.delivered.push(p.progress) },
      )
      .then(
        (r) => {
          const content = r.content as Array<{ text?: string }> | undefined;
          if (r.isError) settle({ kind: 'error', detail: `isError ${content?.[0]?.text}` });
          else settle({ kind: 'result', text: content?.[0]?.text });
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
   * A black-holed connection stays a fault until it closes (an idle cut, the client's stall timer): a
   * pooled keep-alive connection may carry a call made long after the black hole began.
   */
  private faultUntilClosed(target: ProxyConnection): void {
    const started = Date.now();
    const watch = setInterval(() => {
      if (this.closing || Date.now() - started > SETTLE_BOUND_MS * 2) return clearInterval(watch);
      if (this.proxy.connections.has(target)) return;
      clearInterval(watch);
      this.fault(`black-holed #${target.id} closed`);
    }, 10);
    watch.unref();
  }

  /** The process dies (its stores and bodies freeze), a new one takes the port, every connection drops. */
  private restartServer(): void {
    this.gen.dead = true;
    this.deaths.push({ instance: `g${this.gen.g}`, at: this.now() });
    this.gen = this.makeGeneration();
    this.httpServer.closeAllConnections();
    this.fault(`server restarted as g${this.gen.g}`);
  }

  private unsettled(): string[] {
    return [...this.calls.values()].filter((c) => !c.outcome).map((c) => c.key);
  }

  /** Faults stop; waits (bounded) until every call has settled and the live process's bodies finished. */
  async settle(): Promise<ModernOutcome> {
    this.note('settle');
    const settledAfterMs = await settleWithin(() => this.unsettled(), SETTLE_BOUND_MS);
    // A body still running may yet land its side effect: the checks judge what finally happened.
    const drain = Date.now();
    while (this.gen.running > 0 && Date.now() - drain < DRAIN_BOUND_MS) await sleep(20);
    await sleep(50);
    return {
      config: this.config,
      variant: this.variant,
      commands: this.commands,
      calls: this.calls,
      effects: this.effects,
      starts: this.starts,
      lastFaultAt: this.lastFaultAt,
      deaths: this.deaths,
      gaps: this.gaps,
      hung: this.unsettled(),
      settledAfterMs,
      log: this.log,
    };
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.client?.close().catch(() => undefined);
    if (this.proxy) await Promise.race([this.proxy.close().catch(() => undefined), sleep(250)]);
    for (const g of this.generations) {
      g.dead = true;
      await g.server.close().catch(() => undefined);
    }
    if (this.httpServer) {
      this.httpServer.closeAllConnections();
      await new Promise<void>((r) => this.httpServer.close(() => r()));
    }
    for (const g of this.generations) for (const s of g.stores) await s.close().catch(() => undefined);
    if (this.dir) await rm(this.dir, { recursive: true, force: true, maxRetries: 3 });
  }
}

/** Runs one schedule on a fresh stack, settles, and tears everything down. */
export async function runModernStack(
  commands: readonly ModernCommand[],
  config: ModernConfig,
  variant: ModernVariant = {},
): Promise<ModernOutcome> {
  const world = await ModernStackWorld.start(config, variant);
  try {
    for (const cmd of commands) await world.apply(cmd);
    return await world.settle();
  } finally {
    await world.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// The checks: the model's invariants, judged on what the real stack recorded.
// ---------------------------------------------------------------------------------------------------

export type ModernCheck = (o: ModernOutcome) => string[];

const effectful = (c: ModernCallRecord) => c.tool === 'charge' || c.tool === 'stream';

/** What the real 2026 stack recorded, as the neutral trace the era's checks read (properties/checks-modern.ts). */
export function modernTrace(o: ModernOutcome): Trace {
  const calls = new Map<string, CallTrace>();
  for (const c of o.calls.values())
    calls.set(c.key, {
      key: c.key,
      tool: c.tool,
      at: c.startedAt,
      // continuityFetch learned the annotations from the tools/list the world awaits before any call.
      resendable: c.tool === 'lookup',
      outcome: c.outcome?.kind,
      reason: c.reason,
      settledAt: c.settledAt,
      outcomes: c.outcomes,
      abandoned: false,
      owners: c.owners,
      resultMismatch: resultMismatch(c),
      sideEffecting: effectful(c),
    });
  // A charge landing, a stream body starting: the effects that must not repeat (a lookup has none).
  const effects = new Map([...o.effects].filter(([key]) => effectfulKey(o, key)));
  return {
    calls,
    executions: effects,
    sideEffects: effects,
    hung: o.hung,
    sessionEnds: [],
    deaths: o.deaths,
    evictions: [],
  };
}

const effectfulKey = (o: ModernOutcome, key: string) => {
  const c = o.calls.get(key);
  return c !== undefined && effectful(c);
};

/** A check of the 2026 era (properties/checks-modern.ts, checks/common.ts), judged on the real stack. */
const onStack =
  (check: TraceCheck): ModernCheck =>
  (o) =>
    check(modernTrace(o), RULES_MODERN);

/** A charge never lands twice for one application call; a stream body never starts twice. */
export const atMostOnce: ModernCheck = onStack(COMMON_CHECKS['at most once']);

/**
 * A call that failed definitely never ran; one that ran ended with its result or outcome unknown; a result
 * is the real one (its text, and the effect happened exactly once): checks/common.ts, as in the model.
 */
export const honestErrors: ModernCheck = onStack(COMMON_CHECKS['honest errors']);

/** What the real tools answer: a result with another text was not produced by the tool for this call. */
function resultMismatch(c: ModernCallRecord): string | undefined {
  if (c.outcome?.kind !== 'result') return undefined;
  const expected =
    c.tool === 'charge'
      ? `charged ${c.key}`
      : c.tool === 'stream'
        ? `streamed ${c.key} ${c.args.count}`
        : `looked ${c.key}`;
  return c.outcome.text === expected
    ? undefined
    : `${JSON.stringify(c.outcome.text)}, not ${JSON.stringify(expected)}`;
}

/** Every call ends (result, error or outcome unknown) within SETTLE_BOUND_MS after the faults stop. */
export const noHang: ModernCheck = onStack(COMMON_CHECKS['no hang']);

/**
 * What the real 2026 stack recorded of progress, as the neutral record the delivery checks read
 * (properties/checks/delivery.ts, shared with the 2025 model and stack): per call, the progress numbers in
 * arrival order; a streamed call that ended with a result is owed all of its count, unless a gap was
 * reported for a stream call (its size is not recorded here).
 */
export function modernDelivery(o: ModernOutcome): DeliveryTrace {
  const streams: StreamDelivery[] = [...o.calls.values()].map((c) => ({
    label: `${c.key} (${c.tool}) progress`,
    delivered: c.delivered,
    sent:
      c.tool === 'stream' && c.outcome?.kind === 'result'
        ? Array.from({ length: c.args.count as number }, (_, i) => i + 1)
        : undefined,
    flagged: 0,
    sizelessLoss: o.gaps.some((g) => g.toolName === 'stream'),
  }));
  return { streams, lossReports: [], leaves: [], progress: [] };
}

/** Progress reaches the application once each, in order; a streamed result comes with all of it (or a gap). */
export const noDuplicateDelivery: ModernCheck = (o) => {
  const d = modernDelivery(o);
  return [...DELIVERY_CHECKS['no duplicate delivery'](d), ...DELIVERY_CHECKS['no unflagged loss'](d)];
};

/**
 * With the extension, a call that began after the last fault (restart, reset, refusal, outage, a black hole
 * until its connection closed; the balancer's idle cuts and latency are the weather, not faults) ends with
 * the real result: the model's check (properties/checks-modern.ts), on what the stack recorded.
 */
export const realResultAfterFaults: ModernCheck = (o) =>
  realResultAfterFaultsOf(modernTrace(o), {
    lastFaultAt: o.lastFaultAt,
    weather: true,
    memo: o.config.memo === 'sqlite' ? 'durable' : o.config.memo,
    starts: o.starts,
    // This world's application never reuses a key and no bound is set.
    ownDoing: new Map(),
  });

export const MODERN_CHECKS = {
  'at most once': atMostOnce,
  'honest errors': honestErrors,
  'no hang': noHang,
  'settled once': onStack(COMMON_CHECKS['settled once']),
  're-sent when safe': onStack(COMMON_CHECKS['re-sent when safe']),
  'no duplicate or out-of-order progress': noDuplicateDelivery,
  'the real result after the faults': realResultAfterFaults,
} as const satisfies Record<string, ModernCheck>;

export type ModernCheckName = keyof typeof MODERN_CHECKS;

/** Runs every check and returns the violations found, by check. */
export function judgeModern(o: ModernOutcome): Partial<Record<ModernCheckName, string[]>> {
  const found: Partial<Record<ModernCheckName, string[]>> = {};
  for (const [name, check] of Object.entries(MODERN_CHECKS) as Array<[ModernCheckName, ModernCheck]>) {
    const v = check(o);
    if (v.length > 0) found[name] = v;
  }
  return found;
}

/** A readable account of a run: the violations, then what happened, in order. */
export function reportModern(
  o: ModernOutcome,
  violations: Partial<Record<ModernCheckName, string[]>>,
): string {
  return [
    `config ${JSON.stringify(o.config)}; variant ${JSON.stringify(o.variant)}; schedule ${JSON.stringify(o.commands)}`,
    ...Object.entries(violations).flatMap(([name, vs]) => [
      `✗ ${name}:`,
      ...(vs ?? []).map((v) => `    ${v}`),
    ]),
    `effects ${JSON.stringify([...o.effects])}; starts ${JSON.stringify([...o.starts])}; settled after ${o.settledAfterMs} ms`,
    'timeline:',
    ...o.log.map((l) => `  ${l}`),
  ].join('\n');
}

/**
 * fast-check over random configs and schedules, each on a fresh stack and judged by every check; a failure
 * throws the violations and the run's timeline. Seed and path from the arguments or MCPC_MODERN_STACK_SEED /
 * MCPC_MODERN_STACK_PATH; the seed is printed before the run, so any run can be replayed.
 */
export async function checkModernProperties(o: {
  readonly runs: number;
  readonly seed?: number;
  readonly path?: string;
  readonly shrink?: boolean;
  readonly config?: Partial<ModernConfig>;
  readonly variant?: ModernVariant;
  readonly label?: string;
}): Promise<fc.RunDetails<[ModernConfig, ModernCommand[]]>> {
  const seed = runSeed(o.seed, 'MCPC_MODERN_STACK_SEED');
  const path = o.path ?? process.env.MCPC_MODERN_STACK_PATH;
  console.info(
    `${o.label ?? 'modern stack properties'}: ${o.runs} schedules, seed ${seed} (replay: MCPC_MODERN_STACK_SEED=${seed})`,
  );
  const tally = new Map<string, number>();
  const count = (k: string) => tally.set(k, (tally.get(k) ?? 0) + 1);
  const details = await fc.check(
    fc.asyncProperty(modernConfigArb, modernScheduleArb, async (config, schedule) => {
      const outcome = await runModernStack(schedule, { ...config, ...o.config }, o.variant);
      count(`memo ${outcome.config.memo}`);
      for (const c of outcome.calls.values()) count(`${c.tool} → ${c.outcome?.kind ?? 'none'}`);
      for (const cmd of outcome.commands) if (cmd.kind === 'serverRestart') count('server restarts');
      const violations = judgeModern(outcome);
      if (Object.keys(violations).length > 0) throw new Error(reportModern(outcome, violations));
    }),
    { numRuns: o.runs, endOnFailure: !o.shrink, seed, ...(path ? { path } : {}) },
  );
  // What the runs exercised: evidence the schedules reach the interesting endings, not only results.
  console.info(
    `${o.label ?? 'modern stack properties'}: ${[...tally]
      .sort()
      .map(([k, n]) => `${k}: ${n}`)
      .join('; ')}`,
  );
  return details;
}
