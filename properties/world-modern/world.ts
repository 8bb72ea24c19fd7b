import type {
  ModernCallContext,
  ModernCallDecision,
  ModernCallStreamEnd,
} from '../../machines/client/modern-call-decide.js';
import { DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { VirtualClock } from '../world/clock.js';
import { SimNetwork } from '../world/network.js';
import { seededRandom } from '../world/random.js';
import {
  CORRECT_CLIENT_MODERN,
  type ModernClientVariant,
  SIM_MODERN_CALL_POLICY,
  SimCall,
} from './client.js';
import { type ModernReceiver, SLOW_LINK_MODERN } from './link.js';
import { ModernRecorder } from './recorder.js';
import {
  type ModernServerDecisions,
  type ModernServerObservation,
  ModernSimServer,
  RUNTIME_DECISIONS,
} from './server.js';
import type { ModernTool } from './tools.js';

/**
 * The simulated world of MCP 2026-07-28: one application making calls, the network (per-message latency,
 * cuts, stalls, refusals, a balancer that cuts idle connections, injected 503/429/5xx), and a server of
 * one or two instances with or without the continuity extension, on one virtual clock. Commands are data
 * so fast-check can generate, shrink and print them.
 */
export type CommandModern =
  | { readonly kind: 'call'; readonly tool: ModernTool }
  /** The application's bug: a new call (other arguments) with the idempotency key of an earlier one. */
  | { readonly kind: 'callReusingKey'; readonly tool: ModernTool; readonly pick: number }
  | { readonly kind: 'advance'; readonly ms: number }
  /** One open connection resets (by position, so it stays valid while shrinking). */
  | { readonly kind: 'reset'; readonly pick: number }
  /** The balancer recycles: every connection resets. */
  | { readonly kind: 'resetAll' }
  /** The next `count` requests get `status` before reaching any instance. */
  | {
      readonly kind: 'serverError';
      readonly count: number;
      readonly status: number;
      /** The failures carry `Retry-After: 1` (a server shedding load); absent: a proxy's plain status. */
      readonly retryAfter?: boolean;
    }
  /** The next `count` POSTs run, but the balancer answers 503 without Retry-After (upstream reset). */
  | { readonly kind: 'upstreamReset'; readonly count: number }
  /** A proxy ends one response cleanly, without its answer. */
  | { readonly kind: 'endStream'; readonly pick: number }
  /** One connection goes silent without closing. */
  | { readonly kind: 'stall'; readonly pick: number }
  /** Nothing gets through for `ms`: open connections go silent, new ones are refused. */
  | { readonly kind: 'partition'; readonly ms: number }
  /**
   * For `ms` the path swallows everything without a word: open connections go silent and new ones never
   * reach a server nor hear back (a black hole, not a refusal). Only stall detection or the balancer ends them.
   */
  | { readonly kind: 'blackhole'; readonly ms: number }
  /**
   * The server's tool changes whether it declares an argument as an `Mcp-Param-*` header (`x-mcp-header`):
   * the application's view (its cached tools/list) is stale until it refreshes it after a -32020.
   */
  | { readonly kind: 'schemaChange'; readonly tool: ModernTool }
  /** A proxy retries the next keyed POST on its own: the server gets two copies at once. */
  | { readonly kind: 'duplicate' }
  /** One instance dies, and is back after `downMs` (0: a restart; with two instances the other serves). */
  | { readonly kind: 'instanceDies'; readonly pick: number; readonly downMs?: number }
  /**
   * One open connection trickles: the message in flight never completes, a few bytes keep coming (link.ts).
   * The balancer sees traffic; only the client's progress rule can tell it from a live stream.
   */
  | { readonly kind: 'trickle'; readonly pick: number }
  /** The application aborts one of its calls still open (its fetch's signal), by position. */
  | { readonly kind: 'cancel'; readonly pick: number };

export interface ModernWorldConfig {
  readonly extension: boolean;
  readonly memo: 'memory' | 'durable';
  /** 2 only with a durable memo (the extension's fleet rule: a shared memo). */
  readonly instances: number;
  /** Heartbeats (keep-alives) on: stall detection on the client. A balancer cuts connections idle for `lbIdleMs` either way. */
  readonly heartbeat: boolean;
  readonly lbIdleMs: number;
  readonly headersEarly: boolean;
  readonly memoWindowMs: number;
  /** The memo store is as old as its window at the start (complete), or fresh (0). */
  readonly memoOld?: boolean;
  readonly maxEventsPerRequest: number;
  readonly eventRetentionMs: number;
  readonly latencyMaxMs: number;
  readonly seed: number;
  /** The last hop to the client is slow: a call's answer takes longer than the stall timeout (link.ts). */
  readonly slowLink?: boolean;
  /**
   * 2: two applications with their own credentials (principals `alice` and `bob`) call the same server,
   * taking turns; each chooses its keys on its own, so a key of one may be a key of the other.
   */
  readonly principals?: 1 | 2;
  /** The server's per-principal bound on live keys (running or inside their window); absent: none. */
  readonly maxKeysPerPrincipal?: number;
  /**
   * Set: the server has no `authenticate`. Its requests carry no principal (every caller is its one
   * principal, so keys are shared), and each application's address (alice's and bob's hosts with two) is
   * held to this many live keys per process (`maxEntriesPerAddress`).
   */
  readonly maxKeysPerAddress?: number;
}

export const DEFAULT_WORLD_MODERN: ModernWorldConfig = {
  extension: true,
  memo: 'durable',
  instances: 1,
  heartbeat: true,
  lbIdleMs: 2_500,
  headersEarly: true,
  memoWindowMs: 600_000,
  maxEventsPerRequest: 4,
  eventRetentionMs: 600_000,
  latencyMaxMs: 1,
  seed: 1,
};

export interface ModernWorldVariant {
  readonly client: ModernClientVariant;
  /** The server's decisions (a mutant wraps one of the runtime's plan functions). */
  readonly server?: ModernServerDecisions;
  /**
   * Swaps one piece of a real machine or table in place for the duration of the world, and returns the
   * undo (a mutant of a decision the runtime reaches without a seam: a guard of `keyedRequestMachine`,
   * which `stepMemoEntry` runs; a row of `MODERN_CALL_DECISION_TABLE`, which the call machine reads).
   */
  readonly patch?: () => () => void;
}

export const CORRECT_MODERN: ModernWorldVariant = { client: CORRECT_CLIENT_MODERN };

/** An instance down this long never comes back within a world (the fleet shrank; its lease is gone). */
export const GONE_FOR_GOOD_MS = 1_000_000_000;

const HEARTBEAT_MS = 1_000;
/** Keep-alives often enough for the balancer's idle timeout (as an operator sets `keepAliveMs`). */
const heartbeatMs = (lbIdleMs: number): number => Math.min(HEARTBEAT_MS, Math.floor(lbIdleMs / 3));
/** The client's stall timeout in a world with heartbeats. */
export const STALL_MODERN_MS = 3_500;
/** After the faults stop, how long every call may take to end before it counts as hung. */
export const SETTLE_BOUND_MODERN_MS = 120_000;

export interface ModernWorldOutcome {
  readonly config: ModernWorldConfig;
  readonly recorder: ModernRecorder;
  /** Calls without an outcome when the settle bound ran out. */
  readonly hung: string[];
}

/** What the world tells whoever counts the decisions it reached (coverage-modern.ts). */
export interface ModernObserver {
  decision?(end: ModernCallStreamEnd, ctx: ModernCallContext, d: ModernCallDecision): void;
  server?(o: ModernServerObservation): void;
}

export class WorldModern {
  readonly clock = new VirtualClock();
  readonly net: SimNetwork;
  readonly recorder = new ModernRecorder();
  readonly server: ModernSimServer;
  private readonly calls: SimCall[] = [];
  /** Each application call's current request (the SDK's re-send after a -32020 is a new one). */
  private readonly current = new Map<string, SimCall>();
  /** Each open attempt's receiver, by connection id. */
  private readonly receivers = new Map<
    number,
    { readonly callKey: string; readonly receiver: ModernReceiver }
  >();
  private callCount = 0;
  private idCount = 0;
  private partitionUntil = 0;
  private swallowUntil = 0;
  /** The tools that declare a header now (the server's registry; none at the start). */
  private readonly declared = new Set<ModernTool>();
  /** The application's view of the declarations (its cached tools/list), refreshed after a -32020. */
  private readonly view = new Set<ModernTool>();
  /** Calls the application's SDK already sent again after a -32020 (it does so once). */
  private readonly retried = new Set<string>();

  constructor(
    readonly config: ModernWorldConfig = DEFAULT_WORLD_MODERN,
    private readonly variant: ModernWorldVariant = CORRECT_MODERN,
    private readonly observer: ModernObserver = {},
  ) {
    const random = seededRandom(config.seed);
    const max = Math.max(1, config.latencyMaxMs);
    this.net = new SimNetwork(this.clock, max === 1 ? () => 1 : () => 1 + Math.floor(random() * max));
    this.server = new ModernSimServer(
      this.clock,
      this.net,
      this.recorder,
      {
        extension: config.extension,
        settings: {
          ...DEFAULT_CONTINUITY_SETTINGS,
          memoWindowMs: config.memoWindowMs,
          maxEventsPerRequest: config.maxEventsPerRequest,
          eventRetentionMs: config.eventRetentionMs,
        },
        memo: config.memo,
        instances: config.memo === 'durable' ? config.instances : 1,
        heartbeatMs: config.heartbeat ? heartbeatMs(config.lbIdleMs) : 0,
        headersEarly: config.headersEarly,
        memoAgeMs: config.memoOld ? config.memoWindowMs : 0,
        ...(config.maxKeysPerPrincipal === undefined
          ? {}
          : { maxKeysPerPrincipal: config.maxKeysPerPrincipal }),
        ...(config.maxKeysPerAddress === undefined ? {} : { maxKeysPerAddress: config.maxKeysPerAddress }),
      },
      variant.server ?? RUNTIME_DECISIONS,
      observer.server,
      (tool) => this.declared.has(tool),
    );
    this.startBalancer();
  }

  /**
   * Cuts connections idle for `lbIdleMs`, as a load balancer does, in every world. Without keep-alives its
   * cuts are faults like any other. With them, and the extension, a call's connection is the server's to
   * keep busy (keyed and unkeyed calls alike are streamed with keep-alives): an idle cut there is the
   * server's failing, never an excuse (the 7c48461 bug). A connection the world broke otherwise (a stall,
   * a black hole) was recorded faulted when it broke.
   */
  private startBalancer(): void {
    const excuses = !(this.config.heartbeat && this.config.extension);
    const sweep = () => {
      for (const c of this.net.list()) {
        if (this.clock.now() - c.lastTraffic < this.config.lbIdleMs) continue;
        if (excuses) this.cut(c);
        else c.reset();
      }
      this.clock.setTimeout(sweep, 100);
    };
    this.clock.setTimeout(sweep, 100);
  }

  private cut(c: ReturnType<SimNetwork['list']>[number]): void {
    this.recorder.faultedConns.add(c.id);
    this.noteFault(this.clock.now());
    c.reset();
  }

  private call(tool: ModernTool, key: string | undefined): void {
    const callKey = `c${++this.callCount}`;
    this.recorder.calls.set(callKey, {
      callKey,
      // Without `authenticate` the server sees one principal; the applications differ by address.
      principal: this.config.maxKeysPerAddress === undefined ? this.principalOf(this.callCount) : '',
      address: this.principalOf(this.callCount) || 'app',
      tool,
      at: this.clock.now(),
      outcomes: 0,
      faultedEnds: 0,
      attempts: 0,
    });
    this.send(callKey, tool, key ?? `key-${callKey}`, this.callCount * 7919);
  }

  /** Who makes the `n`th call: the one principal, or alice and bob in turn. */
  private principalOf(n: number): string {
    if (this.config.principals !== 2) return '';
    return n % 2 === 1 ? 'alice' : 'bob';
  }

  /**
   * The application's SDK after a -32020 (the official v2 `Client.callTool`): refresh the view of the
   * declarations (tools/list; instant here), then send the call again as a new request, once.
   */
  private resend(callKey: string): boolean {
    const rec = this.recorder.calls.get(callKey);
    if (!rec || this.retried.has(callKey)) return false;
    this.retried.add(callKey);
    this.view.clear();
    for (const t of this.declared) this.view.add(t);
    this.recorder.refreshedAt.set(callKey, this.clock.now());
    // Through our client a new fetch: a new idempotency key (the SDK's own retry is a new request).
    this.send(callKey, rec.tool as ModernTool, `key-${callKey}-again`, this.callCount * 7919 + 1);
    return true;
  }

  private send(callKey: string, tool: ModernTool, key: string, seed: number): void {
    const deps = {
      clock: this.clock,
      net: this.net,
      serve: (c: ReturnType<SimNetwork['list']>[number]) => this.route(c),
      recorder: this.recorder,
      nextId: () => ++this.idCount,
      extension: this.config.extension ? { memoWindowMs: this.config.memoWindowMs } : undefined,
      policy: SIM_MODERN_CALL_POLICY,
      stallTimeoutMs: this.config.heartbeat ? STALL_MODERN_MS : 0,
      onDecision: this.observer.decision?.bind(this.observer),
      onHeaderMismatch: (k: string) => this.resend(k),
      link: this.config.slowLink ? SLOW_LINK_MODERN : undefined,
      receivers: this.receivers,
      principal: this.recorder.calls.get(callKey)?.principal ?? '',
      address: this.recorder.calls.get(callKey)?.address ?? 'app',
    };
    // The SDK builds the `Mcp-Param-*` headers from its view, once per request.
    const call = new SimCall(deps, this.variant.client, callKey, tool, key, seed, this.view.has(tool));
    this.calls.push(call);
    this.current.set(callKey, call);
  }

  apply(cmd: CommandModern): void {
    const open = this.net.list();
    const pick = <T>(xs: T[], i: number): T | undefined => (xs.length === 0 ? undefined : xs[i % xs.length]);
    const now = this.clock.now();
    if (cmd.kind === 'partition' || cmd.kind === 'blackhole') this.noteFault(now + cmd.ms);
    // An instance that is down is a fault until it is back.
    else if (cmd.kind === 'instanceDies') this.noteFault(now + (cmd.downMs ?? 0));
    else if (
      (cmd.kind === 'call' || cmd.kind === 'callReusingKey') &&
      (this.server.failNext > 0 || this.server.upstreamResetNext > 0)
    )
      this.noteFault(now + 1);
    else if (
      cmd.kind !== 'call' &&
      cmd.kind !== 'callReusingKey' &&
      cmd.kind !== 'advance' &&
      // The application's own abort is not the world's fault.
      cmd.kind !== 'cancel'
    )
      this.noteFault(now);
    switch (cmd.kind) {
      case 'call':
        this.call(cmd.tool, undefined);
        break;
      case 'callReusingKey': {
        const earlier = [...this.recorder.calls.values()].map((c) => c.key).filter((k) => k !== undefined);
        this.call(cmd.tool, pick(earlier, cmd.pick));
        break;
      }
      case 'advance':
        this.clock.runFor(cmd.ms);
        break;
      case 'reset': {
        const c = pick(open, cmd.pick);
        if (c) this.cut(c);
        break;
      }
      case 'resetAll':
        for (const c of open) this.cut(c);
        break;
      case 'serverError':
        this.server.failNext = cmd.count;
        this.server.failStatus = cmd.status;
        this.server.failRetryAfter = cmd.retryAfter === true;
        break;
      case 'upstreamReset':
        this.server.upstreamResetNext = cmd.count;
        break;
      case 'endStream': {
        const c = pick(open, cmd.pick);
        if (c) {
          this.recorder.faultedConns.add(c.id);
          c.send({ type: 'net.ended' });
        }
        break;
      }
      case 'stall': {
        const c = pick(open, cmd.pick);
        if (c) {
          this.recorder.faultedConns.add(c.id);
          c.blackholed = true;
          c.stalled = true;
        }
        break;
      }
      case 'partition':
        this.partition(cmd.ms);
        break;
      case 'blackhole':
        this.swallowUntil = Math.max(this.swallowUntil, now + cmd.ms);
        for (const c of open) this.swallow(c);
        break;
      case 'duplicate':
        this.server.duplicateNext = true;
        break;
      case 'schemaChange':
        if (this.declared.has(cmd.tool)) this.declared.delete(cmd.tool);
        else this.declared.add(cmd.tool);
        this.recorder.schemaChanges.push({ tool: cmd.tool, at: now });
        break;
      case 'instanceDies':
        for (const c of open) this.recorder.faultedConns.add(c.id);
        this.server.instanceDies(cmd.pick, cmd.downMs ?? 0);
        break;
      case 'trickle': {
        const c = pick(
          open.filter((x) => this.receivers.has(x.id)),
          cmd.pick,
        );
        const listening = c && this.receivers.get(c.id);
        const record = c && listening && { callKey: listening.callKey, conn: c.id, at: now };
        if (!c || !record || !listening?.receiver.trickle(record)) break;
        this.recorder.trickles.push(record);
        this.recorder.faultedConns.add(c.id);
        // What the server sends from now on never arrives (and healing the network does not reset it).
        c.blackholed = true;
        c.stalled = true;
        break;
      }
      case 'cancel': {
        const open = [...this.recorder.calls.values()].filter((r) => r.outcome === undefined);
        const rec = pick(open, cmd.pick);
        const call = rec && this.current.get(rec.callKey);
        call?.abort();
        break;
      }
    }
    this.clock.runFor(5);
  }

  /** Where the client's connections go: to the server, unless the path swallows them. */
  private route(c: ReturnType<SimNetwork['list']>[number]): void {
    this.recorder.watchAttempt(c, () => this.clock.now());
    if (this.clock.now() < this.swallowUntil) this.swallow(c);
    else this.server.serve(c);
  }

  private swallow(c: ReturnType<SimNetwork['list']>[number]): void {
    this.recorder.faultedConns.add(c.id);
    c.blackholed = true;
    c.stalled = true;
  }

  private noteFault(until: number): void {
    this.recorder.faultsEndAt = Math.max(this.recorder.faultsEndAt, until);
  }

  private partition(ms: number): void {
    this.net.refusing = true;
    for (const c of this.net.list()) {
      this.recorder.faultedConns.add(c.id);
      c.blackholed = true;
    }
    this.partitionUntil = Math.max(this.partitionUntil, this.clock.now() + ms);
    const until = this.partitionUntil;
    this.clock.setTimeout(() => {
      if (this.partitionUntil === until) this.heal();
    }, ms);
  }

  /** Refusals stop; connections that went silent in the partition are reset, as TCP would. */
  private heal(): void {
    this.net.refusing = false;
    for (const c of this.net.list()) if (c.blackholed && !c.stalled) c.reset();
  }

  /** Faults stop (the balancer goes on); the world runs until every call has ended, or the bound. */
  settle(): ModernWorldOutcome {
    this.server.failNext = 0;
    this.server.upstreamResetNext = 0;
    this.partitionUntil = 0;
    this.swallowUntil = 0;
    this.heal();
    // A client with a stall timer ends a trickle itself (the progress rule): it goes on. Without one nothing
    // on the client could, so there it stops with the other faults and the connection goes silent.
    if (!this.config.heartbeat)
      for (const t of this.recorder.trickles)
        if (t.endedAt === undefined && t.stoppedAt === undefined) t.stoppedAt = this.clock.now();
    // A stalled connection stays silent: only the client's stall timer or the balancer ends it.
    const start = this.clock.now();
    while (this.clock.now() - start < SETTLE_BOUND_MODERN_MS && this.unsettled().length > 0)
      this.clock.runFor(500);
    // Let whatever is still in flight land, so a late duplicate is seen.
    this.clock.runFor(2_000);
    return { config: this.config, recorder: this.recorder, hung: this.unsettled() };
  }

  private unsettled(): string[] {
    return [...this.recorder.calls.values()].filter((c) => c.outcome === undefined).map((c) => c.callKey);
  }

  stop(): void {
    for (const c of this.calls) c.stop();
  }
}

/** Runs one schedule from a fresh world and returns what happened. */
export function runScheduleModern(
  commands: readonly CommandModern[],
  config?: ModernWorldConfig,
  variant?: ModernWorldVariant,
  observer?: ModernObserver,
): ModernWorldOutcome {
  const undo = variant?.patch?.();
  const world = new WorldModern(config, variant, observer);
  try {
    for (const cmd of commands) world.apply(cmd);
    return world.settle();
  } finally {
    world.stop();
    undo?.();
  }
}
