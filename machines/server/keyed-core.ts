import { JsonRpcCode } from '../codes.js';
import { type KeyReading, memoKey, requestFingerprint } from '../continuity-extension.js';
import type { JsonRpcMessage, JsonRpcRequest, RequestId } from '../jsonrpc.js';
import { isOwnerAlive } from './instances.js';
import { AddressKeys } from './keyed-address-book.js';
import type { KeyedCommand, KeyedFact, KeyedSseFrame, KeyedStoreCall } from './keyed-core-io.js';
import {
  admitKeyedEvent,
  EMPTY_EVENT_BUDGET,
  type KeyedEventBudget,
  storedEvent,
  storedEventBytes,
} from './keyed-events.js';
import {
  type KeyedCallCommand,
  type KeyedCallEnd,
  type KeyedLogRead,
  keyedBodyEndSteps,
  keyedCallSteps,
  keyedFollowSteps,
} from './keyed-execute.js';
import { keyedLogId, type MemoCreate, type MemoEntry, orphanedEntries } from './keyed-memo.js';
import {
  type Attempt,
  abortsLocalRun,
  attachStep,
  attemptOf,
  cancelResult,
  isFinalAnswer,
  type KeyedReply,
  nextEntry,
  planKeyedCancel,
  refusalResponse,
  refusedBeforeRun,
  replyMessage,
  restartWon,
  routeKeyedMessage,
} from './keyed-plan.js';
import { type Task, TaskRunner } from './keyed-tasks.js';
import { type KeyedLimits, leaseTickMs } from './keyed-timing.js';
import type { StreamWindow } from './retention.js';

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
 * SDK; properties/world2026 on simulated ones and a virtual clock.
 */

/** The decisions the core takes from keyed-plan.ts et al.; a mutant of the model replaces one. */
export interface KeyedCoreDecisions {
  readonly attachStep: typeof attachStep;
  /** The steps of an attached response (a mutant ends one early). */
  readonly followSteps: typeof keyedFollowSteps;
  readonly bodyEnd: typeof keyedBodyEndSteps;
  readonly refusedBeforeRun: typeof refusedBeforeRun;
  readonly abortsLocalRun: typeof abortsLocalRun;
  readonly orphanedEntries: typeof orphanedEntries;
  readonly isOwnerAlive: typeof isOwnerAlive;
  /** What a call's steps are told a store answered (identity; a mutant misreads one). */
  readonly callAnswer: (command: KeyedCallCommand, answer: unknown) => unknown;
  /** How a call's steps end (identity; a mutant rewrites one). */
  readonly callEnd: (end: KeyedCallEnd) => KeyedCallEnd;
  /** A closed response stream is a transport fact (false); a mutant cancels the key. */
  readonly closedStreamCancels: boolean;
}

export const KEYED_DECISIONS: KeyedCoreDecisions = {
  attachStep,
  followSteps: keyedFollowSteps,
  bodyEnd: keyedBodyEndSteps,
  refusedBeforeRun,
  abortsLocalRun,
  orphanedEntries,
  isOwnerAlive,
  callAnswer: (_c, a) => a,
  callEnd: (e) => e,
  closedStreamCancels: false,
};

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

/** A body run here. */
interface Run {
  readonly id: number;
  readonly entry: MemoEntry;
  readonly message: JsonRpcRequest;
  readonly address: string | undefined;
  budget: KeyedEventBudget;
  readonly queue: JsonRpcMessage[];
  appending: boolean;
  /** No more messages are read (its final answer came, it ended, or its log failed). */
  stopped: boolean;
  /** Everything read: the end is stored once the appends drained. */
  ending: boolean;
  over: boolean;
  aborted: boolean;
  final: JsonRpcMessage | undefined;
  refused: boolean;
  refusal: { status: number; text: string; headers: ReadonlyArray<readonly [string, string]> } | undefined;
  /** What the starting attempt answers: set once the SDK answered (`refusal`: its refusal, stored). */
  acceptance: { readonly refusal: Run['refusal'] } | undefined;
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

const logBell = (logId: string) => `log:${logId}`;
const startBell = (run: number) => `start:${run}`;

export class KeyedCore {
  private now: number;
  private readonly out: KeyedCommand[] = [];
  private readonly tasks: TaskRunner;
  private readonly d: KeyedCoreDecisions;
  private readonly limits: KeyedLimits;
  private readonly self: string;
  private readonly addressKeys: AddressKeys;
  private readonly runs = new Map<number, Run>();
  /** Bodies running here, by memo key. */
  private readonly local = new Map<string, Run>();
  /**
   * Bodies that ended here but whose end could not be stored: their entry would stay `running` under this
   * instance's live lease for ever. The lease tick stores their end again, with the answer they got.
   */
  private readonly unstored = new Map<
    string,
    { entry: MemoEntry; final: JsonRpcMessage | undefined; refused: boolean }
  >();
  private readonly streams = new Map<number, Stream>();
  /** Keyed requests that came before the start (lease, orphans) finished. */
  private readonly deferred: Array<Extract<KeyedFact, { kind: 'request' }>> = [];
  private started = false;
  private closed = false;
  /** The core's own periodic work: the lease tick and the sweep. */
  private readonly periodic: Periodic[];
  private nextRun = 1;

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
    const times: number[] = [];
    if (!this.closed) for (const p of this.periodic) times.push(p.at);
    for (const s of this.streams.values()) if (s.keepAliveAt !== undefined) times.push(s.keepAliveAt);
    const sleep = this.tasks.nextWake();
    if (sleep !== undefined) times.push(sleep);
    return times.length === 0 ? undefined : Math.min(...times);
  }

  /** What it holds now (tests: nothing is left behind). */
  stats(): { readonly runningHere: number; readonly waitingLogs: number } {
    return { runningHere: this.local.size, waitingLogs: this.tasks.bells('log:') };
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
    for (const [request, s] of this.streams)
      if (s.keepAliveAt !== undefined && now >= s.keepAliveAt) {
        s.keepAliveAt = now + this.limits.keepAliveMs;
        this.emit({ kind: 'write', request, frame: { kind: 'keep-alive' } });
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
        this.bodyResponse(fact.run, fact.status);
        return;
      case 'body-refusal': {
        const run = this.runs.get(fact.run);
        if (!run || run.stopped) return;
        run.final = refusalResponse(fact.status, fact.body, run.message.id);
        run.refused = true;
        run.refusal = { status: fact.status, text: fact.text, headers: fact.headers };
        run.stopped = true;
        this.bodyOver(run);
        return;
      }
      case 'body-message':
        this.bodyMessage(fact.run, fact.message);
        return;
      case 'body-ended': {
        const run = this.runs.get(fact.run);
        if (!run || run.stopped) return;
        run.stopped = true;
        this.bodyOver(run);
        return;
      }
      case 'body-failed': {
        const run = this.runs.get(fact.run);
        // After `stop-reading`, a broken read is the host letting go: nothing to report.
        if (!run || run.stopped) return;
        if (!run.aborted) this.fail(fact.error);
        run.stopped = true;
        this.bodyOver(run);
        return;
      }
      case 'stream-closed':
        this.streamClosed(fact.request);
        return;
      case 'log-changed':
        this.tasks.ring(logBell(fact.logId));
        return;
      case 'forgotten':
        // A store that forgets entries by itself (memory) takes their events with them.
        this.tasks.spawn(this.dropLog(fact.logId));
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
    const steps = keyedCallSteps({
      reading,
      fingerprint,
      memoWindowMs: this.config.memoWindowMs,
      now: this.now,
    });
    let r = steps.next();
    while (!r.done) {
      const c = r.value;
      let a: unknown;
      switch (c.kind) {
        case 'read-entry':
          a = yield { kind: 'memo.get', memoKey: mk };
          break;
        case 'read-window':
          a = yield { kind: 'log.window', logId: c.entry.logId };
          break;
        case 'owner-alive':
          a = yield* this.ownerAlive(c.owner);
          break;
        case 'memo-complete-for':
          a = yield { kind: 'memo.complete-for' };
          break;
        case 'new-entry': {
          const epoch = this.config.ids.epoch();
          a = {
            memoKey: mk,
            principal: caller.principal,
            fingerprint,
            state: 'running',
            owner: this.self,
            logId: keyedLogId(`${this.config.ids.logDigest(mk)}-${epoch}`),
            epoch,
            createdAt: this.now,
          } satisfies MemoEntry;
          break;
        }
        case 'open-log':
          a = yield { kind: 'log.open', logId: c.entry.logId };
          break;
        case 'create-entry':
          a = yield* this.create(c.entry, caller);
          break;
        case 'drop-log':
          a = yield* this.dropLog(c.entry.logId);
          break;
        case 'replace-entry':
          if (c.next.state === 'outcomeUnknown' && c.entry.state === 'running')
            this.note({ kind: 'plan', request: caller.request, plan: 'declare-died' });
          a = yield* this.replace(c.entry, c.next);
          break;
        case 'restart-entry': {
          const won = restartWon(yield* this.replace(c.entry, c.next), c.next);
          if (!won) this.note({ kind: 'plan', request: caller.request, plan: 'restart lost' });
          restarted = won ? 'won' : 'lost';
          a = won;
          break;
        }
        case 'start-run':
          started = this.startRun(c.entry, message, caller);
          a = undefined;
          break;
      }
      r = steps.next(this.d.callAnswer(c, a) as never);
    }
    const end = this.d.callEnd(r.value);
    if (end.kind === 'reply') {
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
        run: this.local.get(mk)?.id,
        message,
        lastEventId: reading.lastEventId,
      });
    // The attempt that started the body answers as the SDK did when the SDK refused it (its 4xx: the
    // client's own recovery, such as re-listing tools after -32020, depends on it). The SDK answers at once,
    // so this wait is short; past it the attempt gets its stream, and a late refusal comes through the log.
    if (started && !started.acceptance)
      yield { kind: 'sleep', bell: startBell(started.id), until: this.now + this.limits.startWaitMs };
    const refusal = started?.acceptance?.refusal;
    if (refusal) {
      this.emit({
        kind: 'answer',
        request: caller.request,
        status: refusal.status,
        headers: refusal.headers,
        body: refusal.text,
      });
      return;
    }
    this.serve(caller.request, end.entry, attempt, end.afterSeq);
  }

  private *ownerAlive(owner: string): Task<boolean> {
    const leased = (yield { kind: 'memo.alive', owners: [owner] }) as ReadonlySet<string>;
    return this.d.isOwnerAlive(owner, this.self, leased);
  }

  /**
   * Creates the entry within the bounds: the caller address's share first (no `authenticate`), then the
   * memo's per-principal bound. A refusal at either is counted.
   */
  private *create(entry: MemoEntry, caller: Caller): Task<MemoCreate> {
    const { address } = caller;
    if (address !== undefined) {
      const room = this.addressKeys.reserve(address, entry.memoKey, this.now);
      if (room.kind === 'full') {
        this.note({ kind: 'limited', request: caller.request, reason: 'max_keys_per_address', status: 429 });
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

  /** Best effort: a log that could not be dropped is only storage; the request goes on. */
  private *dropLog(logId: string): Task<undefined> {
    try {
      yield { kind: 'log.drop', logId };
    } catch (error) {
      this.fail(error);
    }
    return undefined;
  }

  /** Compare-and-set `next` over `entry` (from its state), then wake its watchers. The entry stored after. */
  private *replace(entry: MemoEntry, next: MemoEntry): Task<MemoEntry | undefined> {
    const stored = (yield { kind: 'memo.replace', next, expected: entry.state }) as MemoEntry | undefined;
    if (stored?.state === next.state && stored.logId === next.logId && entry.state !== next.state)
      this.note({ kind: 'state', from: entry.state, to: next.state });
    this.tasks.ring(logBell(entry.logId));
    return stored;
  }

  /** Moves the stored entry by the machine (`nextEntry`, compare-and-set from its state). */
  private *record(
    entry: MemoEntry,
    event: Parameters<typeof nextEntry>[1],
    watched = false,
  ): Task<MemoEntry | undefined> {
    const next = nextEntry(entry, event, this.now, watched);
    if (!next) return entry;
    return yield* this.replace(entry, next);
  }

  /** Cancels the principal's key if it runs (§5, §13); the entry afterwards (undefined: none). */
  private *cancelTask(mk: string): Task<MemoEntry | undefined> {
    const entry = (yield { kind: 'memo.get', memoKey: mk }) as MemoEntry | undefined;
    if (!entry || planKeyedCancel(entry).kind !== 'cancel') return entry;
    const stored = yield* this.record(entry, { type: 'cancel.requested' });
    // Running here: abort now; running elsewhere: its instance sees the entry at its next lease tick.
    if (this.d.abortsLocalRun(stored, this.self)) this.abortLocal(mk);
    return stored;
  }

  // ---- attached responses ---------------------------------------------------------------------

  /** The response of one attempt, from the key's log: never starts anything. */
  private serve(request: number, entry: MemoEntry, attempt: Attempt, afterSeq: number): void {
    this.emit({ kind: 'open-stream', request });
    const stream: Stream = {
      logId: entry.logId,
      memoKey: entry.memoKey,
      task: undefined,
      keepAliveAt: this.limits.keepAliveMs > 0 ? this.now + this.limits.keepAliveMs : undefined,
    };
    this.streams.set(request, stream);
    const end = () => {
      if (this.streams.get(request) !== stream) return;
      this.streams.delete(request);
      this.emit({ kind: 'end-stream', request });
    };
    stream.task = this.tasks.spawn(this.followTask(request, entry, attempt, afterSeq), end, (error) => {
      this.fail(error);
      end();
    });
  }

  /** Writes the log after `afterSeq`, live events, then the end `attachStep` decides. */
  private *followTask(request: number, entry: MemoEntry, attempt: Attempt, afterSeq: number): Task {
    const steps = this.d.followSteps({ entry, attempt, afterSeq, decide: this.d.attachStep });
    let last: MemoEntry | undefined;
    let r = steps.next();
    while (!r.done) {
      const c = r.value;
      let a: unknown;
      switch (c.kind) {
        case 'read-log':
          // This response stops between looks once the core closes.
          if (this.closed) return;
          a = (yield { kind: 'log.read', logId: entry.logId, afterSeq: c.afterSeq }) as
            | KeyedLogRead
            | undefined;
          break;
        case 'read-entry':
          last = (yield { kind: 'memo.get', memoKey: entry.memoKey }) as MemoEntry | undefined;
          a = last;
          break;
        case 'owner-alive':
          a = yield* this.ownerAlive(c.owner);
          break;
        case 'write':
          for (const f of c.frames) this.write(request, { kind: 'event', id: f.id, message: f.message });
          break;
        case 'declare-died':
          a = yield* this.record(c.entry, { type: 'instance.died' });
          break;
        case 'wait':
          yield { kind: 'sleep', bell: logBell(entry.logId), until: this.now + this.limits.pollMs };
          break;
      }
      r = steps.next(a as never);
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

  private startRun(entry: MemoEntry, message: JsonRpcRequest, caller: Caller): Run {
    const run: Run = {
      id: this.nextRun++,
      entry,
      message,
      address: caller.address,
      budget: EMPTY_EVENT_BUDGET,
      queue: [],
      appending: false,
      stopped: false,
      ending: false,
      over: false,
      aborted: false,
      final: undefined,
      refused: false,
      refusal: undefined,
      acceptance: undefined,
    };
    this.runs.set(run.id, run);
    this.local.set(entry.memoKey, run);
    this.note({ kind: 'executed', run: run.id });
    this.emit({ kind: 'run-body', run: run.id, request: caller.request, message });
    return run;
  }

  private bodyResponse(id: number, status: number): void {
    const run = this.runs.get(id);
    if (!run || run.stopped) return;
    // Nothing ran: read as a refusal, recorded `refused` (a re-issue of the key runs).
    if (this.d.refusedBeforeRun(status)) {
      this.emit({ kind: 'read-refusal', run: id });
      return;
    }
    this.accept(run, undefined);
    this.emit({ kind: 'read-messages', run: id });
  }

  /** The starting attempt may go on: served from the log, or answered with the stored refusal. */
  private accept(run: Run, refusal: Run['refusal']): void {
    if (run.acceptance) return;
    run.acceptance = { refusal };
    this.tasks.ring(startBell(run.id));
  }

  /** One message of the body: its final answer, or an event kept within the key's byte budget. */
  private bodyMessage(id: number, message: JsonRpcMessage): void {
    const run = this.runs.get(id);
    if (!run || run.stopped) return;
    if (isFinalAnswer(message, run.message.id)) {
      run.final = message;
      run.stopped = true;
      this.emit({ kind: 'stop-reading', run: id });
      this.bodyOver(run);
      return;
    }
    const stored = storedEvent(message);
    const admission = admitKeyedEvent(run.budget, storedEventBytes(stored), this.limits.maxEventBytesPerKey);
    run.budget = admission.budget;
    if (admission.kind === 'drop') return;
    run.queue.push(stored);
    if (!run.appending) {
      run.appending = true;
      this.tasks.spawn(this.appendTask(run), () => {
        run.appending = false;
        if (run.ending) this.finish(run);
      });
    }
  }

  /** Appends the body's kept messages in order; a failed append ends the run without an answer. */
  private *appendTask(run: Run): Task {
    for (let m = run.queue.shift(); m; m = run.queue.shift()) {
      try {
        yield { kind: 'log.append', logId: run.entry.logId, message: m };
      } catch (error) {
        if (!run.aborted) this.fail(error);
        run.queue.length = 0;
        // Its events are not all kept: no answer is vouched for (the entry is declared dead).
        run.final = undefined;
        run.refused = false;
        if (!run.stopped) {
          run.stopped = true;
          this.emit({ kind: 'stop-reading', run: run.id });
          run.ending = true;
        }
        return;
      }
      this.tasks.ring(logBell(run.entry.logId));
    }
  }

  /** Everything of the body is read: its end is stored once its appends drained. */
  private bodyOver(run: Run): void {
    run.ending = true;
    if (!run.appending) this.finish(run);
  }

  private finish(run: Run): void {
    if (run.over) return;
    run.over = true;
    if (this.local.get(run.entry.memoKey) === run) this.local.delete(run.entry.memoKey);
    this.emit({ kind: 'body-over', run: run.id, final: run.final });
    const done = (stored: boolean) => {
      if (run.address !== undefined) this.addressKeys.finished(run.address, run.entry.memoKey, this.now);
      // The refusal is answered only once it is stored: the client's corrected re-issue must find the key
      // `refused` (it then runs), not still `running`. Unstored, the attempt is served from the log.
      this.accept(run, stored ? run.refusal : undefined);
      this.runs.delete(run.id);
      this.emit({ kind: 'run-done', run: run.id });
    };
    this.tasks.spawn(this.storeEnd(run.entry, run.final, run.refused), done, (e) => {
      this.fail(e);
      done(false);
    });
  }

  /** The end of a body run, stored; on a store failure it is kept for the lease tick to store again. */
  private *storeEnd(entry: MemoEntry, final: JsonRpcMessage | undefined, refused: boolean): Task<boolean> {
    try {
      yield* this.bodyEnd(entry, final, refused);
      this.unstored.delete(entry.memoKey);
      return true;
    } catch (error) {
      this.fail(error);
      this.unstored.set(entry.memoKey, { entry, final, refused });
      return false;
    }
  }

  /**
   * `keyedBodyEndSteps`: the outcome recorded durably first, under the id the final response gets in the
   * log, then appended: no stream ever writes an outcome the memo does not hold.
   */
  private *bodyEnd(entry: MemoEntry, final: JsonRpcMessage | undefined, refused: boolean): Task {
    const steps = this.d.bodyEnd(entry, final, refused);
    let r = steps.next();
    while (!r.done) {
      const c = r.value;
      let a: unknown;
      switch (c.kind) {
        case 'read-entry':
          a = yield { kind: 'memo.get', memoKey: entry.memoKey };
          break;
        case 'read-window':
          a = (yield { kind: 'log.window', logId: entry.logId }) as StreamWindow | undefined;
          break;
        case 'watched':
          a = this.tasks.sleeping(logBell(entry.logId));
          break;
        case 'record':
          a = yield* this.record(c.entry, c.event, c.watched);
          break;
        case 'append-final':
          yield { kind: 'log.append-final', logId: entry.logId, message: c.message };
          break;
        case 'ring':
          this.tasks.ring(logBell(entry.logId));
          break;
      }
      r = steps.next(a as never);
    }
  }

  private abortLocal(mk: string): void {
    const run = this.local.get(mk);
    if (!run || run.aborted) return;
    run.aborted = true;
    this.emit({ kind: 'abort-body', run: run.id });
  }

  // ---- the lease tick, the sweep, the start -------------------------------------------------------

  private *startTask(): Task {
    yield { kind: 'memo.renew-lease', leaseMs: this.limits.leaseMs };
    yield* this.declareOrphans();
  }

  /** Renew the lease, store unstored ends again, abort bodies no longer running here, declare orphans. */
  private *tendTask(): Task {
    yield { kind: 'memo.renew-lease', leaseMs: this.limits.leaseMs };
    for (const { entry, final, refused } of [...this.unstored.values()])
      yield* this.storeEnd(entry, final, refused);
    for (const mk of [...this.local.keys()]) {
      const e = (yield { kind: 'memo.get', memoKey: mk }) as MemoEntry | undefined;
      if (this.d.abortsLocalRun(e, this.self)) this.abortLocal(mk);
    }
    yield* this.declareOrphans();
  }

  /** Declares outcome unknown the running entries whose owner holds no lease. */
  private *declareOrphans(): Task {
    const running = (yield { kind: 'memo.running' }) as MemoEntry[];
    const owners = [...new Set(running.map((e) => e.owner))];
    const leased = (yield { kind: 'memo.alive', owners }) as ReadonlySet<string>;
    for (const e of this.d.orphanedEntries(running, (o) => this.d.isOwnerAlive(o, this.self, leased)))
      yield* this.record(e, { type: 'instance.died' });
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
