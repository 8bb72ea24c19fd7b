import type { ReconnectPolicy } from '../../machines/backoff.js';
import type { CursorRecord } from '../../machines/client/cursor.js';
import { idleCut } from '../../machines/fault-timing.js';
import type { serverSessionMachine } from '../../machines/server/session.machine.js';
import { type Observe, serverRows } from '../coverage.js';
import { type ClientVariant, CORRECT_CLIENT, SimClientProcess } from './client.js';
import { VirtualClock } from './clock.js';
import { CURSOR_FILE_RULES, CursorStore } from './cursor-file.js';
import { sendDelete } from './delete.js';
import { SimNetwork } from './network.js';
import { seededRandom } from './random.js';
import { Recorder } from './recorder.js';
import { RUNTIME_RULES, type ServerRules, SimServer, type SimServerConfig } from './server.js';
import type { ToolName } from './tools.js';

/**
 * The simulated world: one application's client process (restartable), the network, and one server
 * (restartable), on one virtual clock. Commands are data so fast-check can generate, shrink and print them.
 */
export type Command =
  | { readonly kind: 'call'; readonly tool: ToolName }
  | { readonly kind: 'advance'; readonly ms: number }
  /** One open connection resets (chosen by position, so it stays valid while shrinking). */
  | { readonly kind: 'reset'; readonly pick: number }
  /** A load balancer recycles: every connection resets at once. */
  | { readonly kind: 'resetAll' }
  /** The next `count` requests get 503. */
  | { readonly kind: 'serverError'; readonly count: number; readonly status?: number }
  /** The server ends one response cleanly without `event: close` (polling, or a proxy's cut). */
  | { readonly kind: 'endStream'; readonly pick: number }
  /** One connection goes silent without closing (black hole). */
  | { readonly kind: 'stall'; readonly pick: number }
  /**
   * One connection's stream goes silent while a proxy keeps trickling a few bytes that complete nothing
   * (stalled, though bytes arrive). Without stall detection it is a plain stall: the balancer cuts it.
   */
  | { readonly kind: 'trickle'; readonly pick: number }
  /** Nothing gets through for `ms`: open connections go silent, new ones are refused. */
  | { readonly kind: 'partition'; readonly ms: number }
  /** `graceful` (without a durable log): sessions end first, so attached streams hear `event: close`. */
  | { readonly kind: 'serverRestart'; readonly durable: boolean; readonly graceful?: boolean }
  | { readonly kind: 'clientRestart'; readonly durable: boolean }
  /** The server pushes a numbered notification on each standalone stream. */
  | { readonly kind: 'serverNotify' }
  /** The application closes its transport (DELETE ends the session), then connects afresh. */
  | { readonly kind: 'closeAndReconnect' }
  /** Someone else (another principal) who learned the live session's id sends a DELETE for it. */
  | { readonly kind: 'strangerDelete' }
  /** The log refuses the next `count` writes of a call's answer (a store outage as the tool finishes). */
  | { readonly kind: 'storeFails'; readonly count: number };

export interface WorldConfig {
  /** Heartbeats on: stall detection on the client. Off: a load balancer cuts idle connections instead. */
  readonly heartbeat: boolean;
  readonly maxEventsPerStream: number;
  readonly retentionMs: number;
  readonly idleTtlMs: number;
  /** SSE events sent together arrive together (one `sse.events`), as bytes in one chunk do. */
  readonly coalesce?: boolean;
  /**
   * Each message, each way, takes 1..latencyMaxMs (drawn from `seed`), so a fault can land anywhere between
   * a request running and its first byte arriving. Default 1: every message takes 1 ms.
   */
  readonly latencyMaxMs?: number;
  readonly seed?: number;
  /**
   * The server remembers request ids and never runs one twice, and advertises it (default). Without it, a
   * re-sent POST runs again, and the client must not re-send one that may have run.
   */
  readonly dedupe?: boolean;
  /** A resume replays this many events the client already has before the ones it asked for (default 0). */
  readonly replayOverlap?: number;
  /** The server answers every GET without a cursor 404 and serves POSTs (`SimServerConfig`; default off). */
  readonly standaloneNotFound?: boolean;
  /** The server leaves a finished response open (`SimServerConfig.lingers`; default off). */
  readonly lingers?: boolean;
}

export const DEFAULT_WORLD: WorldConfig = {
  heartbeat: true,
  maxEventsPerStream: 4,
  retentionMs: 60_000,
  idleTtlMs: 30_000,
};

export const SIM_RECONNECT: ReconnectPolicy = {
  initialDelayMs: 200,
  maxDelayMs: 4_000,
  factor: 2,
  maxRetries: 10,
  jitter: 'full',
};

const HEARTBEAT_MS = 1_000;
const STALL_MS = 3_500;
const LB_IDLE_MS = 2_500;
/** After the faults stop, how long the world may take to settle before a call counts as hung. */
export const SETTLE_BOUND_MS = 10 * 60_000;

export interface WorldVariant {
  readonly client: ClientVariant;
  readonly serverMachine?: typeof serverSessionMachine;
  /** One of the runtime's server decisions swapped for a wrong one (properties/mutants.ts). */
  readonly serverRules?: Partial<ServerRules>;
}

export const CORRECT: WorldVariant = { client: CORRECT_CLIENT };

export interface WorldOutcome {
  readonly config: WorldConfig;
  readonly recorder: Recorder;
  /** Calls of the live process that had no outcome when the settle bound ran out. */
  readonly hung: string[];
  readonly settledAtMs: number;
}

export class World {
  readonly clock = new VirtualClock();
  readonly net: SimNetwork;
  readonly recorder = new Recorder();
  readonly server: SimServer;
  private readonly store = new CursorStore();
  private process: SimClientProcess;
  private pid = 0;
  private callCount = 0;
  private idCount = 0;
  private partitionUntil = 0;

  constructor(
    readonly config: WorldConfig = DEFAULT_WORLD,
    private readonly variant: WorldVariant = CORRECT,
    /** Told each decision branch the machines take (properties/coverage.ts). */
    private readonly observe?: Observe,
  ) {
    const maxLatency = Math.max(1, config.latencyMaxMs ?? 1);
    const random = seededRandom(config.seed ?? 1);
    const latency = maxLatency === 1 ? () => 1 : () => 1 + Math.floor(random() * maxLatency);
    this.net = new SimNetwork(this.clock, latency, config.coalesce === true);
    const serverConfig: SimServerConfig = {
      retention: { maxEventsPerStream: config.maxEventsPerStream, retentionMs: config.retentionMs },
      idleTtlMs: config.idleTtlMs,
      heartbeatMs: config.heartbeat ? HEARTBEAT_MS : 0,
      retryMs: 100,
      dedupe: config.dedupe ?? true,
      replayOverlap: config.replayOverlap ?? 0,
      standaloneNotFound: config.standaloneNotFound === true,
      lingers: config.lingers === true,
    };
    this.server = new SimServer(
      this.clock,
      this.net,
      this.recorder,
      serverConfig,
      variant.serverMachine,
      observe && ((o) => serverRows(o).forEach(observe)),
      { ...RUNTIME_RULES, ...variant.serverRules },
    );
    if (!config.heartbeat) this.startLoadBalancer();
    this.process = this.spawnClient(null);
  }

  private spawnClient(restored: CursorRecord | null): SimClientProcess {
    return new SimClientProcess(
      ++this.pid,
      {
        clock: this.clock,
        net: this.net,
        server: this.server,
        recorder: this.recorder,
        store: this.store,
        nextId: () => ++this.idCount,
        observe: this.observe,
      },
      this.variant.client,
      { policy: SIM_RECONNECT, stallTimeoutMs: this.config.heartbeat ? STALL_MS : 0 },
      restored,
    );
  }

  /** A load balancer that cuts connections idle for LB_IDLE_MS (the design note's 60 s, scaled). */
  private startLoadBalancer(): void {
    const sweep = () => {
      for (const c of this.net.list()) {
        if (idleCut(this.clock.now(), c.lastTraffic, LB_IDLE_MS)) c.reset();
      }
      this.clock.setTimeout(sweep, 250);
    };
    this.clock.setTimeout(sweep, 250);
  }

  /** The live client process's session machine (for fingerprints and inspection). */
  get clientActor(): SimClientProcess['actor'] {
    return this.process.actor;
  }

  apply(cmd: Command): void {
    const open = this.net.list();
    const pick = <T>(xs: T[], i: number): T | undefined => (xs.length === 0 ? undefined : xs[i % xs.length]);
    const now = this.clock.now();
    if (cmd.kind === 'partition') this.noteFault(now + cmd.ms);
    // A call that may still meet the 503s asked for earlier is not made in quiet times.
    else if (cmd.kind === 'call' && this.server.failNext > 0) this.noteFault(now + 1);
    else if (cmd.kind !== 'call' && cmd.kind !== 'advance' && cmd.kind !== 'serverNotify')
      this.noteFault(now);
    switch (cmd.kind) {
      case 'call':
        this.process.call(cmd.tool, `c${++this.callCount}`);
        break;
      case 'advance':
        this.clock.runFor(cmd.ms);
        break;
      case 'reset':
        pick(open, cmd.pick)?.reset();
        break;
      case 'resetAll':
        for (const c of open) c.reset();
        break;
      case 'serverError':
        this.server.failNext = cmd.count;
        this.server.failStatus = cmd.status ?? 503;
        break;
      case 'endStream':
        pick(open, cmd.pick)?.send({ type: 'net.ended' });
        break;
      case 'stall': {
        const c = pick(open, cmd.pick);
        // Without stall detection only the load balancer can notice a black hole; it does.
        if (c) {
          c.blackholed = true;
          // A stream that went silent stays silent: only stall detection (or a balancer) ends it. A request
          // still waiting for its status line is healed with the network instead, since the client machine
          // has no timeout there (reported, not modelled).
          c.stalled = c.started;
        }
        break;
      }
      case 'trickle': {
        const c = pick(open, cmd.pick);
        if (c && this.config.heartbeat) c.trickle();
        else if (c) {
          c.blackholed = true;
          c.stalled = c.started;
        }
        break;
      }
      case 'partition':
        this.partition(cmd.ms);
        break;
      case 'serverRestart':
        this.recorder.serverDied(this.clock.now());
        this.server.restart(cmd.durable, cmd.graceful === true);
        break;
      case 'clientRestart':
        this.restartClient(cmd.durable);
        break;
      case 'serverNotify':
        this.server.notifyStandalone();
        break;
      case 'closeAndReconnect':
        this.closeAndReconnect();
        break;
      case 'storeFails':
        this.server.failWrites = cmd.count;
        break;
      case 'strangerDelete': {
        const sessionId = this.process.actor.getSnapshot().context.sessionId;
        if (sessionId) sendDelete(this.net, this.server, this.recorder, sessionId, 'stranger');
        break;
      }
    }
    // Every command lets the world breathe a little, so connections open between faults.
    this.clock.runFor(5);
  }

  /** Faults last at least until `until`: calls made before then are not made in quiet times. */
  private noteFault(until: number): void {
    this.recorder.faultSpans.push({ from: this.clock.now(), until });
    this.recorder.faultsEndAt = Math.max(this.recorder.faultsEndAt, until);
  }

  private partition(ms: number): void {
    this.net.refusing = true;
    for (const c of this.net.list()) c.blackholed = true;
    this.partitionUntil = Math.max(this.partitionUntil, this.clock.now() + ms);
    const until = this.partitionUntil;
    this.clock.setTimeout(() => {
      if (this.partitionUntil === until) this.healNetwork();
    }, ms);
  }

  /** The network recovers: refusals stop, and silent connections are finally reset, as TCP would. */
  private healNetwork(): void {
    this.net.refusing = false;
    for (const c of this.net.list()) if (c.blackholed && !c.stalled) c.reset();
  }

  private closeAndReconnect(): void {
    const closing = this.process;
    this.recorder.closedProcesses.add(closing.pid);
    // What was still on its way when the application chose to close is the application's to drop.
    const sessionId = closing.actor.getSnapshot().context.sessionId;
    if (sessionId) this.recorder.abandonedSessions.add(sessionId);
    if (sessionId && !this.server.isGone(sessionId))
      this.recorder.closedSessions.push({ sessionId, at: this.clock.now() });
    closing.close();
    // Its calls were answered outcome unknown by close(); the application moves on with a new client.
    this.process = this.spawnClient(null);
  }

  private restartClient(durable: boolean): void {
    const record = this.store.record;
    const sessionId = this.process.actor.getSnapshot().context.sessionId;
    for (const [key, call] of this.recorder.calls) {
      if (call.process !== this.process.pid || call.outcome !== undefined) continue;
      this.recorder.abandonedCalls.add(key);
      // A call the dead process never wrote to its cursor store: no later process can know it existed.
      const streamKey = `n:${call.id}`;
      if (sessionId && (!durable || !record?.streams[streamKey]))
        this.recorder.forgottenStreams.add(`${sessionId} ${streamKey}`);
    }
    if (!durable && record) this.recorder.abandonedSessions.add(record.sessionId);
    // A session the process knew but never wrote down (it died before its initialize was answered).
    if (sessionId && (!durable || record?.sessionId !== sessionId))
      this.recorder.abandonedSessions.add(sessionId);
    this.process.stop();
    if (!durable) this.store.record = null;
    // A durable store is a file: the new process reads it through the runtime's checks.
    const restored = durable
      ? this.store.readBack(this.variant.client.cursorFile ?? CURSOR_FILE_RULES)
      : null;
    this.process = this.spawnClient(restored);
  }

  /** Faults stop; the world runs until every live call has an outcome (plus time to drain), or the bound. */
  settle(): WorldOutcome {
    this.server.failNext = 0;
    this.partitionUntil = 0;
    this.healNetwork();
    const start = this.clock.now();
    let quietSince: number | undefined;
    while (this.clock.now() - start < SETTLE_BOUND_MS) {
      this.clock.runFor(1_000);
      if (this.liveUnsettled().length > 0) {
        quietSince = undefined;
        continue;
      }
      quietSince ??= this.clock.now();
      // Drain: replays of other streams may still be on their way after the last call settled.
      if (this.clock.now() - quietSince >= 30_000) break;
    }
    this.recorder.quietFrom = quietSince;
    this.recorder.endedAt = this.clock.now();
    this.recorder.heldAfterStop = this.net.list().filter((c) => c.stoppedByClient).length;
    return {
      config: this.config,
      recorder: this.recorder,
      hung: this.liveUnsettled(),
      settledAtMs: this.clock.now() - start,
    };
  }

  private liveUnsettled(): string[] {
    const out: string[] = [];
    for (const [key, call] of this.recorder.calls) {
      if (!this.recorder.abandonedCalls.has(key) && call.outcome === undefined) out.push(key);
    }
    return out;
  }

  stop(): void {
    this.recorder.worldStopped = true;
    this.process.stop();
    for (const s of this.server.sessions.values()) s.stop();
  }
}

/** Runs one schedule from a fresh world and returns what happened. */
export function runSchedule(
  commands: readonly Command[],
  config?: WorldConfig,
  variant?: WorldVariant,
  observe?: Observe,
): WorldOutcome {
  const world = new World(config, variant, observe);
  try {
    for (const cmd of commands) world.apply(cmd);
    return world.settle();
  } finally {
    world.stop();
  }
}
