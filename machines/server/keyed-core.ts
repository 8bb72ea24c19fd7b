import { JsonRpcCode } from '../codes.js';
import { type KeyReading, memoKey, requestFingerprint } from '../continuity-extension.js';
import type { JsonRpcRequest, RequestId } from '../jsonrpc.js';
import { DeadlineQueue } from './deadlines.js';
import { AddressKeys } from './keyed-address-book.js';
import { KeyedBodies, type Run } from './keyed-core-bodies.js';
import {
  type CoreContext,
  driveSteps,
  dropLog,
  KEYED_DECISIONS,
  type KeyedCoreDecisions,
  logBell,
  ownerAlive,
  record,
  replace,
  startBell,
} from './keyed-core-context.js';
import type { KeyedCommand, KeyedFact, KeyedSseFrame, KeyedStoreCall } from './keyed-core-io.js';
import {
  type KeyedCallCommand,
  type KeyedCallEnd,
  type KeyedFollowCommand,
  type KeyedFollowEnd,
  keyedCallSteps,
} from './keyed-execute.js';
import { keyedLogId, type MemoCreate, type MemoEntry } from './keyed-memo.js';
import {
  type Attempt,
  attemptOf,
  cancelResult,
  type KeyedReply,
  planKeyedCancel,
  replyMessage,
  restartWon,
  routeKeyedMessage,
} from './keyed-plan.js';
import { type Task, TaskRunner } from './keyed-tasks.js';
import { type KeyedLimits, leaseTickMs } from './keyed-timing.js';

/**
 * The continuity extension's server, sans I/O (docs/continuity-extension.md §4–§6), the way quinn-proto
 * is a QUIC connection without a socket: `handle(fact, now)` takes what happened (a keyed request, a
 * store's answer, a body's message or end, a stream closing, time passing), `poll()` hands out what to do
 * (store operations, answers, stream frames, run or abort a body), and `nextWakeAt()` says when it must be
 * told the time again. It owns every decision and every deadline of the keyed path: the call's steps
 * (`keyedCallSteps`), attached responses (`keyedFollowSteps`), a body's end (`keyedBodyEndSteps`) and its
 * retry while unstored, the lease tick (renewal, aborting bodies no longer running here, orphans), the
 * sweep, polls, keep-alives and the starting attempt's wait. The key's fate is `keyedRequestMachine`'s
 * (through `stepMemoEntry`). src/server/keyed executes the commands on real stores, Node timers and the
 * SDK; properties/worldModern on simulated ones and a virtual clock.
 */

export { KEYED_DECISIONS, type KeyedCoreDecisions } from './keyed-core-context.js';

/** Names the host gives: digests and fresh epochs (crypto in the runtime, counters in the model). */
export interface KeyedIds {
  /** The stored fingerprint of a request's canonical form (`requestFingerprint`). */
  fingerprint(canonical: string): string;
  /** A name for a memo key that is safe in a log id (SQL, Redis hash tags). */
  logDigest(memoKey: string): string;
  /** A fresh epoch: every entry has its own log, so a key used again never shares a forgotten one's. */
  epoch(): string;
}

export interface KeyedCoreConfig {
  /** This process (or instance): the owner of the entries it runs. */
  readonly instanceId: string;
  readonly memoWindowMs: number;
  readonly limits: KeyedLimits;
  readonly ids: KeyedIds;
  readonly decisions?: Partial<KeyedCoreDecisions>;
}

/** An open keyed response. */
interface Stream {
  readonly logId: string;
  readonly memoKey: string;
  task: ReturnType<TaskRunner['spawn']> | undefined;
  keepAliveAt: number | undefined;
}

/** Work the core does every `every` ms (next at `at`). */
interface Periodic {
  at: number;
  readonly every: number;
  running: boolean;
  readonly task: () => Task;
}

/** Who made a keyed call: its principal, and its address when there is no `authenticate`. */
interface Caller {
  readonly request: number;
  readonly principal: string;
  readonly address: string | undefined;
}

/** Thrown out of an attached response's steps when the core closed: the response ends without a frame. */
const CORE_CLOSED: unique symbol = Symbol('keyed core closed');

export class KeyedCore {
  private now: number;
  private readonly out: KeyedCommand[] = [];
  private readonly tasks: TaskRunner;
  private readonly d: KeyedCoreDecisions;
  private readonly limits: KeyedLimits;
  private readonly self: string;
  private readonly addressKeys: AddressKeys;
  private readonly ctx: CoreContext;
  private readonly bodies: KeyedBodies;
  private readonly streams = new Map<number, Stream>();
  /**
   * The streams' keep-alive deadlines, earliest first (a fact looks at the front, not at every stream). An
   * entry whose stream ended or moved its deadline is dropped when it reaches the front (`keepAliveDue`).
   */
  private readonly keepAlives = new DeadlineQueue<{ readonly request: number; readonly stream: Stream }>();
  /** Keyed requests that came before the start (lease, orphans) finished. */
  private readonly deferred: Array<Extract<KeyedFact, { kind: 'request' }>> = [];
  private started = false;
  private closed = false;
  /** The core's own periodic work: the lease tick and the sweep. */
  private readonly periodic: Periodic[];

  constructor(
    private readonly config: KeyedCoreConfig,
    now: number,
  ) {
    this.now = now;
    this.d = { ...KEYED_DECISIONS, ...config.decisions };
    this.limits = config.limits;
    this.self = config.instanceId;
    this.addressKeys = new AddressKeys(this.limits.maxEntriesPerAddress, config.memoWindowMs);
    this.tasks = new TaskRunner((c) => this.out.push(c));
    this.ctx = {
      tasks: this.tasks,
      d: this.d,
      limits: this.limits,
      self: this.self,
      addressKeys: this.addressKeys,
      now: () => this.now,
      emit: (c) => this.emit(c),
      fail: (e) => this.fail(e),
      note: (n) => this.note(n),
    };
    this.bodies = new KeyedBodies(this.ctx);
    const tick = leaseTickMs(this.limits.leaseMs);
    this.periodic = [
      { at: now + tick, every: tick, running: false, task: () => this.tendTask() },
      {
        at: now + this.limits.sweepMs,
        every: this.limits.sweepMs,
        running: false,
        task: () => this.sweepTask(),
      },
    ];
    // On start: take the lease, and declare outcome unknown what a dead owner (a previous process) ran.
    // A failed start is retried by the lease tick; requests are served either way.
    this.tasks.spawn(
      this.startTask(),
      () => this.ready(),
      (error) => {
        this.fail(error);
        this.ready();
      },
    );
    this.tasks.run();
  }

  /** Takes one fact, at `now` (the host's clock). Then `poll()` the commands it gave. */
  handle(fact: KeyedFact, now: number): void {
    this.now = Math.max(this.now, now);
    this.timers();
    this.apply(fact);
    this.tasks.run();
  }

  /** The next command to execute, in order; undefined when there is none now. */
  poll(): KeyedCommand | undefined {
    return this.out.shift();
  }

  /** When the core must next be told the time (`tick`); undefined: only when something happens. */
  nextWakeAt(): number | undefined {
    let at = Number.POSITIVE_INFINITY;
    if (!this.closed) for (const p of this.periodic) at = Math.min(at, p.at);
    for (let k = this.keepAlives.peek(); k && !this.keepAliveDue(k); k = this.keepAlives.peek())
      this.keepAlives.shift();
    at = Math.min(at, this.keepAlives.next() ?? at, this.tasks.nextWake() ?? at);
    return Number.isFinite(at) ? at : undefined;
  }

  /** Whether a queued keep-alive is still its stream's (the stream is open and its deadline unmoved). */
  private keepAliveDue(k: { readonly request: number; readonly stream: Stream }, at?: number): boolean {
    return (
      this.streams.get(k.request) === k.stream &&
      k.stream.keepAliveAt !== undefined &&
      (at === undefined || k.stream.keepAliveAt <= at)
    );
  }

  /** What it holds now (tests: nothing is left behind). */
  stats(): { readonly runningHere: number; readonly waitingLogs: number } {
    return { runningHere: this.bodies.count, waitingLogs: this.tasks.bells('log:') };
  }

  addressStats(): { readonly addresses: number; readonly keys: number } {
    return this.addressKeys.stats();
  }

  private emit(c: KeyedCommand): void {
    this.out.push(c);
  }

  private fail(error: unknown): void {
    this.emit({ kind: 'error', error });
  }

  private ready(): void {
    this.started = true;
    for (const r of this.deferred.splice(0)) this.request(r);
  }

  /** The deadlines due by now: the lease tick, the sweep, keep-alives, sleeping tasks. */
  private timers(): void {
    const now = this.now;
    // The lease tick and the sweep, one run of each at a time: a slow store does not pile them up.
    if (!this.closed)
      for (const p of this.periodic) {
        if (now < p.at) continue;
        p.at = now + p.every;
        if (p.running) continue;
        p.running = true;
        const over = () => {
          p.running = false;
        };
        this.tasks.spawn(p.task(), over, (e) => {
          over();
          this.fail(e);
        });
      }
    if ((this.keepAlives.next() ?? Number.POSITIVE_INFINITY) <= now)
      for (const k of this.keepAlives.due(now)) {
        if (!this.keepAliveDue(k, now)) continue;
        k.stream.keepAliveAt = now + this.limits.keepAliveMs;
        this.keepAlives.add(k.stream.keepAliveAt, k);
        this.emit({ kind: 'write', request: k.request, frame: { kind: 'keep-alive' } });
      }
    this.tasks.wakeDue(now);
  }

  private apply(fact: KeyedFact): void {
    switch (fact.kind) {
      case 'request':
        this.route(fact);
        return;
      case 'store-answer':
        this.tasks.answer(fact.op, fact.value);
        return;
      case 'store-failed':
        this.tasks.fail(fact.op, fact.error);
        return;
      case 'body-response':
      case 'body-refusal':
      case 'body-message':
      case 'body-ended':
      case 'body-failed':
        this.bodies.handle(fact);
        return;
      case 'stream-closed':
        this.streamClosed(fact.request);
        return;
      case 'log-changed':
        this.tasks.ring(logBell(fact.logId));
        return;
      case 'forgotten':
        // A store that forgets entries by itself (memory) takes their events with them.
        this.tasks.spawn(dropLog(this.ctx, fact.logId));
        this.tasks.ring(logBell(fact.logId));
        return;
      case 'tick':
        return;
      case 'close':
        this.closed = true;
        // Attached responses end at their next look (`read-log` sees the core closed): look now.
        for (const s of this.streams.values()) this.tasks.ring(logBell(s.logId));
        return;
    }
  }

  // ---- requests -------------------------------------------------------------------------------

  private route(fact: Extract<KeyedFact, { kind: 'request' }>): void {
    const r = routeKeyedMessage(fact.message, this.limits.maxKeyLength);
    if (r.kind === 'unkeyed') {
      this.emit({ kind: 'pass', request: fact.request });
      return;
    }
    if (r.kind === 'reply') {
      this.answerReply(fact.request, r.reply, r.id);
      return;
    }
    // A request waits for the start (lease, orphans): it must not run beside a dead owner's entries.
    if (!this.started) {
      this.deferred.push(fact);
      return;
    }
    this.request(fact);
  }

  private request(fact: Extract<KeyedFact, { kind: 'request' }>): void {
    const r = routeKeyedMessage(fact.message, this.limits.maxKeyLength);
    const principal = fact.principal ?? '';
    const request = fact.request;
    // Nothing from the network may throw out of the core: a failure here is a JSON-RPC 500.
    const internal = (id: RequestId | null) => (error: unknown) => {
      this.fail(error);
      this.answerReply(
        request,
        { status: 500, error: { code: JsonRpcCode.INTERNAL_ERROR, message: 'Internal error' } },
        id,
      );
    };
    switch (r.kind) {
      case 'cancel':
        this.tasks.spawn(
          this.cancelTask(memoKey(principal, r.key)),
          () => this.emit({ kind: 'answer', request, status: 202, headers: [], body: null }),
          internal(null),
        );
        return;
      case 'cancel-request':
        this.tasks.spawn(
          this.cancelTask(memoKey(principal, r.key)),
          (after) =>
            this.emit({
              kind: 'answer',
              request,
              status: 200,
              headers: [['content-type', 'application/json']],
              body: JSON.stringify({ jsonrpc: '2.0', id: r.id, result: cancelResult(after) }),
            }),
          internal(r.id),
        );
        return;
      case 'call': {
        // Without `authenticate` (no principal), each address is held to its own share of the keys.
        const caller: Caller = {
          request,
          principal,
          address: fact.principal === undefined ? (fact.address ?? 'unknown') : undefined,
        };
        this.tasks.spawn(
          this.callTask(caller, fact.message as JsonRpcRequest, r.reading),
          undefined,
          internal(r.id),
        );
        return;
      }
      default:
        return;
    }
  }

  /** A JSON-RPC error answer with its HTTP status (and Retry-After). */
  private answerReply(request: number, reply: KeyedReply, id: RequestId | null): void {
    const headers: Array<[string, string]> = [['content-type', 'application/json']];
    if (reply.retryAfterSeconds !== undefined) headers.push(['retry-after', String(reply.retryAfterSeconds)]);
    this.emit({
      kind: 'answer',
      request,
      status: reply.status,
      headers,
      body: JSON.stringify(replyMessage(reply, { id: id as RequestId })),
    });
  }

  /** One keyed call: its steps (`keyedCallSteps`) on the stores, then the reply or the response. */
  private *callTask(
    caller: Caller,
    message: JsonRpcRequest,
    reading: Extract<KeyReading, { kind: 'keyed' }>,
  ): Task {
    const mk = memoKey(caller.principal, reading.key);
    // Stored as a digest: the canonical params can be as large as a body, and the memo keeps one per key.
    const fingerprint = this.config.ids.fingerprint(requestFingerprint(message.method, message.params));
    const attempt = attemptOf(message);
    let started: Run | undefined;
    let restarted: 'won' | 'lost' | undefined;
    const d = this.d;
    const steps = keyedCallSteps({
      reading,
      fingerprint,
      memoWindowMs: this.config.memoWindowMs,
      now: this.now,
    });
    const step = function* (this: KeyedCore, c: KeyedCallCommand): Task<unknown> {
      switch (c.kind) {
        case 'read-entry':
          return yield { kind: 'memo.get', memoKey: mk };
        case 'read-window':
          return yield { kind: 'log.window', logId: c.entry.logId };
        case 'owner-alive':
          return yield* ownerAlive(this.ctx, c.owner);
        case 'memo-complete-for':
          return yield { kind: 'memo.complete-for' };
        case 'new-entry': {
          const epoch = this.config.ids.epoch();
          return {
            memoKey: mk,
            principal: caller.principal,
            fingerprint,
            state: 'running',
            owner: this.self,
            logId: keyedLogId(`${this.config.ids.logDigest(mk)}-${epoch}`),
            epoch,
            createdAt: this.now,
          } satisfies MemoEntry;
        }
        case 'create-entry':
          return yield* this.create(c.entry, caller, c.first === true);
        case 'drop-log':
          return yield* dropLog(this.ctx, c.entry.logId);
        case 'replace-entry':
          if (c.next.state === 'outcomeUnknown' && c.entry.state === 'running')
            this.note({ kind: 'plan', request: caller.request, plan: 'declare-died' });
          return yield* replace(this.ctx, c.entry, c.next);
        case 'restart-entry': {
          const won = restartWon(yield* replace(this.ctx, c.entry, c.next), c.next);
          if (!won) this.note({ kind: 'plan', request: caller.request, plan: 'restart lost' });
          restarted = won ? 'won' : 'lost';
          return won;
        }
        case 'start-run':
          // From here on, every change of the new entry or its log made here rings its bell.
          this.tasks.mark(logBell(c.entry.logId));
          started = this.bodies.start(c.entry, message, caller);
          return undefined;
      }
    }.bind(this);
    const result = yield* driveSteps(
      steps as Generator<KeyedCallCommand, KeyedCallEnd, never>,
      function* (c) {
        return d.callAnswer(c, yield* step(c));
      },
    );
    const end = this.d.callEnd(result);
    if (end.kind === 'reply') {
      if (started) this.tasks.rangSinceMark(logBell(started.entry.logId));
      this.note({ kind: 'plan', request: caller.request, plan: `reply ${end.reply.error.code}` });
      this.note({ kind: 'refused', code: end.reply.error.code, status: end.reply.status });
      return this.answerReply(caller.request, end.reply, attempt.id);
    }
    const plan = started ? (restarted === 'won' ? 'execute-over' : 'execute') : 'serve';
    this.note({ kind: 'plan', request: caller.request, plan, entry: end.entry });
    if (!started)
      this.note({
        kind: 'attached',
        request: caller.request,
        run: this.bodies.runOf(mk),
        message,
        lastEventId: reading.lastEventId,
        entry: end.entry,
        afterSeq: end.afterSeq,
      });
    // The attempt that started the body answers as the SDK did when the SDK refused it (its 4xx: the
    // client's own recovery, such as re-listing tools after -32020, depends on it). The SDK answers at once,
    // so this wait is short; past it the attempt gets its stream, and a late refusal comes through the log.
    if (started && !started.acceptance)
      yield { kind: 'sleep', bell: startBell(started.id), until: this.now + this.limits.startWaitMs };
    const refusal = started?.acceptance?.refusal;
    if (refusal) {
      this.tasks.rangSinceMark(logBell(started?.entry.logId ?? ''));
      this.emit({
        kind: 'answer',
        request: caller.request,
        status: refusal.status,
        headers: refusal.headers,
        body: refusal.text,
      });
      return;
    }
    // Nothing rang the entry's bell since it was created here: its log is empty and the entry as created
    // (every append and every compare-and-set here rings it), so the response's first look is skipped.
    const quiet =
      started !== undefined &&
      started.entry.logId === end.entry.logId &&
      end.afterSeq === 0 &&
      !this.tasks.rangSinceMark(logBell(started.entry.logId));
    this.serve(caller.request, end.entry, attempt, end.afterSeq, quiet);
  }

  /**
   * Creates the entry within the bounds: the caller address's share first (no `authenticate`), then the
   * memo's per-principal bound. A refusal at either is counted (at the address's, not when `first`: the
   * call then reads the memo and is refused, and counted, only if the key is new).
   */
  private *create(entry: MemoEntry, caller: Caller, first: boolean): Task<MemoCreate> {
    const { address } = caller;
    if (address !== undefined) {
      const room = this.addressKeys.reserve(address, entry.memoKey, this.now);
      if (room.kind === 'full') {
        // Before the memo was read, the key may be known (then it attaches): not a refusal yet.
        if (!first)
          this.note({
            kind: 'limited',
            request: caller.request,
            reason: 'max_keys_per_address',
            status: 429,
          });
        return { kind: 'full', retryAfterSeconds: room.retryAfterSeconds, bound: 'address' };
      }
    }
    let created: MemoCreate | undefined;
    try {
      created = (yield {
        kind: 'memo.create',
        entry,
        max: this.limits.maxEntriesPerPrincipal,
      }) as MemoCreate;
      if (created.kind === 'full')
        this.note({
          kind: 'limited',
          request: caller.request,
          reason: 'max_keys_per_principal',
          status: 429,
        });
      return created;
    } finally {
      if (address !== undefined) {
        if (created?.kind === 'created') this.addressKeys.created(address, entry.memoKey);
        else this.addressKeys.release(address, entry.memoKey);
      }
    }
  }

  /** Cancels the principal's key if it runs (§5, §13); the entry afterwards (undefined: none). */
  private *cancelTask(mk: string): Task<MemoEntry | undefined> {
    const entry = (yield { kind: 'memo.get', memoKey: mk }) as MemoEntry | undefined;
    if (!entry || planKeyedCancel(entry).kind !== 'cancel') return entry;
    const stored = yield* record(this.ctx, entry, { type: 'cancel.requested' });
    // Running here: abort now; running elsewhere: its instance sees the entry at its next lease tick.
    if (this.d.abortsLocalRun(stored, this.self)) this.bodies.abortLocal(mk);
    return stored;
  }

  // ---- attached responses ---------------------------------------------------------------------

  /** The response of one attempt, from the key's log: never starts anything. */
  private serve(request: number, entry: MemoEntry, attempt: Attempt, afterSeq: number, quiet = false): void {
    this.emit({ kind: 'open-stream', request });
    const stream: Stream = {
      logId: entry.logId,
      memoKey: entry.memoKey,
      task: undefined,
      keepAliveAt: this.limits.keepAliveMs > 0 ? this.now + this.limits.keepAliveMs : undefined,
    };
    this.streams.set(request, stream);
    if (stream.keepAliveAt !== undefined) this.keepAlives.add(stream.keepAliveAt, { request, stream });
    const end = () => {
      if (this.streams.get(request) !== stream) return;
      this.streams.delete(request);
      this.emit({ kind: 'end-stream', request });
    };
    stream.task = this.tasks.spawn(
      this.followTask(request, entry, attempt, afterSeq, quiet),
      end,
      (error) => {
        this.fail(error);
        end();
      },
    );
  }

  /** Writes the log after `afterSeq`, live events, then the end `attachStep` decides. */
  private *followTask(
    request: number,
    entry: MemoEntry,
    attempt: Attempt,
    afterSeq: number,
    quiet: boolean,
  ): Task {
    const steps = this.d.followSteps({ entry, attempt, afterSeq, quiet, decide: this.d.attachStep });
    let last: MemoEntry | undefined;
    const step = function* (this: KeyedCore, c: KeyedFollowCommand): Task<unknown> {
      switch (c.kind) {
        case 'read-log':
          // This response stops between looks once the core closes.
          if (this.closed) throw CORE_CLOSED;
          return yield { kind: 'log.read', logId: entry.logId, afterSeq: c.afterSeq };
        case 'read-entry':
          last = (yield { kind: 'memo.get', memoKey: entry.memoKey }) as MemoEntry | undefined;
          return last;
        case 'owner-alive':
          return yield* ownerAlive(this.ctx, c.owner);
        case 'write':
          for (const f of c.frames) this.write(request, { kind: 'event', id: f.id, message: f.message });
          return undefined;
        case 'declare-died':
          return yield* record(this.ctx, c.entry, { type: 'instance.died' });
        case 'wait':
          yield { kind: 'sleep', bell: logBell(entry.logId), until: this.now + this.limits.pollMs };
          return undefined;
      }
    }.bind(this);
    let r: { value: KeyedFollowEnd };
    try {
      r = { value: yield* driveSteps(steps as Generator<KeyedFollowCommand, KeyedFollowEnd, never>, step) };
    } catch (error) {
      if (error === CORE_CLOSED) return;
      throw error;
    }
    this.note({
      kind: 'attach-end',
      request,
      end: r.value.end,
      refusal: r.value.end === 'outcome' && last?.state === 'refused',
    });
    const frame = r.value.frame;
    if (frame)
      this.write(
        request,
        frame.id === undefined
          ? { kind: 'data', message: frame.message }
          : { kind: 'event', id: frame.id, message: frame.message },
      );
  }

  private write(request: number, frame: KeyedSseFrame): void {
    this.emit({ kind: 'write', request, frame });
  }

  /** The client's stream closed: a transport fact. The body goes on; only this response stops. */
  private streamClosed(request: number): void {
    const s = this.streams.get(request);
    if (!s) return;
    this.streams.delete(request);
    if (s.task) this.tasks.cancel(s.task);
    if (this.d.closedStreamCancels)
      this.tasks.spawn(this.cancelTask(s.memoKey), undefined, (e) => this.fail(e));
  }

  // ---- bodies ---------------------------------------------------------------------------------
  // ---- the lease tick, the sweep, the start -------------------------------------------------------

  private *startTask(): Task {
    yield { kind: 'memo.renew-lease', leaseMs: this.limits.leaseMs };
    yield* this.declareOrphans();
  }

  /** Renew the lease, store unstored ends again, abort bodies no longer running here, declare orphans. */
  private *tendTask(): Task {
    yield { kind: 'memo.renew-lease', leaseMs: this.limits.leaseMs };
    yield* this.bodies.storeUnstored();
    for (const mk of this.bodies.keys()) {
      const e = (yield { kind: 'memo.get', memoKey: mk }) as MemoEntry | undefined;
      if (this.d.abortsLocalRun(e, this.self)) this.bodies.abortLocal(mk);
    }
    yield* this.declareOrphans();
  }

  /** Declares outcome unknown the running entries whose owner holds no lease. */
  private *declareOrphans(): Task {
    const running = (yield { kind: 'memo.running' }) as MemoEntry[];
    const owners = [...new Set(running.map((e) => e.owner))];
    const leased = (yield { kind: 'memo.alive', owners }) as ReadonlySet<string>;
    for (const e of this.d.orphanedEntries(running, (o) => this.d.isOwnerAlive(o, this.self, leased)))
      yield* record(this.ctx, e, { type: 'instance.died' });
  }

  private *sweepTask(): Task {
    this.addressKeys.sweep(this.now);
    const gone = (yield { kind: 'memo.sweep' }) as string[];
    for (const logId of gone) yield { kind: 'log.drop', logId } satisfies KeyedStoreCall;
  }

  private note(note: Extract<KeyedCommand, { kind: 'note' }>['note']): void {
    this.emit({ kind: 'note', note });
  }
}
