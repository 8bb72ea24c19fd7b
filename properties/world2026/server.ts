import type { IoEvent } from '../../machines/client/io.js';
import {
  type ContinuitySettings,
  type KeyReading,
  memoKey,
  requestFingerprint,
} from '../../machines/continuity-extension.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../machines/jsonrpc.js';
import { isOwnerAlive } from '../../machines/server/instances.js';
import { storedEvent } from '../../machines/server/keyed-events.js';
import {
  driveKeyedCallSync,
  type KeyedCallAnswers,
  type KeyedCallCommand,
  type KeyedCallEnd,
  type KeyedFollowCommand,
  type KeyedFollowEnd,
  type KeyedLogRead,
  keyedBodyEndSteps,
  keyedCallSteps,
  keyedFollowSteps,
} from '../../machines/server/keyed-execute.js';
import {
  KEYED_STREAM,
  keyedLogId,
  type MemoEntry,
  memoExpired,
  orphanedEntries,
} from '../../machines/server/keyed-memo.js';
import {
  type Attempt,
  abortsLocalRun,
  attachStep,
  type KeyedReply,
  type KeyedRoute,
  nextEntry,
  outcomeMessage,
  planKeyedCancel,
  refusalResponse,
  refusedBeforeRun,
  replyMessage,
  restartWon,
  routeKeyedMessage,
} from '../../machines/server/keyed-plan.js';
import type { RetentionPolicy } from '../../machines/server/retention.js';
import type { VirtualClock } from '../world/clock.js';
import { SimConnection, type SimNetwork } from '../world/network.js';
import { SimEventLog } from '../world/sim-event-log.js';
import type { SimExchange2026 } from './client.js';
import type { Recorder2026 } from './recorder.js';
import { SimMemoStore } from './sim-memo.js';
import { TOOLS_2026, type Tool2026 } from './tools.js';

/**
 * A simulated MCP 2026-07-28 server: one or two instances behind a balancer, with or without the
 * continuity extension. Every decision about a keyed request is the runtime's (src/server/keyed): the
 * routing and fingerprint (`routeKeyedMessage`, `requestFingerprint`), the steps of a keyed
 * call (`keyedCallSteps`, driven synchronously: `planKeyedCall`, the key's fate by `keyedRequestMachine`
 * through `stepMemoEntry`), the stored entry's
 * moves (`nextEntry`), what an attached response writes and how it ends (`attachStep`, `deliverAs`), the
 * memo window (`memoExpired`), orphans after a restart (`orphanedEntries`, `isOwnerAlive`) and every reply.
 * This file only executes those decisions, in the runtime's order, on simulated stores (a memo, per-key
 * event logs), the simulated network and the virtual clock, and plays the SDK's part with simulated
 * tools. Without the extension (or for an unkeyed request) it is the spec's server: every request runs,
 * and its stream closing cancels it.
 */
export interface SimServer2026Config {
  /** The server advertises and serves the continuity extension. */
  readonly extension: boolean;
  readonly settings: ContinuitySettings;
  /** `durable`: the memo and the key logs survive restarts and are shared by the instances (SQLite, Redis). */
  readonly memo: 'memory' | 'durable';
  /** Instances behind the balancer (more than one only with a durable, shared memo: the fleet rule). */
  readonly instances: number;
  /** SSE comments on every open stream every this many ms (0: none). */
  readonly heartbeatMs: number;
  /**
   * A response's status line goes out as soon as the request is taken. Off: only with its first event or
   * answer, so a cut before then is a cut before any response byte.
   */
  readonly headersEarly: boolean;
  /** How old the memo store (a memory one: its process) is when the world starts. Default 0: fresh. */
  readonly memoAgeMs?: number;
}

/**
 * The decisions of the runtime's plan functions the world executes; a mutant wraps one (the runtime
 * calls the same functions, so a wrong variant here is a wrong runtime).
 */
export interface ServerDecisions2026 {
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
}

export const RUNTIME_DECISIONS: ServerDecisions2026 = { attachStep, memoExpired };

/** What the simulated server decided, for the coverage table. */
export type ServerObservation2026 =
  | { readonly kind: 'plan'; readonly plan: string }
  | { readonly kind: 'state'; readonly from: string; readonly to: string }
  | { readonly kind: 'attach-end'; readonly end: string }
  | { readonly kind: 'unkeyed'; readonly event: 'run' | 'cancelled-by-close' | 'refused' };

/**
 * A simulated memo store (the `MemoStore` contract: `SimMemoStore`) and the key logs beside it (the
 * `EventLog` contract: `SimEventLog`, one pseudo-session per key, stream `KEYED_STREAM`).
 */
interface SimMemo {
  readonly store: SimMemoStore;
  readonly logs: SimEventLog;
}

interface Instance {
  readonly id: number;
  incarnation: number;
  /** Dead, not yet restarted: the balancer sends it nothing and its lease is gone. */
  down: boolean;
  startedAt: number;
  /** A memory memo lives in its instance and dies with it. */
  memo: SimMemo;
}

/** What one request's steps did (the coverage table's plan, and how its attempt is answered). */
interface Serving {
  started: boolean;
  /** Its body replaced a refused entry (`restart-entry` won), or its restart lost the compare-and-set. */
  restarted: 'won' | 'lost' | undefined;
  lostRestart: boolean;
  /** The SDK refuses the body it started (its answer comes after `SDK_CHECK_MS`). */
  refusing: boolean;
}

interface Follower {
  readonly conn: SimConnection;
  readonly attempt: Attempt;
  readonly mk: string;
  readonly memo: SimMemo;
  readonly logId: string;
  /** The response's steps (`keyedFollowSteps`), and the command they wait on. */
  readonly steps: Generator<KeyedFollowCommand, KeyedFollowEnd, unknown>;
  pending: IteratorResult<KeyedFollowCommand, KeyedFollowEnd>;
  /** Its steps are being executed (a wake-up then only asks for one more look). */
  busy: boolean;
  again: boolean;
  done: boolean;
}

const PRINCIPAL = '';
/** The per-principal bound is not modelled (one principal, few keys): the store keeps it, never reached. */
const NO_BOUND = Number.MAX_SAFE_INTEGER;
/** The runtime's bound on looks per wake-up of an attached response (a declared death, then the end). */
const MAX_PLAN_ROUNDS = 4;
/** An attached response also looks without a wake-up this often (the runtime's `pollMs`). */
const POLL_MS = 250;
/**
 * How long the simulated SDK takes to answer a refusal (its checks before dispatch). At once in the
 * runtime too, but asynchronously: a duplicate attempt may attach meanwhile.
 */
const SDK_CHECK_MS = 20;
/** The SDK's own code for an `Mcp-Param-*` header that disagrees with the tool's declaration. */
const HEADER_MISMATCH = -32020;

export class SimServer2026 {
  private readonly instances: Instance[] = [];
  private readonly shared: SimMemo;
  private rr = 0;
  /** When the memo store was created: `-memoAgeMs` (a store as old as its window is complete). */
  private readonly storeSince: number;
  /** What the steps of the request whose command runs now did so far. */
  private serving: Serving = { started: false, restarted: undefined, refusing: false, lostRestart: false };
  /** The next keyed POST reaches the server twice at once (a proxy's retry): both copies are served. */
  duplicateNext = false;
  private epochs = 0;
  private executions = 0;
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
  /** Open response streams (for heartbeats). */
  private readonly open = new Set<SimConnection>();
  /** Which instance took each connection (an instance's death resets its connections). */
  private readonly servedBy = new Map<SimConnection, number>();
  /** Attached responses per key log, woken on every change (the runtime's wake-ups). */
  private readonly followers = new Map<string, Set<Follower>>();

  constructor(
    private readonly clock: VirtualClock,
    private readonly net: SimNetwork,
    private readonly recorder: Recorder2026,
    readonly config: SimServer2026Config,
    private readonly decisions: ServerDecisions2026 = RUNTIME_DECISIONS,
    private readonly observe: (o: ServerObservation2026) => void = () => undefined,
    /** Whether the tool declares an `Mcp-Param-*` header now (the server's registry). */
    private readonly declares: (tool: Tool2026) => boolean = () => false,
  ) {
    this.storeSince = -(config.memoAgeMs ?? 0);
    this.shared = this.newMemo(this.storeSince);
    for (let i = 0; i < Math.max(1, config.instances); i++)
      this.instances.push({
        id: i,
        incarnation: 0,
        down: false,
        startedAt: this.storeSince,
        memo: this.newMemo(this.storeSince),
      });
    if (config.heartbeatMs > 0) this.heartbeat();
  }

  private get retention(): RetentionPolicy {
    return {
      maxEventsPerStream: this.config.settings.maxEventsPerRequest,
      retentionMs: this.config.settings.eventRetentionMs,
    };
  }

  /** A memo store created at `since`; what it forgets takes its key log with it and wakes its watchers. */
  private newMemo(since: number): SimMemo {
    const logs = new SimEventLog(this.retention, () => this.clock.now());
    const store = new SimMemoStore({
      memoWindowMs: this.config.settings.memoWindowMs,
      now: () => this.clock.now(),
      since,
      expired: this.decisions.memoExpired,
      schedule: (fn, ms) => this.clock.setTimeout(fn, ms),
      onForget: (entry) => {
        logs.dropSession(entry.logId);
        this.recorder.forgotten.push(this.clock.now());
        this.observe({ kind: 'state', from: entry.state, to: 'forgotten' });
        this.wake(entry.logId);
      },
    });
    return { store, logs };
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

  /** An admitted POST on `instance`: the runtime's routing by the extension's `_meta` keys. */
  private route(instance: Instance, conn: SimConnection): void {
    const request = conn.exchange.body as JsonRpcRequest;
    // The runtime's routing by the extension's `_meta` keys (a server without the extension has none).
    const route: KeyedRoute = this.config.extension
      ? routeKeyedMessage(request, this.config.settings.maxKeyLength)
      : { kind: 'unkeyed' };
    if (route.kind === 'reply') this.reply(conn, route.reply, request);
    else if (route.kind === 'call') {
      const copy = this.duplicateNext ? this.proxyCopy(conn) : undefined;
      this.duplicateNext = false;
      this.call(instance, conn, request, route.reading, copy);
    }
    // The simulated client never sends a cancel; an unkeyed request is the spec's.
    else this.runUnkeyed(instance, conn, request);
  }

  /** The proxy's own connection for its copy: the server answers it; the proxy drops what comes back. */
  private proxyCopy(conn: SimConnection): SimConnection {
    const copy = new SimConnection(-conn.id, conn.exchange, this.net, () => undefined);
    this.servedBy.set(copy, this.servedBy.get(conn) as number);
    return copy;
  }

  private reply(conn: SimConnection, reply: KeyedReply, request: JsonRpcRequest): void {
    conn.send({ type: 'http.response', status: reply.status, body: replyMessage(reply, { id: request.id }) });
  }

  /**
   * A keyed `tools/call`, as the runtime serves it: the real steps (`keyedCallSteps`: read, plan, create,
   * retry a lost race), each command executed on the simulated stores, then the reply or the response.
   */
  private call(
    instance: Instance,
    conn: SimConnection,
    request: JsonRpcRequest,
    reading: Extract<KeyReading, { kind: 'keyed' }>,
    /** A proxy's copy of the same POST, served at the same time (its answer goes nowhere). */
    copy?: SimConnection,
  ): void {
    const memo = this.memoOf(instance);
    const mk = memoKey(PRINCIPAL, reading.key);
    const fingerprint = requestFingerprint(request.method, request.params);
    const answer = this.decisions.answer ?? ((_c: KeyedCallCommand, a: unknown) => a);
    const serving = [conn, ...(copy ? [copy] : [])].map((c) => ({
      conn: c,
      steps: keyedCallSteps({
        reading,
        fingerprint,
        memoWindowMs: this.config.settings.memoWindowMs,
        now: this.clock.now(),
      }),
      state: { started: false, restarted: undefined, refusing: false, lostRestart: false } as Serving,
      r: undefined as IteratorResult<KeyedCallCommand, KeyedCallEnd> | undefined,
    }));
    // The steps of concurrent requests interleave one store command at a time, as the runtime's awaits
    // let them (each command is atomic in the store: set-if-absent, compare-and-set).
    for (const x of serving) x.r = x.steps.next();
    while (serving.some((x) => !x.r?.done)) {
      for (const x of serving) {
        const r = x.r as IteratorResult<KeyedCallCommand, KeyedCallEnd>;
        if (r.done) continue;
        this.serving = x.state;
        x.r = x.steps.next(
          answer(r.value, this.command(instance, memo, mk, fingerprint, request, r.value, x.conn)) as never,
        );
      }
    }
    for (const x of serving)
      this.served(memo, x.conn, request, x.state, (x.r as { value: KeyedCallEnd }).value);
  }

  /** The end of one request's steps: the reply, or the response (the SDK's own answer to a refused start). */
  private served(
    memo: SimMemo,
    conn: SimConnection,
    request: JsonRpcRequest,
    state: Serving,
    ran: KeyedCallEnd,
  ): void {
    if (state.lostRestart)
      this.observe({ kind: 'plan', plan: 'restart lost (another attempt restarted it)' });
    const end = this.decisions.end ? this.decisions.end(ran) : ran;
    if (end.kind === 'reply') {
      this.observe({ kind: 'plan', plan: `reply ${end.reply.error.code}` });
      this.reply(conn, end.reply, request);
      return;
    }
    this.observe({
      kind: 'plan',
      plan: state.started ? (state.restarted === 'won' ? 'execute-over' : 'execute') : 'serve',
    });
    if (!state.started) this.noteReplay(end.entry, conn, request);
    // The attempt that started a body the SDK refuses gets the SDK's own answer (runKeyed), as in the
    // runtime; every other one is served from the key's log.
    if (!(state.started && state.refusing))
      this.respond(memo, end.entry, conn, attemptOf(request), end.afterSeq);
  }

  /** One command of the steps, on the simulated stores. */
  private command(
    instance: Instance,
    memo: SimMemo,
    mk: string,
    fingerprint: string,
    request: JsonRpcRequest,
    cmd: KeyedCallCommand,
    conn: SimConnection,
  ): KeyedCallAnswers[keyof KeyedCallAnswers] {
    switch (cmd.kind) {
      case 'read-entry':
        return memo.store.get(mk);
      case 'read-window':
        return memo.logs.window(cmd.entry.logId, KEYED_STREAM);
      case 'owner-alive':
        return this.alive(instance, cmd.owner);
      case 'memo-complete-for':
        // Since the store was created (a memory store: with its process).
        return memo.store.completeForMs();
      case 'new-entry': {
        const n = ++this.epochs;
        return {
          memoKey: mk,
          principal: PRINCIPAL,
          fingerprint,
          state: 'running',
          owner: this.ownerOf(instance),
          logId: keyedLogId(`${n}`),
          epoch: `k${n}`,
          createdAt: this.clock.now(),
        };
      }
      case 'open-log':
        memo.logs.openStream(cmd.entry.logId, KEYED_STREAM);
        return undefined;
      case 'create-entry':
        return memo.store.create(cmd.entry, NO_BOUND);
      case 'drop-log':
        memo.logs.dropSession(cmd.entry.logId);
        return undefined;
      case 'replace-entry':
        if (cmd.next.state === 'outcomeUnknown' && cmd.entry.state === 'running')
          this.observe({ kind: 'plan', plan: 'declare-died' });
        this.replace(memo, cmd.entry, cmd.next);
        return undefined;
      case 'restart-entry': {
        // Compare-and-set from the refused entry's state; it won when the fresh entry is what is stored.
        const won = restartWon(this.replace(memo, cmd.entry, cmd.next), cmd.next);
        this.serving.restarted = won ? 'won' : 'lost';
        if (!won) this.serving.lostRestart = true;
        return won;
      }
      case 'start-run':
        this.serving.started = true;
        this.runKeyed(instance, memo, cmd.entry, request, conn);
        return undefined;
    }
  }

  private alive(self: Instance, owner: string): boolean {
    return isOwnerAlive(owner, this.ownerOf(self), this.leased());
  }

  /** Moves the stored entry by the machine (`nextEntry`), compare-and-set from its state (the runtime's `record`). */
  private record(
    memo: SimMemo,
    entry: MemoEntry,
    event: Parameters<typeof nextEntry>[1],
    watched = false,
  ): MemoEntry | undefined {
    const next = nextEntry(entry, event, this.clock.now(), watched);
    if (!next) return entry;
    return this.replace(memo, entry, next);
  }

  /**
   * Compare-and-set `next` from `entry`'s state (the store's; as in the runtime, the state is compared, not
   * which run the entry is), then wake its watchers. The stored entry afterwards.
   */
  private replace(memo: SimMemo, entry: MemoEntry, next: MemoEntry): MemoEntry | undefined {
    const stored = memo.store.replace(next, entry.state);
    if (stored === next) this.observe({ kind: 'state', from: entry.state, to: next.state });
    this.wake(entry.logId);
    return stored;
  }

  /** The response of one attempt, from the key's log: never starts anything. */
  private respond(
    memo: SimMemo,
    entry: MemoEntry,
    conn: SimConnection,
    attempt: Attempt,
    afterSeq: number,
  ): void {
    const steps = keyedFollowSteps({
      entry: { epoch: epochOf(entry.logId), logId: entry.logId },
      attempt,
      afterSeq,
      decide: this.decisions.attachStep,
    }) as Follower['steps'];
    const f: Follower = {
      conn,
      attempt,
      mk: entry.memoKey,
      memo,
      logId: entry.logId,
      steps,
      pending: steps.next(),
      busy: false,
      again: false,
      done: false,
    };
    const set = this.followers.get(entry.logId) ?? new Set();
    set.add(f);
    this.followers.set(entry.logId, set);
    this.open.add(conn);
    if (this.config.headersEarly) write(conn, { type: 'sse.activity' });
    const poll = () => {
      if (f.done) return;
      this.follow(f);
      this.clock.setTimeout(poll, POLL_MS);
    };
    this.clock.setTimeout(poll, POLL_MS);
    conn.onGone = () => {
      this.open.delete(conn);
      if (f.done) return;
      f.done = true;
      set.delete(f);
      // A transport fact for a keyed request: the body goes on (a mutant wires it to the cancel plan).
      if (this.decisions.onKeyedStreamClosed === 'cancel') this.cancel(memo, entry.memoKey);
    };
    this.follow(f);
  }

  private wake(logId: string): void {
    for (const f of [...(this.followers.get(logId) ?? [])]) this.follow(f);
  }

  /**
   * A wake-up of an attached response: its steps (`keyedFollowSteps`) go on from the wait, for at most
   * `MAX_PLAN_ROUNDS` looks, until they wait again or end. A wake-up while they run (their own declared
   * death rings the log) asks for one more look instead of running them inside themselves.
   */
  private follow(f: Follower): void {
    if (f.done) return;
    if (f.busy) {
      f.again = true;
      return;
    }
    f.busy = true;
    f.again = false;
    let r = f.pending;
    let looks = 0;
    while (!r.done && !f.done) {
      const c = r.value;
      if (c.kind === 'wait') {
        if (looks > 0 && !f.again) break;
        f.again = false;
        r = f.steps.next(undefined);
        continue;
      }
      if (c.kind === 'read-log' && ++looks > MAX_PLAN_ROUNDS) break;
      r = f.steps.next(this.followCommand(f, c));
    }
    f.pending = r;
    f.busy = false;
    if (!r.done || f.done) return;
    const refusal = r.value.end === 'outcome' && f.memo.store.get(f.mk)?.state === 'refused';
    this.observe({ kind: 'attach-end', end: refusal ? 'the refusal (nothing ran)' : r.value.end });
    this.end(f);
    const frame = r.value.frame;
    if (frame) write(f.conn, { type: 'sse.event', id: frame.id, message: frame.message });
    f.conn.send({ type: 'net.ended' });
  }

  /** One command of an attached response's steps, on the simulated stores (the runtime's order). */
  private followCommand(f: Follower, c: KeyedFollowCommand): unknown {
    switch (c.kind) {
      case 'read-log':
        return f.memo.logs.read(f.logId, KEYED_STREAM, c.afterSeq) satisfies KeyedLogRead | undefined;
      case 'read-entry': {
        const current = f.memo.store.get(f.mk);
        return current?.logId === f.logId ? current : undefined;
      }
      case 'owner-alive':
        return this.leased().has(c.owner);
      case 'write':
        for (const frame of c.frames)
          write(f.conn, { type: 'sse.event', id: frame.id, message: frame.message });
        return undefined;
      case 'declare-died':
        this.record(f.memo, c.entry, { type: 'instance.died' });
        return undefined;
      case 'wait':
        return undefined;
    }
  }

  private end(f: Follower): void {
    f.done = true;
    this.followers.get(f.logId)?.delete(f);
    this.open.delete(f.conn);
  }

  /** The extension's explicit cancel (only a mutant sends one here: the simulated application never cancels). */
  private cancel(memo: SimMemo, mk: string): void {
    const entry = memo.store.get(mk);
    if (this.decisionsCancel(entry)) this.record(memo, entry as MemoEntry, { type: 'cancel.requested' });
  }

  private decisionsCancel(entry: MemoEntry | undefined): boolean {
    return planKeyedCancel(entry).kind === 'cancel';
  }

  /**
   * The body of a keyed request, detached from every stream: progress into the key's log; at the end the
   * outcome is recorded first (under the final response's seq), then the final response appended.
   */
  private runKeyed(
    instance: Instance,
    memo: SimMemo,
    entry: MemoEntry,
    request: JsonRpcRequest,
    conn: SimConnection,
  ): void {
    if (this.headerMismatch(conn, request)) {
      this.serving.refusing = true;
      this.refuseKeyed(instance, memo, entry, request, conn);
      return;
    }
    const execution = `x${++this.executions}`;
    const { tool, callKey } = this.begin(request, execution);
    this.recorder.ranOn(callKey, `${instance.id}#${instance.incarnation}`);
    this.recorder.keyedExecutions.set(callKey, [
      ...(this.recorder.keyedExecutions.get(callKey) ?? []),
      execution,
    ]);
    const incarnation = instance.incarnation;
    const owner = entry.owner;
    // Aborted when its instance died, or when the entry is no longer running here (cancelled, declared dead).
    const live = () => {
      const stored = memo.store.get(entry.memoKey);
      return (
        instance.incarnation === incarnation &&
        stored?.logId === entry.logId &&
        !abortsLocalRun(stored, owner)
      );
    };
    const append = (message: JsonRpcMessage): number => this.append(memo, entry, message);
    for (let n = 1; n <= tool.progress; n++) {
      this.clock.setTimeout(() => {
        if (!live()) return;
        // Kept as the runtime keeps it: without the progress token (each attempt is written its own).
        append(storedEvent(this.progressMessage(request, callKey, execution, n)));
        this.wake(entry.logId);
      }, tool.stepMs * n);
    }
    this.clock.setTimeout(() => {
      if (!live()) return;
      const final = outcomeMessage({ kind: 'result', result: resultOf(execution) }, { id: request.id });
      this.endBody(instance, memo, entry, final, false, { callKey, execution });
    }, tool.durationMs);
  }

  /** Appends to the key's log (evicting what the retention policy says). */
  private append(memo: SimMemo, entry: MemoEntry, message: JsonRpcMessage): number {
    return memo.logs.append(entry.logId, KEYED_STREAM, message);
  }

  /** The SDK's check of the `Mcp-Param-*` header against the tool's declaration now (SEP-2243). */
  private headerMismatch(conn: SimConnection, request: JsonRpcRequest): boolean {
    const tool = request.params?.name as Tool2026;
    // A declared header must be sent; one the tool does not declare is ignored.
    return this.declares(tool) && !(conn.exchange as SimExchange2026).paramHeader;
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
   * A keyed body the SDK refuses (400 -32020), as the runtime's `runBody` takes it: `refusedBeforeRun` of
   * the status, the refusal (`refusalResponse`) recorded by `keyedBodyEndSteps(..., refused)`, and only
   * once that is stored the starting attempt gets the SDK's own 400. Nothing ran.
   */
  private refuseKeyed(
    instance: Instance,
    memo: SimMemo,
    entry: MemoEntry,
    request: JsonRpcRequest,
    conn: SimConnection,
  ): void {
    const incarnation = instance.incarnation;
    const status = 400;
    const body = this.refusalBody(request);
    this.clock.setTimeout(() => {
      // A dead process answers nothing; its running entry is declared dead like any other.
      if (instance.incarnation !== incarnation) return;
      const refused = (this.decisions.refusedBeforeRun ?? refusedBeforeRun)(status);
      this.endBody(instance, memo, entry, refusalResponse(status, body, request.id), refused, undefined);
      conn.send({ type: 'http.response', status, body });
    }, SDK_CHECK_MS);
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
   * The runtime's end of a body run (`keyedBodyEndSteps`), on the simulated stores. `ran`: the execution
   * whose result `final` is (none for a refusal).
   */
  private endBody(
    instance: Instance,
    memo: SimMemo,
    entry: MemoEntry,
    final: JsonRpcMessage,
    refused: boolean,
    ran: { callKey: string; execution: string } | undefined,
  ): void {
    {
      const bodyEnd = this.decisions.bodyEnd ?? keyedBodyEndSteps;
      driveKeyedCallSync(bodyEnd(entry, final, refused), (c): unknown => {
        switch (c.kind) {
          case 'read-entry':
            return memo.store.get(entry.memoKey);
          case 'read-window':
            return memo.logs.window(entry.logId, KEYED_STREAM);
          case 'watched':
            // A response of this instance waiting on the key's log: the outcome is recorded `answered`.
            return [...(this.followers.get(entry.logId) ?? [])].some(
              (f) => !f.done && this.servedBy.get(f.conn) === instance.id,
            );
          case 'record':
            if (c.event.type === 'tool.finished' && ran) this.complete(ran.callKey, ran.execution);
            return this.record(memo, c.entry, c.event, c.watched);
          case 'append-final':
            memo.logs.appendFinal(entry.logId, KEYED_STREAM, c.message);
            return undefined;
          case 'ring':
            this.wake(entry.logId);
            return undefined;
        }
      });
    }
  }

  /** The spec's request: it runs; closing its stream cancels it. */
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
    this.observe({ kind: 'unkeyed', event: 'run' });
    const { tool, callKey } = this.begin(request, execution);
    this.recorder.ranOn(callKey, `${instance.id}#${instance.incarnation}`);
    let cancelled = false;
    if (this.config.headersEarly) write(conn, { type: 'sse.activity' });
    this.open.add(conn);
    conn.onGone = () => {
      this.open.delete(conn);
      if (!cancelled) this.observe({ kind: 'unkeyed', event: 'cancelled-by-close' });
      cancelled = true;
    };
    const live = () => instance.incarnation === incarnation && !cancelled && conn.open;
    for (let n = 1; n <= tool.progress; n++) {
      this.clock.setTimeout(() => {
        if (live())
          write(conn, { type: 'sse.event', message: this.progressMessage(request, callKey, execution, n) });
      }, tool.stepMs * n);
    }
    this.clock.setTimeout(() => {
      if (!live()) return;
      this.complete(callKey, execution);
      cancelled = true;
      this.open.delete(conn);
      write(conn, {
        type: 'sse.event',
        message: outcomeMessage({ kind: 'result', result: resultOf(execution) }, { id: request.id }),
      });
      conn.send({ type: 'net.ended' });
    }, tool.durationMs);
  }

  private begin(request: JsonRpcRequest, execution: string) {
    const tool = TOOLS_2026[request.params?.name as Tool2026];
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
   * finds the dead owner's running entries through `planKeyedCall` / `attachStep`). Its connections
   * reset and its bodies stop; a memory memo dies with it. The new process starts as the runtime does:
   * with a durable memo it declares outcome unknown what a dead owner ran (`orphanedEntries`).
   */
  instanceDies(pick: number, downMs = 0): void {
    const instance = this.instances[pick % this.instances.length] as Instance;
    if (instance.down) return;
    // The last instance up always comes back (a fleet of none serves nobody; that is not this model).
    const last = this.instances.every((i) => i === instance || i.down);
    const down = last ? Math.min(downMs, 6_000) : downMs;
    this.recorder.deaths.push(this.clock.now());
    this.recorder.instanceDied(`${instance.id}#${instance.incarnation}`, this.clock.now());
    for (const c of this.net.list()) if (this.servedBy.get(c) === instance.id) c.reset();
    instance.incarnation++;
    instance.down = true;
    // The dead process's bodies are stopped by the new incarnation; what it served is gone.
    for (const set of this.followers.values())
      for (const f of set) if (this.servedBy.get(f.conn) === instance.id) this.end(f);
    if (down > 0) this.clock.setTimeout(() => this.restart(instance), down);
    else this.restart(instance);
  }

  /** The replacement process of a dead instance starts. */
  private restart(instance: Instance): void {
    instance.down = false;
    instance.startedAt = this.clock.now();
    if (this.config.memo === 'memory') {
      for (const set of this.followers.values())
        for (const f of set) if (f.memo === instance.memo) this.end(f);
      instance.memo = this.newMemo(this.clock.now());
      return;
    }
    const memo = this.shared;
    const running = memo.store.running();
    const leased = this.leased();
    for (const e of orphanedEntries(running, (o) => isOwnerAlive(o, this.ownerOf(instance), leased)))
      this.record(memo, e, { type: 'instance.died' });
  }

  private heartbeat(): void {
    const beat = () => {
      for (const c of this.open) write(c, { type: 'sse.activity' });
      this.clock.setTimeout(beat, this.config.heartbeatMs);
    };
    this.clock.setTimeout(beat, this.config.heartbeatMs);
  }
}

/** The id and progress token the attempt's own messages carry (as the runtime reads them). */
function attemptOf(message: JsonRpcRequest): Attempt {
  const token = (message.params?._meta as Record<string, unknown> | undefined)?.progressToken;
  return typeof token === 'string' || typeof token === 'number'
    ? { id: message.id, progressToken: token }
    : { id: message.id };
}

/** The epoch of a key log of this world (`keyed-<n>` ↔ `k<n>`). */
const epochOf = (logId: string): string => `k${logId.slice('keyed-'.length)}`;

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
