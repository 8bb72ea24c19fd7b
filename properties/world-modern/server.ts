import type { IoEvent } from '../../machines/client/io.js';
import type { ContinuitySettings } from '../../machines/continuity-extension.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../machines/jsonrpc.js';
import { streamsUnkeyedCall } from '../../machines/server/era.js';
import { KeyedCore, type KeyedCoreDecisions } from '../../machines/server/keyed-core.js';
import type { KeyedCommand, KeyedFact, KeyedNote } from '../../machines/server/keyed-core-io.js';
import type {
  KeyedCallCommand,
  KeyedCallEnd,
  keyedBodyEndSteps,
} from '../../machines/server/keyed-execute.js';
import { type MemoEntry, memoExpired } from '../../machines/server/keyed-memo.js';
import { attachStep, outcomeMessage, type refusedBeforeRun } from '../../machines/server/keyed-plan.js';
import { keyedLimits } from '../../machines/server/keyed-timing.js';
import type { RetentionPolicy } from '../../machines/server/retention.js';
import type { VirtualClock } from '../world/clock.js';
import { SimConnection, type SimNetwork } from '../world/network.js';
import { SimEventLog } from '../world/sim-event-log.js';
import type { ModernSimExchange } from './client.js';
import { executeStoreCall } from './keyed-ports.js';
import type { ModernRecorder } from './recorder.js';
import { SimMemoStore } from './sim-memo.js';
import { type ModernTool, TOOLS_MODERN } from './tools.js';

/**
 * A simulated MCP 2026-07-28 server: one or two instances behind a balancer, with or without the
 * continuity extension. Each instance's keyed path IS the runtime's: a `KeyedCore`
 * (machines/server/keyed-core.ts), the one src/server/keyed drives, told what happens (requests, store
 * answers, the SDK's messages, closed streams, the virtual time) and executing what it commands on the
 * simulated memo and key logs (`executeStoreCall`), the simulated network and the virtual clock (one timer
 * per instance, set to the core's `nextWakeAt`). This file only plays the SDK's part with simulated tools,
 * the balancer, instance deaths and restarts. Without the extension (or for an unkeyed request) it is the
 * spec's server: every request runs, and its stream closing cancels it.
 */
export interface ModernSimServerConfig {
  /** The server advertises and serves the continuity extension. */
  readonly extension: boolean;
  readonly settings: ContinuitySettings;
  /** `durable`: the memo and the key logs survive restarts and are shared by the instances (SQLite, Redis). */
  readonly memo: 'memory' | 'durable';
  /** Instances behind the balancer (more than one only with a durable, shared memo: the fleet rule). */
  readonly instances: number;
  /** SSE comments on every open stream every this many ms (0: none); the keyed core's keep-alive. */
  readonly heartbeatMs: number;
  /**
   * A response's status line goes out as soon as the request is taken. Off: only with its first event or
   * answer, so a cut before then is a cut before any response byte.
   */
  readonly headersEarly: boolean;
  /** How old the memo store (a memory one: its process) is when the world starts. Default 0: fresh. */
  readonly memoAgeMs?: number;
  /** The per-principal bound on live keys (`maxEntriesPerPrincipal`); default: never reached. */
  readonly maxKeysPerPrincipal?: number;
  /**
   * Set: no `authenticate`. Requests carry their address, no principal, and each address is held to this
   * many live keys per process (`maxEntriesPerAddress`, the keyed core's `AddressKeys`).
   */
  readonly maxKeysPerAddress?: number;
}

/**
 * The decisions of the keyed core a mutant replaces (the runtime's core takes the same ones, so a wrong
 * variant here is a wrong runtime).
 */
export interface ModernServerDecisions {
  /** What the steps are told a store answered (a mutant misreads one: a memo claiming to be complete). */
  readonly answer?: (command: KeyedCallCommand, answer: unknown) => unknown;
  /** How the request ends (a mutant rewrites the steps' end). */
  readonly end?: (end: KeyedCallEnd) => KeyedCallEnd;
  readonly attachStep: typeof attachStep;
  readonly memoExpired: typeof memoExpired;
  /** What a closed response stream of a keyed request does: nothing (a transport fact), or a mutant's cancel. */
  readonly onKeyedStreamClosed?: 'cancel';
  /** The end of a body run (a mutant records a refusal as the tool's outcome). */
  readonly bodyEnd?: typeof keyedBodyEndSteps;
  /** Whether the SDK's status says it refused before running (a mutant misreads one). */
  readonly refusedBeforeRun?: typeof refusedBeforeRun;
  /** Whether an unkeyed call is streamed with keep-alives (a mutant: never, the bug fixed in 7c48461). */
  readonly streamsUnkeyedCall?: typeof streamsUnkeyedCall;
  /** Any other decision of the core (the lease tick's, the orphan check's...). */
  readonly core?: Partial<KeyedCoreDecisions>;
  /** Where the memo store files an entry by its memo key (a mutant's store drops the principal). */
  readonly memoSlot?: (memoKey: string) => string;
  /** Whose bound an entry counts against (its principal; a mutant's store counts every entry as one). */
  readonly memoPrincipal?: (entry: MemoEntry) => string;
}

export const RUNTIME_DECISIONS: ModernServerDecisions = { attachStep, memoExpired };

/** What the simulated server decided, for the coverage table. */
export type ModernServerObservation =
  | { readonly kind: 'plan'; readonly plan: string }
  | { readonly kind: 'state'; readonly from: string; readonly to: string }
  | { readonly kind: 'attach-end'; readonly end: string }
  | {
      readonly kind: 'unkeyed';
      readonly event: 'run' | 'streamed' | 'auto' | 'cancelled-by-close' | 'refused';
    };

/**
 * A simulated memo store (the `MemoStore` contract: `SimMemoStore`) and the key logs beside it (the
 * `EventLog` contract: `SimEventLog`, one pseudo-session per key, stream `KEYED_STREAM`).
 */
interface SimMemo {
  readonly store: SimMemoStore;
  readonly logs: SimEventLog;
}

/** A body the simulated SDK runs for an instance's core. */
interface SimBody {
  readonly conn: SimConnection;
  readonly request: JsonRpcRequest;
  aborted: boolean;
}

interface Instance {
  readonly id: number;
  incarnation: number;
  /** Dead, not yet restarted: the balancer sends it nothing and its lease is gone. */
  down: boolean;
  startedAt: number;
  /** A memory memo lives in its instance and dies with it. */
  memo: SimMemo;
  /** The process's keyed core (a new one per incarnation), its one timer, and what its commands name. */
  core: KeyedCore;
  timer: number | undefined;
  timerAt: number | undefined;
  readonly requests: Map<number, SimConnection>;
  readonly bodies: Map<number, SimBody>;
}

const PRINCIPAL = '';
/** The per-principal bound where the world sets none: the store keeps it, never reached. */
const NO_BOUND = Number.MAX_SAFE_INTEGER;
/** An attached response also looks without a wake-up this often (the runtime's `pollMs`). */
const POLL_MS = 250;
/** The model's lease (liveness is instant: an instance holds one while up); its tick runs every third. */
export const LEASE_MS_MODERN = 3_000;
/**
 * How long the simulated SDK takes to answer a refusal (its checks before dispatch). At once in the
 * runtime too, but asynchronously: a duplicate attempt may attach meanwhile.
 */
const SDK_CHECK_MS = 20;
/** The SDK's own code for an `Mcp-Param-*` header that disagrees with the tool's declaration. */
const HEADER_MISMATCH = -32020;

const PLAN_NAMES: Readonly<Record<string, string>> = {
  'restart lost': 'restart lost (another attempt restarted it)',
};

export class ModernSimServer {
  private readonly instances: Instance[] = [];
  private readonly shared: SimMemo;
  private rr = 0;
  /** When the memo store was created: `-memoAgeMs` (a store as old as its window is complete). */
  private readonly storeSince: number;
  /** The next keyed POST reaches the server twice at once (a proxy's retry): both copies are served. */
  duplicateNext = false;
  private epochs = 0;
  private executions = 0;
  private requests = 0;
  /** Requests to answer with `failStatus` before serving normally. */
  failNext = 0;
  failStatus = 503;
  /** Whether the injected failures carry `Retry-After: 1` (a server shedding load does). */
  failRetryAfter = false;
  /**
   * The next POSTs are forwarded (they run) while the balancer answers the client 503 without Retry-After:
   * its upstream connection reset after the request went up (Envoy's "disconnect/reset before headers").
   */
  upstreamResetNext = 0;
  /** Open response streams of unkeyed requests (for heartbeats; keyed ones get the core's keep-alives). */
  private readonly open = new Set<SimConnection>();
  /** Which instance took each connection (an instance's death resets its connections). */
  private readonly servedBy = new Map<SimConnection, number>();

  constructor(
    private readonly clock: VirtualClock,
    private readonly net: SimNetwork,
    private readonly recorder: ModernRecorder,
    readonly config: ModernSimServerConfig,
    private readonly decisions: ModernServerDecisions = RUNTIME_DECISIONS,
    private readonly observe: (o: ModernServerObservation) => void = () => undefined,
    /** Whether the tool declares an `Mcp-Param-*` header now (the server's registry). */
    private readonly declares: (tool: ModernTool) => boolean = () => false,
  ) {
    this.storeSince = -(config.memoAgeMs ?? 0);
    this.shared = this.newMemo(this.storeSince);
    for (let i = 0; i < Math.max(1, config.instances); i++) {
      const instance = {
        id: i,
        incarnation: 0,
        down: false,
        startedAt: this.storeSince,
        memo: this.newMemo(this.storeSince),
        timer: undefined,
        timerAt: undefined,
        requests: new Map(),
        bodies: new Map(),
      } as unknown as Instance;
      this.instances.push(instance);
      this.startCore(instance);
    }
    if (config.heartbeatMs > 0) this.heartbeat();
  }

  private get retention(): RetentionPolicy {
    return {
      maxEventsPerStream: this.config.settings.maxEventsPerRequest,
      retentionMs: this.config.settings.eventRetentionMs,
    };
  }

  /** A memo store created at `since`; what it forgets by itself is told to the cores using it. */
  private newMemo(since: number): SimMemo {
    const logs = new SimEventLog(this.retention, () => this.clock.now());
    const memo: SimMemo = {
      logs,
      store: new SimMemoStore({
        memoWindowMs: this.config.settings.memoWindowMs,
        now: () => this.clock.now(),
        since,
        expired: this.decisions.memoExpired,
        ...(this.decisions.memoSlot ? { slot: this.decisions.memoSlot } : {}),
        ...(this.decisions.memoPrincipal ? { principalOf: this.decisions.memoPrincipal } : {}),
        schedule: (fn, ms) => this.clock.setTimeout(fn, ms),
        onForget: (entry) => {
          this.recorder.forgotten.push(this.clock.now());
          this.observe({ kind: 'state', from: entry.state, to: 'forgotten' });
          // Told after the store call that found it is answered (`MemoStore.onForget` is a later event too).
          this.clock.setTimeout(() => {
            for (const i of this.instances)
              if (!i.down && this.memoOf(i) === memo) this.tell(i, { kind: 'forgotten', logId: entry.logId });
          }, 0);
        },
      }),
    };
    return memo;
  }

  private memoOf(instance: Instance): SimMemo {
    return this.config.memo === 'durable' ? this.shared : instance.memo;
  }

  private ownerOf(instance: Instance): string {
    return `i${instance.id}x${instance.incarnation}`;
  }

  /** The live instances' leases. A dead instance's lease is gone at once (the model's lease is instant). */
  private leased(): Set<string> {
    return new Set(this.instances.filter((i) => !i.down).map((i) => this.ownerOf(i)));
  }

  /** A new process's keyed core: it takes its lease and declares a dead owner's running entries at once. */
  private startCore(instance: Instance): void {
    const d = this.decisions;
    instance.core = new KeyedCore(
      {
        instanceId: this.ownerOf(instance),
        memoWindowMs: this.config.settings.memoWindowMs,
        limits: keyedLimits(
          {
            maxEntriesPerPrincipal: this.config.maxKeysPerPrincipal ?? NO_BOUND,
            maxEntriesPerAddress: this.config.maxKeysPerAddress ?? NO_BOUND,
            pollMs: POLL_MS,
            leaseMs: LEASE_MS_MODERN,
            keepAliveMs: this.config.heartbeatMs,
          },
          this.config.settings.memoWindowMs,
          this.config.settings.maxKeyLength,
        ),
        ids: { fingerprint: (c) => c, logDigest: () => 'log', epoch: () => `k${++this.epochs}` },
        decisions: {
          attachStep: d.attachStep,
          ...(d.answer ? { callAnswer: d.answer } : {}),
          ...(d.end ? { callEnd: d.end } : {}),
          ...(d.bodyEnd ? { bodyEnd: d.bodyEnd } : {}),
          ...(d.refusedBeforeRun ? { refusedBeforeRun: d.refusedBeforeRun } : {}),
          closedStreamCancels: d.onKeyedStreamClosed === 'cancel',
          ...d.core,
        },
      },
      this.clock.now(),
    );
    this.drain(instance);
  }

  /** Tells `instance`'s core one fact now, and executes what it commands. */
  private tell(instance: Instance, fact: KeyedFact): void {
    instance.core.handle(fact, this.clock.now());
    this.drain(instance);
  }

  private drain(instance: Instance): void {
    const core = instance.core;
    for (let c = core.poll(); c; c = core.poll()) this.execute(instance, c);
    if (instance.core !== core) return;
    // The one timer: at the core's next wake-up.
    const at = core.nextWakeAt();
    if (at === instance.timerAt) return;
    if (instance.timer !== undefined) this.clock.clearTimeout(instance.timer);
    instance.timerAt = at;
    instance.timer =
      at === undefined
        ? undefined
        : this.clock.setTimeout(() => {
            if (instance.core !== core) return;
            instance.timer = undefined;
            instance.timerAt = undefined;
            this.tell(instance, { kind: 'tick' });
          }, at - this.clock.now());
  }

  /** One command of an instance's core, on the simulated stores, network and SDK. */
  private execute(instance: Instance, c: KeyedCommand): void {
    const memo = this.memoOf(instance);
    switch (c.kind) {
      case 'store': {
        const value = executeStoreCall(
          { memo: memo.store, logs: memo.logs, leased: () => this.leased() },
          c.call,
        );
        instance.core.handle({ kind: 'store-answer', op: c.op, value }, this.clock.now());
        // A shared log tells the other instances of each append (Redis's `shared.watch`): a hint that
        // wakes their attached responses, which otherwise look again at their poll.
        if (
          this.config.memo === 'durable' &&
          (c.call.kind === 'log.append' || c.call.kind === 'log.append-final')
        )
          for (const other of this.instances)
            if (other !== instance && !other.down)
              this.later(other, 0, { kind: 'log-changed', logId: c.call.logId });
        return;
      }
      case 'pass': {
        const conn = instance.requests.get(c.request);
        instance.requests.delete(c.request);
        if (conn) this.runUnkeyed(instance, conn, conn.exchange.body as JsonRpcRequest);
        return;
      }
      case 'answer': {
        const conn = instance.requests.get(c.request);
        instance.requests.delete(c.request);
        const retryAfter = c.headers.find(([h]) => h === 'retry-after')?.[1];
        const body = c.body === null ? undefined : JSON.parse(c.body);
        const cancel = conn && this.recorder.cancels.find((x) => x.conn === conn);
        // The key's state an explicit cancel left, as the server answered it (the wire may still lose it).
        if (cancel) cancel.stateSent = body?.result?.keyState;
        conn?.send({
          type: 'http.response',
          status: c.status,
          ...(body === undefined ? {} : { body }),
          ...(retryAfter === undefined ? {} : { retryAfter }),
        });
        return;
      }
      case 'open-stream': {
        const conn = instance.requests.get(c.request);
        if (!conn) return;
        if (this.config.headersEarly) write(conn, { type: 'sse.activity' });
        // A transport fact for a keyed request: the core decides what it does (nothing: the body goes on).
        conn.onGone = () => {
          instance.requests.delete(c.request);
          if (instance.core && !instance.down)
            this.tell(instance, { kind: 'stream-closed', request: c.request });
        };
        return;
      }
      case 'write': {
        const conn = instance.requests.get(c.request);
        if (!conn) return;
        const f = c.frame;
        if (f.kind === 'keep-alive') write(conn, { type: 'sse.activity' });
        else
          write(conn, { type: 'sse.event', ...(f.kind === 'event' ? { id: f.id } : {}), message: f.message });
        return;
      }
      case 'end-stream': {
        const conn = instance.requests.get(c.request);
        instance.requests.delete(c.request);
        conn?.send({ type: 'net.ended' });
        return;
      }
      case 'run-body':
        this.runKeyed(instance, c.run, c.request, c.message as JsonRpcRequest);
        return;
      case 'read-refusal': {
        const body = instance.bodies.get(c.run);
        if (!body) return;
        const refusal = this.refusalBody(body.request);
        this.later(instance, 0, {
          kind: 'body-refusal',
          run: c.run,
          status: 400,
          body: refusal,
          text: JSON.stringify(refusal),
          headers: [],
        });
        return;
      }
      case 'read-messages':
        this.toolRuns(instance, c.run);
        return;
      case 'stop-reading': {
        const body = instance.bodies.get(c.run);
        if (body) body.aborted = true;
        return;
      }
      case 'abort-body': {
        // The SDK's run stops, and its response ends without an answer (the tool may have run).
        const body = instance.bodies.get(c.run);
        if (body) body.aborted = true;
        this.later(instance, 0, { kind: 'body-ended', run: c.run });
        return;
      }
      case 'run-done':
        instance.bodies.delete(c.run);
        return;
      case 'note':
        this.note(instance, c.note);
        return;
      default:
        return;
    }
  }

  /** What the core noted, for the coverage table and the recorder. */
  private note(instance: Instance, note: KeyedNote): void {
    switch (note.kind) {
      case 'plan': {
        this.observe({ kind: 'plan', plan: PLAN_NAMES[note.plan] ?? note.plan });
        const conn = instance.requests.get(note.request);
        if (note.plan === 'serve' && note.entry && conn)
          this.noteReplay(note.entry, conn, conn.exchange.body as JsonRpcRequest);
        return;
      }
      case 'state':
        this.observe({ kind: 'state', from: note.from, to: note.to });
        return;
      case 'attach-end':
        this.observe({ kind: 'attach-end', end: note.refusal ? 'the refusal (nothing ran)' : note.end });
        return;
      case 'limited': {
        const conn = instance.requests.get(note.request);
        const bound =
          note.reason === 'max_keys_per_principal'
            ? 'principal'
            : note.reason === 'max_keys_per_address'
              ? 'address'
              : undefined;
        if (bound && conn)
          this.recorder.boundRefusals.push({
            callKey: callKeyOf(conn.exchange.body as JsonRpcRequest),
            at: this.clock.now(),
            bound,
          });
        return;
      }
      default:
        return;
    }
  }

  /** A fact of the simulated SDK, `ms` later (never inside the command that caused it), unless the process died. */
  private later(instance: Instance, ms: number, fact: KeyedFact): void {
    const core = instance.core;
    this.clock.setTimeout(() => {
      if (instance.core === core && !instance.down) this.tell(instance, fact);
    }, ms);
  }

  /** One POST, routed by the balancer to the next instance. */
  serve(conn: SimConnection): void {
    if (this.failNext > 0) {
      this.failNext--;
      this.recorder.faultedConns.add(conn.id);
      conn.send({
        type: 'http.response',
        status: this.failStatus,
        ...(this.failRetryAfter ? { retryAfter: '1' } : {}),
      });
      return;
    }
    const up = this.instances.filter((i) => !i.down);
    const instance = up[this.rr++ % Math.max(1, up.length)];
    if (!instance) {
      // No instance to take it: the balancer answers for it, nothing ran.
      this.recorder.faultedConns.add(conn.id);
      conn.send({ type: 'http.response', status: 503 });
      return;
    }
    this.servedBy.set(conn, instance.id);
    if (this.upstreamResetNext > 0) {
      // The request goes up on the balancer's own connection (the server answers it, nobody hears it);
      // the client gets the balancer's 503.
      this.upstreamResetNext--;
      this.recorder.faultedConns.add(conn.id);
      const upstream = new SimConnection(-conn.id, conn.exchange, this.net, () => undefined);
      this.servedBy.set(upstream, instance.id);
      this.route(instance, upstream);
      conn.send({ type: 'http.response', status: 503 });
      return;
    }
    this.route(instance, conn);
  }

  /** An admitted POST on `instance`: a server with the extension hands it to its keyed core. */
  private route(instance: Instance, conn: SimConnection): void {
    const request = conn.exchange.body as JsonRpcRequest;
    // An explicit cancel reached this instance (as the balancer saw it): the check times what follows from here.
    const cancel = this.recorder.cancels.find((x) => x.conn === conn && x.arrivedAt === undefined);
    if (cancel) {
      cancel.arrivedAt = this.clock.now();
      cancel.servedBy = `${instance.id}#${instance.incarnation}`;
    }
    // A server without the extension has no keyed requests: the spec's request.
    if (!this.config.extension) {
      this.runUnkeyed(instance, conn, request);
      return;
    }
    const copy = this.duplicateNext ? this.proxyCopy(conn) : undefined;
    this.duplicateNext = false;
    // Both copies reach the core before either is executed: their store calls interleave one at a time,
    // as the runtime's awaits let them (each call is atomic in the store).
    for (const c of [conn, ...(copy ? [copy] : [])]) {
      const id = ++this.requests;
      instance.requests.set(id, c);
      instance.core.handle(
        {
          kind: 'request',
          request: id,
          message: request,
          // The principal the server's `authenticate` gave the request's credentials; without one, the address.
          ...(this.config.maxKeysPerAddress === undefined
            ? { principal: (c.exchange as ModernSimExchange).principal ?? PRINCIPAL }
            : { principal: undefined, address: (c.exchange as ModernSimExchange).address }),
        },
        this.clock.now(),
      );
    }
    this.drain(instance);
  }

  /** The proxy's own connection for its copy: the server answers it; the proxy drops what comes back. */
  private proxyCopy(conn: SimConnection): SimConnection {
    const copy = new SimConnection(-conn.id, conn.exchange, this.net, () => undefined);
    this.servedBy.set(copy, this.servedBy.get(conn) as number);
    return copy;
  }

  /** The SDK runs a keyed body: refused at its checks, or the tool, whose messages go to the core. */
  private runKeyed(instance: Instance, run: number, requestId: number, request: JsonRpcRequest): void {
    const conn = instance.requests.get(requestId) as SimConnection;
    instance.bodies.set(run, { conn, request, aborted: false });
    // The SDK's check of the `Mcp-Param-*` header: a refusal comes after its checks, a run answers at once.
    if (this.headerMismatch(conn, request))
      this.later(instance, SDK_CHECK_MS, { kind: 'body-response', run, status: 400 });
    else this.later(instance, 0, { kind: 'body-response', run, status: 200 });
  }

  /** The tool of a keyed body: progress, then its result, each told to the core unless it was aborted. */
  private toolRuns(instance: Instance, run: number): void {
    const body = instance.bodies.get(run);
    if (!body) return;
    const execution = `x${++this.executions}`;
    const { tool, callKey } = this.begin(body.request, execution);
    this.recorder.ranOn(callKey, `${instance.id}#${instance.incarnation}`);
    this.recorder.starts.set(execution, {
      callKey,
      at: this.clock.now(),
      where: `${instance.id}#${instance.incarnation}`,
      conn: body.conn,
      keyed: true,
    });
    this.recorder.keyedExecutions.set(callKey, [
      ...(this.recorder.keyedExecutions.get(callKey) ?? []),
      execution,
    ]);
    const core = instance.core;
    const live = () => instance.core === core && !instance.down && !body.aborted;
    for (let n = 1; n <= tool.progress; n++) {
      this.clock.setTimeout(() => {
        if (live())
          this.tell(instance, {
            kind: 'body-message',
            run,
            message: this.progressMessage(body.request, callKey, execution, n),
          });
      }, tool.stepMs * n);
    }
    this.clock.setTimeout(() => {
      if (!live()) return;
      this.complete(callKey, execution);
      const final = outcomeMessage({ kind: 'result', result: resultOf(execution) }, { id: body.request.id });
      this.tell(instance, { kind: 'body-message', run, message: final });
    }, tool.durationMs);
  }

  /** The SDK's check of the `Mcp-Param-*` header against the tool's declaration now (SEP-2243). */
  private headerMismatch(conn: SimConnection, request: JsonRpcRequest): boolean {
    const tool = request.params?.name as ModernTool;
    // A declared header must be sent; one the tool does not declare is ignored.
    return this.declares(tool) && !(conn.exchange as ModernSimExchange).paramHeader;
  }

  /** What the SDK answers a request it refuses before dispatch: 400, a JSON-RPC error. */
  private refusalBody(request: JsonRpcRequest): JsonRpcMessage {
    return {
      jsonrpc: '2.0',
      id: request.id,
      error: { code: HEADER_MISMATCH, message: `Mcp-Param header disagrees with ${request.params?.name}` },
    };
  }

  /**
   * An attempt served from an entry that holds a -32020 as its outcome, with headers the SDK would accept
   * now: a refusal replayed as if the tool had answered it (the correct server starts such a key over; an
   * attempt attached while the SDK was refusing gets that refusal, which is not this).
   */
  private noteReplay(entry: MemoEntry, conn: SimConnection, request: JsonRpcRequest): void {
    const outcome = entry.outcome;
    if (outcome?.kind !== 'error' || outcome.error.code !== HEADER_MISMATCH) return;
    if (this.headerMismatch(conn, request)) return;
    this.recorder.staleRefusals.push(
      `${callKeyOf(request)} (${request.params?.name}) served a recorded -32020 at ${this.clock.now()} with headers that agree`,
    );
  }

  /**
   * An unkeyed request, as the runtime serves it (src/server/modern/endpoint.ts): it runs, and closing its
   * connection cancels it. With the extension an unkeyed `tools/call` is streamed with keep-alives when
   * `streamsUnkeyedCall` says so; otherwise it is the SDK's `auto` mode: nothing is sent until the first
   * progress (the response becomes a stream, keep-alives from then on) or the result (one JSON body).
   */
  private runUnkeyed(instance: Instance, conn: SimConnection, request: JsonRpcRequest): void {
    const incarnation = instance.incarnation;
    if (this.headerMismatch(conn, request)) {
      // The spec's server: the SDK's plain 400 before dispatch; nothing ran, nothing is kept.
      this.observe({ kind: 'unkeyed', event: 'refused' });
      this.clock.setTimeout(() => {
        if (instance.incarnation !== incarnation) return;
        conn.send({ type: 'http.response', status: 400, body: this.refusalBody(request) });
      }, SDK_CHECK_MS);
      return;
    }
    const execution = `x${++this.executions}`;
    const streams =
      this.config.extension &&
      (this.decisions.streamsUnkeyedCall ?? streamsUnkeyedCall)(request, this.config.heartbeatMs);
    this.observe({ kind: 'unkeyed', event: 'run' });
    this.observe({ kind: 'unkeyed', event: streams ? 'streamed' : 'auto' });
    const { tool, callKey } = this.begin(request, execution);
    this.recorder.ranOn(callKey, `${instance.id}#${instance.incarnation}`);
    this.recorder.starts.set(execution, {
      callKey,
      at: this.clock.now(),
      where: `${instance.id}#${instance.incarnation}`,
      conn,
      keyed: false,
    });
    let cancelled = false;
    /** The response is a stream from here on: keep-alives reach it. */
    const stream = () => this.open.add(conn);
    if (streams) {
      if (this.config.headersEarly) write(conn, { type: 'sse.activity' });
      stream();
    }
    conn.onGone = () => {
      this.open.delete(conn);
      if (!cancelled) this.observe({ kind: 'unkeyed', event: 'cancelled-by-close' });
      cancelled = true;
    };
    const live = () => instance.incarnation === incarnation && !cancelled && conn.open;
    for (let n = 1; n <= tool.progress; n++) {
      this.clock.setTimeout(() => {
        if (!live()) return;
        stream();
        write(conn, { type: 'sse.event', message: this.progressMessage(request, callKey, execution, n) });
      }, tool.stepMs * n);
    }
    this.clock.setTimeout(() => {
      if (!live()) return;
      this.complete(callKey, execution);
      cancelled = true;
      this.open.delete(conn);
      const answer = outcomeMessage({ kind: 'result', result: resultOf(execution) }, { id: request.id });
      // `auto` mode never upgraded: the answer is one JSON body.
      if (!streams && !conn.started) {
        conn.send({ type: 'http.response', status: 200, body: answer });
        return;
      }
      write(conn, { type: 'sse.event', message: answer });
      conn.send({ type: 'net.ended' });
    }, tool.durationMs);
  }

  private begin(request: JsonRpcRequest, execution: string) {
    const tool = TOOLS_MODERN[request.params?.name as ModernTool];
    const callKey = callKeyOf(request);
    this.recorder.count(this.recorder.executions, callKey);
    if (tool.sideEffect === 'once') this.recorder.count(this.recorder.sideEffects, callKey);
    return { tool, callKey, execution };
  }

  private complete(callKey: string, execution: string): void {
    this.recorder.completed.set(callKey, [...(this.recorder.completed.get(callKey) ?? []), execution]);
    this.recorder.completedAt.set(execution, this.clock.now());
  }

  private progressMessage(
    request: JsonRpcRequest,
    callKey: string,
    execution: string,
    n: number,
  ): JsonRpcMessage {
    const uid = `${execution}/${n}`;
    this.recorder.emitted({ uid, callKey, execution, n });
    const token = (request.params?._meta as { progressToken?: string | number } | undefined)?.progressToken;
    return {
      jsonrpc: '2.0',
      method: 'notifications/progress',
      params: { progressToken: token ?? null, progress: n, uid },
    };
  }

  /**
   * One instance dies; it restarts after `downMs` (with two instances the other serves meanwhile, and
   * its core finds the dead owner's running entries). Its connections reset, its bodies stop and its core
   * goes with it; a memory memo dies with it. The new process starts a new core, which declares outcome
   * unknown what a dead owner ran, as the runtime does.
   */
  instanceDies(pick: number, downMs = 0): void {
    const instance = this.instances[pick % this.instances.length] as Instance;
    if (instance.down) return;
    // The last instance up always comes back (a fleet of none serves nobody; that is not this model).
    const last = this.instances.every((i) => i === instance || i.down);
    const down = last ? Math.min(downMs, 6_000) : downMs;
    this.recorder.deaths.push(this.clock.now());
    this.recorder.instanceDied(`${instance.id}#${instance.incarnation}`, this.clock.now());
    instance.incarnation++;
    instance.down = true;
    if (instance.timer !== undefined) this.clock.clearTimeout(instance.timer);
    instance.timer = undefined;
    instance.timerAt = undefined;
    instance.requests.clear();
    instance.bodies.clear();
    for (const c of this.net.list()) if (this.servedBy.get(c) === instance.id) c.reset();
    if (down > 0) this.clock.setTimeout(() => this.restart(instance), down);
    else this.restart(instance);
  }

  /** The replacement process of a dead instance starts. */
  private restart(instance: Instance): void {
    instance.down = false;
    instance.startedAt = this.clock.now();
    if (this.config.memo === 'memory') instance.memo = this.newMemo(this.clock.now());
    this.startCore(instance);
  }

  private heartbeat(): void {
    const beat = () => {
      for (const c of this.open) write(c, { type: 'sse.activity' });
      this.clock.setTimeout(beat, this.config.heartbeatMs);
    };
    this.clock.setTimeout(beat, this.config.heartbeatMs);
  }
}

/** Writes to a response stream, its status line first if it has not gone out yet. */
function write(conn: SimConnection, event: IoEvent): void {
  if (!conn.started) conn.send({ type: 'http.stream' });
  conn.send(event);
}

function callKeyOf(request: JsonRpcRequest): string {
  return String((request.params?.arguments as { callKey?: string } | undefined)?.callKey);
}

function resultOf(execution: string): unknown {
  return {
    resultType: 'complete',
    content: [{ type: 'text', text: 'done' }],
    _meta: { uid: `${execution}/result` },
  };
}
