import { createHash, randomBytes } from 'node:crypto';
import { JsonRpcCode } from '../../../machines/codes.js';
import {
  type ContinuitySettings,
  DEFAULT_CONTINUITY_SETTINGS,
  type KeyReading,
  memoKey,
  requestFingerprint,
} from '../../../machines/continuity-extension.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../../machines/jsonrpc.js';
import { isOwnerAlive } from '../../../machines/server/instances.js';
import { AddressKeys } from '../../../machines/server/keyed-address-book.js';
import {
  admitKeyedEvent,
  EMPTY_EVENT_BUDGET,
  maxEventBytesPerKey,
  storedEvent,
} from '../../../machines/server/keyed-events.js';
import {
  driveKeyedCall,
  type KeyedFollowCommand,
  type KeyedLogRead,
  keyedBodyEndSteps,
  keyedCallSteps,
  keyedFollowSteps,
} from '../../../machines/server/keyed-execute.js';
import {
  KEYED_STREAM,
  keyedLogId,
  type MemoCreate,
  type MemoEntry,
  orphanedEntries,
} from '../../../machines/server/keyed-memo.js';
import {
  type Attempt,
  abortsLocalRun,
  cancelResult,
  isFinalAnswer,
  KEYED_START_WAIT_MS,
  type KeyedReply,
  nextEntry,
  planKeyedCancel,
  refusalResponse,
  refusedBeforeRun,
  replyMessage,
  restartWon,
  routeKeyedMessage,
} from '../../../machines/server/keyed-plan.js';
import type { ContinuityMetrics } from '../../metrics/continuity-metrics.js';
import { KeyExecutionTrace } from '../../telemetry/key-execution-trace.js';
import { type ContinuityTelemetry, globalTelemetry } from '../../telemetry/telemetry.js';
import type { EventLog } from '../event-log.js';
import type { MemoStore } from '../memo-store.js';
import type { KeyedRequests, ModernCall, RunOnSdk } from '../modern/keyed-hook.js';
import { eventFrame } from '../sse.js';
import { parseJson, sdkMessages } from './sdk-messages.js';
import { Wakeups } from './wakeups.js';

export type { KeyedRequests, ModernCall, RunOnSdk } from '../modern/keyed-hook.js';

export interface KeyedRequestsOptions {
  /**
   * Where each key's events are kept: a pseudo-session per key (`keyedLogId`) with one stream. Its
   * retention policy is what is advertised as `eventRetentionMs` and `maxEventsPerRequest`.
   */
  readonly log: EventLog;
  /** The memo: memory, SQLite or Redis (`MemoryMemoStore`, `SqliteMemoStore`, `RedisMemoStore`). */
  readonly memo: MemoStore;
  /** Advertised `maxKeyLength`. Defaults to 255. */
  readonly maxKeyLength?: number;
  /**
   * Live entries (running or inside their window) one principal may hold; beyond, 429. Defaults to
   * 10,000 (without `authenticate`, every caller is one principal).
   */
  readonly maxEntriesPerPrincipal?: number;
  /**
   * Bytes of events (JSON, progress kept without its token) one key's log keeps; the body's messages
   * past it are neither kept nor delivered, and its result is always recorded and answered
   * (machines/server/keyed-events.ts). Defaults to 1 MiB.
   */
  readonly maxEventBytesPerKey?: number;
  /**
   * Without `authenticate` (every caller one principal): live entries one remote address may create in
   * this process; beyond, 429 with `Retry-After`, so one address cannot fill `maxEntriesPerPrincipal` for
   * every other caller. Defaults to 1,000. Unused with `authenticate`.
   */
  readonly maxEntriesPerAddress?: number;
  /** How long this instance's lease lasts; renewed every third of it. Defaults to 10 s. */
  readonly leaseMs?: number;
  /** How often an attached response looks at the log and entry without a wake-up. Defaults to 250 ms. */
  readonly pollMs?: number;
  /**
   * An SSE comment on every keyed response this often, so a balancer that cuts idle connections keeps
   * a long silent call (each cut costs the client a re-issue from its budget). Default 15 s; 0: off.
   */
  readonly keepAliveMs?: number;
  /** How often entries past their window (and their events) are deleted. Defaults to a quarter window, at most 60 s. */
  readonly sweepMs?: number;
  /** Injectable clock. Defaults to `Date.now`. */
  readonly now?: () => number;
  /** Errors the runtime met and answered for (a store failing, say); never thrown to the client. */
  readonly onError?: (error: unknown) => void;
  /**
   * Spans and duration metrics on OpenTelemetry's MCP conventions: one SERVER span per execution of a key,
   * under the client's trace context from `params._meta` (README, "Traces"). Default: the OTel API's
   * globals (no-ops without an SDK).
   */
  readonly telemetry?: ContinuityTelemetry;
  /** Records executions, attaches and refused keys (README, "Metrics"): the server's `ContinuityMetrics`. */
  readonly metrics?: ContinuityMetrics;
}

/**
 * The continuity extension's server runtime (docs/continuity-extension.md): keyed `tools/call` requests
 * run at most once per (principal, key), their messages go to the key's own event log, and every response
 * (first attempt or re-issue) is served from that log. I/O only: every decision is in
 * `machines/server/keyed-plan.ts` and `keyed-memo.ts` (the keyed-request machine).
 */
export function createKeyedRequests(options: KeyedRequestsOptions): KeyedRequests & KeyedRuntimeStats {
  return new KeyedRuntime(options);
}

/** What the runtime holds in memory now, for tests and metrics: all of it goes with its requests. */
export interface KeyedRuntimeStats {
  stats(): { readonly runningHere: number; readonly waitingLogs: number };
  /** Without `authenticate`: the addresses holding keys for the per-address bound, and their keys. */
  addressStats(): { readonly addresses: number; readonly keys: number };
}

class KeyedRuntime implements KeyedRequests, KeyedRuntimeStats {
  readonly settings: ContinuitySettings;
  private readonly log: EventLog;
  private readonly memo: MemoStore;
  private readonly now: () => number;
  private readonly pollMs: number;
  private readonly keepAliveMs: number;
  private readonly leaseMs: number;
  private readonly maxEntries: number;
  private readonly maxEventBytes: number;
  private readonly wakeups = new Wakeups();
  private readonly addressKeys: AddressKeys;
  /** Bodies running here, by memo key: their abort controllers. */
  private readonly local = new Map<string, AbortController>();
  /**
   * Bodies that ended here but whose end could not be stored (the memo or the log failed): their entry
   * would stay `running` under this instance's live lease, attached streams and re-issues waiting on it
   * for ever. The lease tick runs their end again, with the answer they got, until it is stored.
   */
  private readonly unstored = new Map<
    string,
    { entry: MemoEntry; final: JsonRpcMessage | undefined; refused: boolean }
  >();
  private readonly timers: Array<ReturnType<typeof setInterval>> = [];
  private readonly stopWatching: (() => void) | undefined;
  private readonly ready: Promise<void>;
  private readonly onError: (error: unknown) => void;
  private readonly telemetry: ContinuityTelemetry;
  private readonly metrics: ContinuityMetrics | undefined;
  /** The spans of the bodies running here, by memo key: a re-issue that attaches is an event on one. */
  private readonly executions = new Map<string, KeyExecutionTrace>();
  private closed = false;

  constructor(options: KeyedRequestsOptions) {
    this.log = options.log;
    this.memo = options.memo;
    this.now = options.now ?? Date.now;
    this.pollMs = options.pollMs ?? 250;
    this.keepAliveMs = options.keepAliveMs ?? 15_000;
    this.leaseMs = options.leaseMs ?? 10_000;
    this.maxEntries = options.maxEntriesPerPrincipal ?? 10_000;
    this.maxEventBytes = maxEventBytesPerKey(options.maxEventBytesPerKey);
    this.onError = options.onError ?? (() => {});
    this.addressKeys = new AddressKeys(options.maxEntriesPerAddress ?? 1_000, this.memo.memoWindowMs);
    this.telemetry = options.telemetry ?? globalTelemetry();
    this.metrics = options.metrics;
    const finite = (n: number, otherwise: number) => (Number.isFinite(n) ? n : otherwise);
    this.settings = {
      memoWindowMs: this.memo.memoWindowMs,
      eventRetentionMs: finite(this.log.policy.retentionMs, DEFAULT_CONTINUITY_SETTINGS.eventRetentionMs),
      maxEventsPerRequest: finite(
        this.log.policy.maxEventsPerStream,
        DEFAULT_CONTINUITY_SETTINGS.maxEventsPerRequest,
      ),
      maxKeyLength: options.maxKeyLength ?? DEFAULT_CONTINUITY_SETTINGS.maxKeyLength,
    };
    // A store that forgets entries by itself (memory) takes their events with them.
    this.memo.onForget?.((logId) => void this.log.dropSession(logId).catch(this.onError));
    // Another instance's appends wake the responses attached here (a hint; they also poll).
    this.stopWatching = this.log.shared?.watch((change) => {
      if (change.kind === 'appended') this.wakeups.ring(change.sessionId);
    });
    const lease = setInterval(() => void this.tend().catch(this.onError), Math.max(1, this.leaseMs / 3));
    const sweepMs = options.sweepMs ?? Math.min(60_000, Math.max(1, this.memo.memoWindowMs / 4));
    const sweep = setInterval(() => void this.sweep().catch(this.onError), sweepMs);
    for (const t of [lease, sweep]) {
      t.unref?.();
      this.timers.push(t);
    }
    this.ready = this.start();
    this.ready.catch(this.onError);
  }

  serve(call: ModernCall, run: RunOnSdk): Promise<Response> | undefined {
    const principal = call.principal ?? '';
    const route = routeKeyedMessage(call.message as JsonRpcMessage, this.settings.maxKeyLength);
    switch (route.kind) {
      case 'unkeyed':
        return undefined;
      case 'reply':
        return Promise.resolve(json(route.reply, route.id));
      case 'cancel':
        return this.guard(async () => {
          await this.cancel(memoKey(principal, route.key));
          return new Response(null, { status: 202 });
        }, null);
      case 'cancel-request':
        return this.guard(async () => {
          const after = await this.cancel(memoKey(principal, route.key));
          return Response.json({ jsonrpc: '2.0', id: route.id, result: cancelResult(after) });
        }, route.id);
      case 'call': {
        // Without `authenticate` (no principal), each address is held to its own share of the keys.
        const caller: Caller = {
          principal,
          ...(call.principal === undefined ? { address: call.address ?? 'unknown' } : {}),
          limited: call.limited ?? (() => undefined),
        };
        return this.guard(() => this.call(call.message, caller, route.reading, run), route.id);
      }
    }
  }

  stats(): { readonly runningHere: number; readonly waitingLogs: number } {
    return { runningHere: this.local.size, waitingLogs: this.wakeups.size };
  }

  addressStats(): { readonly addresses: number; readonly keys: number } {
    return this.addressKeys.stats();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.stopWatching?.();
  }

  /** Nothing from the network may throw out of the handler: a failure here is a JSON-RPC 500. */
  private async guard(work: () => Promise<Response>, id: JsonRpcRequest['id'] | null): Promise<Response> {
    try {
      // A failed start (the store unreachable) is retried by the lease tick; requests still get their
      // own answer from the store, or a 500 if it is still down.
      await this.ready.catch(() => {});
      return await work();
    } catch (error) {
      this.onError(error);
      return json(
        { status: 500, error: { code: JsonRpcCode.INTERNAL_ERROR, message: 'Internal error' } },
        id,
      );
    }
  }

  private async call(
    message: JsonRpcRequest,
    caller: Caller,
    reading: Extract<KeyReading, { kind: 'keyed' }>,
    run: RunOnSdk,
  ): Promise<Response> {
    const { principal, address } = caller;
    const mk = memoKey(principal, reading.key);
    // Stored as a digest: the canonical params can be as large as a body (4 MiB), and the memo keeps one
    // per key for its whole window. Equal requests give equal digests, as they give equal canonical JSON.
    const fingerprint = createHash('sha256')
      .update(requestFingerprint(message.method, message.params))
      .digest('base64url');
    const attempt = attemptOf(message);
    // Set when this attempt starts the body: the SDK's refusal (a 4xx before the tool ran), or nothing.
    let started: Promise<Response | undefined> | undefined;
    const steps = keyedCallSteps({
      reading,
      fingerprint,
      memoWindowMs: this.memo.memoWindowMs,
      now: this.now(),
    });
    const end = await driveKeyedCall(steps, async (c) => {
      switch (c.kind) {
        case 'read-entry':
          return this.memo.get(mk);
        case 'read-window':
          return this.log.window(c.entry.logId, KEYED_STREAM);
        case 'owner-alive':
          return this.alive(c.owner);
        case 'memo-complete-for':
          return this.memo.completeForMs();
        case 'new-entry': {
          const epoch = randomBytes(8).toString('hex');
          const digest = createHash('sha256').update(mk).digest('hex').slice(0, 24);
          return {
            memoKey: mk,
            principal,
            fingerprint,
            state: 'running',
            owner: this.memo.instanceId,
            // One log per entry (the epoch in its name): a key used again after its window never
            // shares the forgotten entry's log, which the sweep may still be dropping.
            logId: keyedLogId(`${digest}-${epoch}`),
            epoch,
            createdAt: this.now(),
          } satisfies MemoEntry;
        }
        case 'open-log':
          await this.log.openStream(c.entry.logId, KEYED_STREAM);
          return undefined;
        case 'create-entry':
          return this.create(c.entry, caller);
        case 'drop-log':
          // Best effort: a log that could not be dropped is only storage; the request goes on.
          await this.log.dropSession(c.entry.logId).catch(this.onError);
          return undefined;
        case 'replace-entry':
          await this.memo.replace(c.next, c.entry.state);
          this.wakeups.ring(c.entry.logId);
          return undefined;
        case 'restart-entry': {
          const stored = await this.memo.replace(c.next, c.entry.state);
          this.wakeups.ring(c.entry.logId);
          return restartWon(stored, c.next);
        }
        case 'start-run': {
          let accepted: (refusal: Response | undefined) => void = () => undefined;
          started = new Promise((resolve) => {
            accepted = resolve;
          });
          this.metrics?.server.keyedExecuted();
          const traced = new KeyExecutionTrace(this.telemetry, message);
          this.executions.set(mk, traced);
          void this.runBody(c.entry, message, (signal) => traced.within(() => run(message, signal)), accepted)
            .catch((error) => {
              accepted(undefined);
              this.onError(error);
            })
            .finally(() => {
              if (address !== undefined) this.addressKeys.finished(address, c.entry.memoKey, this.now());
              traced.ended(undefined); // already ended with the body's answer, unless the run failed
              if (this.executions.get(mk) === traced) this.executions.delete(mk);
            });
          return undefined;
        }
      }
    });
    if (end.kind === 'reply') {
      this.metrics?.server.keyedRefused(end.reply.error.code, end.reply.status);
      return json(end.reply, attempt.id);
    }
    if (!started) {
      this.metrics?.server.keyedAttached();
      this.executions.get(mk)?.attached(message, reading.lastEventId);
    }
    // The attempt that started the body answers as the SDK did when the SDK refused it (its 4xx: the
    // client's own recovery, such as re-listing tools after -32020, depends on it). The SDK answers at once
    // (its stream starts before the tool runs), so this wait is short.
    const refusal = started ? await firstOf(started, KEYED_START_WAIT_MS) : undefined;
    return refusal ?? this.respond(end.entry, attempt, end.afterSeq);
  }

  /**
   * Creates the entry in the memo within the bounds: the caller address's share first (no `authenticate`),
   * then the memo's per-principal bound. A refusal at either is counted.
   */
  private async create(entry: MemoEntry, caller: Caller): Promise<MemoCreate> {
    const { address } = caller;
    if (address !== undefined) {
      const room = this.addressKeys.reserve(address, entry.memoKey, this.now());
      if (room.kind === 'full') {
        caller.limited('max_keys_per_address', 429);
        return { kind: 'full', retryAfterSeconds: room.retryAfterSeconds, bound: 'address' };
      }
    }
    let created: MemoCreate | undefined;
    try {
      created = await this.memo.create(entry, this.maxEntries);
      if (created.kind === 'full') caller.limited('max_keys_per_principal', 429);
      return created;
    } finally {
      if (address !== undefined) {
        if (created?.kind === 'created') this.addressKeys.created(address, entry.memoKey);
        else this.addressKeys.release(address, entry.memoKey);
      }
    }
  }

  /** Runs the body once, detached from every client stream; its messages go to the key's log. */
  private async runBody(
    entry: MemoEntry,
    message: JsonRpcRequest,
    start: (signal: AbortSignal) => Promise<Response>,
    /** Told once the SDK answered: with a copy of its refusal, or nothing (it runs, or it failed). */
    accepted: (refusal: Response | undefined) => void,
  ): Promise<void> {
    const abort = new AbortController();
    this.local.set(entry.memoKey, abort);
    let final: JsonRpcMessage | undefined;
    let refusal: Response | undefined;
    try {
      const response = await start(abort.signal);
      if (refusedBeforeRun(response.status)) {
        // Nothing ran: recorded as `refused` (machines/server/keyed-plan.ts), so a re-issue of the key runs.
        const text = await response.text();
        final = refusalResponse(response.status, parseJson(text), message.id);
        refusal = new Response(text, { status: response.status, headers: response.headers });
      } else {
        accepted(undefined);
        // What the key's log keeps: each message in its stored form, within the key's byte budget.
        let budget = EMPTY_EVENT_BUDGET;
        for await (const m of sdkMessages(response, abort.signal)) {
          if (isFinalAnswer(m, message.id)) {
            final = m;
            break;
          }
          const stored = storedEvent(m);
          const admission = admitKeyedEvent(
            budget,
            Buffer.byteLength(JSON.stringify(stored)),
            this.maxEventBytes,
          );
          budget = admission.budget;
          if (admission.kind === 'drop') continue;
          await this.log.append(entry.logId, KEYED_STREAM, stored);
          this.wakeups.ring(entry.logId);
        }
      }
    } catch (error) {
      if (!abort.signal.aborted) this.onError(error);
    } finally {
      this.local.delete(entry.memoKey);
    }
    this.executions.get(entry.memoKey)?.ended(final);
    const stored = await this.storeEnd(entry, final, refusal !== undefined);
    // The refusal is answered only once it is stored: the client's corrected re-issue must find the key
    // `refused` (it then runs), not still `running` (it would attach and get the refusal again). Unstored,
    // the attempt is served from the log instead (the lease tick stores the refusal, which ends it). Every
    // other way out has told `accepted` already, or tells it nothing new (it resolves once).
    accepted(stored ? refusal : undefined);
  }

  /** The end of a body run, stored; on a store failure it is kept for the lease tick to store again. */
  private async storeEnd(
    entry: MemoEntry,
    final: JsonRpcMessage | undefined,
    refused = false,
  ): Promise<boolean> {
    try {
      await this.driveBodyEnd(entry, final, refused);
      this.unstored.delete(entry.memoKey);
      return true;
    } catch (error) {
      this.onError(error);
      this.unstored.set(entry.memoKey, { entry, final, refused });
      return false;
    }
  }

  private async driveBodyEnd(
    entry: MemoEntry,
    final: JsonRpcMessage | undefined,
    refused = false,
  ): Promise<void> {
    // The end (`keyedBodyEndSteps`): the outcome recorded durably first, under the id the final response
    // gets in the log, then appended: no stream ever writes an outcome the memo does not hold.
    await driveKeyedCall(keyedBodyEndSteps(entry, final, refused), async (c) => {
      switch (c.kind) {
        case 'read-entry':
          return this.memo.get(entry.memoKey);
        case 'read-window':
          return this.log.window(entry.logId, KEYED_STREAM);
        case 'watched':
          return this.wakeups.waiting(entry.logId);
        case 'record':
          return this.record(c.entry, c.event, c.watched);
        case 'append-final':
          await this.log.appendFinal(entry.logId, KEYED_STREAM, c.message);
          return undefined;
        case 'ring':
          this.wakeups.ring(entry.logId);
          return undefined;
      }
    });
  }

  /** Moves the stored entry by the machine (compare-and-set from running) and wakes its watchers. */
  private async record(
    entry: MemoEntry,
    event: Parameters<typeof nextEntry>[1],
    watched = false,
  ): Promise<MemoEntry | undefined> {
    const next = nextEntry(entry, event, this.now(), watched);
    if (!next) return entry;
    const stored = await this.memo.replace(next, entry.state);
    this.wakeups.ring(entry.logId);
    return stored;
  }

  /** Cancels the principal's key if it runs (§5, §13); the entry afterwards (undefined: none). */
  private async cancel(mk: string): Promise<MemoEntry | undefined> {
    const entry = await this.memo.get(mk);
    if (planKeyedCancel(entry).kind !== 'cancel') return entry;
    const stored = await this.record(entry as MemoEntry, { type: 'cancel.requested' });
    // Running here: abort now; running elsewhere: its instance sees the entry at its next lease tick.
    if (abortsLocalRun(stored, this.memo.instanceId)) this.local.get(mk)?.abort();
    return stored;
  }

  /** The response of one attempt, from the key's log: never starts anything. */
  private respond(entry: MemoEntry, attempt: Attempt, afterSeq: number): Response {
    const encoder = new TextEncoder();
    const stop = new AbortController();
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        const write = (frame: string) => {
          if (!stop.signal.aborted) controller.enqueue(encoder.encode(frame));
        };
        const keepAlive =
          this.keepAliveMs > 0 ? setInterval(() => write(': keepalive\n\n'), this.keepAliveMs) : undefined;
        keepAlive?.unref?.();
        stop.signal.addEventListener('abort', () => clearInterval(keepAlive), { once: true });
        void this.follow(entry, attempt, afterSeq, write, stop.signal)
          .catch((error: unknown) => {
            this.onError(error);
          })
          .finally(() => {
            if (stop.signal.aborted) return;
            stop.abort();
            try {
              controller.close();
            } catch {
              // Already closed by the client.
            }
          });
      },
      // The client's stream closed: a transport fact. The body goes on; only this response stops.
      cancel: () => stop.abort(),
    });
    return new Response(body, {
      status: 200,
      headers: {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache, no-transform',
        'x-accel-buffering': 'no',
      },
    });
  }

  /** Writes the log after `afterSeq`, live events, then the end `attachStep` decides. */
  private async follow(
    entry: MemoEntry,
    attempt: Attempt,
    afterSeq: number,
    write: (frame: string) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const steps = keyedFollowSteps({ entry, attempt, afterSeq });
    let r = steps.next();
    while (!r.done) {
      const c = r.value;
      // This response stops between looks once its client is gone or the runtime closes.
      if (c.kind === 'read-log' && (signal.aborted || this.closed)) return;
      r = steps.next(await this.followCommand(entry, c, write, signal));
    }
    const frame = r.value.frame;
    if (frame)
      write(
        frame.id === undefined
          ? `data: ${JSON.stringify(frame.message)}\n\n`
          : eventFrame(frame.id, frame.message),
      );
  }

  /** One command of an attached response's steps, on the log, the memo and the wake-ups. */
  private async followCommand(
    entry: MemoEntry,
    c: KeyedFollowCommand,
    write: (frame: string) => void,
    signal: AbortSignal,
  ): Promise<MemoEntry | KeyedLogRead | boolean | undefined> {
    switch (c.kind) {
      case 'read-log':
        return this.log.read(entry.logId, KEYED_STREAM, c.afterSeq);
      case 'read-entry':
        return this.memo.get(entry.memoKey);
      case 'owner-alive':
        return this.alive(c.owner);
      case 'write':
        for (const f of c.frames) write(eventFrame(f.id, f.message));
        return undefined;
      case 'declare-died':
        await this.record(c.entry, { type: 'instance.died' });
        return undefined;
      case 'wait':
        await this.wakeups.wait(entry.logId, this.pollMs, signal);
        return undefined;
    }
  }

  private async alive(owner: string): Promise<boolean> {
    return isOwnerAlive(owner, this.memo.instanceId, await this.memo.alive([owner]));
  }

  /** On start: take the lease, and declare outcome unknown what a dead owner (a previous process) ran. */
  private async start(): Promise<void> {
    await this.memo.renewLease(this.leaseMs);
    await this.declareOrphans();
  }

  private async declareOrphans(): Promise<void> {
    const running = await this.memo.running();
    const owners = [...new Set(running.map((e) => e.owner))];
    const leased = await this.memo.alive(owners);
    for (const e of orphanedEntries(running, (o) => isOwnerAlive(o, this.memo.instanceId, leased))) {
      await this.record(e, { type: 'instance.died' });
    }
  }

  /** The lease tick: renew, and abort bodies whose entry was cancelled (or declared dead) elsewhere. */
  private async tend(): Promise<void> {
    if (this.closed) return;
    await this.memo.renewLease(this.leaseMs);
    for (const { entry, final, refused } of [...this.unstored.values()])
      await this.storeEnd(entry, final, refused);
    for (const [mk, abort] of this.local) {
      const e = await this.memo.get(mk);
      if (abortsLocalRun(e, this.memo.instanceId)) abort.abort();
    }
    await this.declareOrphans();
  }

  private async sweep(): Promise<void> {
    if (this.closed) return;
    this.addressKeys.sweep(this.now());
    for (const logId of await this.memo.sweep()) await this.log.dropSession(logId);
  }
}

/** Who made a keyed call: its principal, its address when there is no `authenticate`, and the limit counter. */
interface Caller {
  readonly principal: string;
  readonly address?: string;
  readonly limited: (reason: string, status: number) => void;
}

/** The id and progress token the attempt's own messages carry. */
function attemptOf(message: JsonRpcRequest): Attempt {
  const meta = message.params?._meta as Record<string, unknown> | undefined;
  const token = meta?.progressToken;
  return typeof token === 'string' || typeof token === 'number'
    ? { id: message.id, progressToken: token }
    : { id: message.id };
}

/** A JSON-RPC error answer with its HTTP status (and Retry-After). */
function json(reply: KeyedReply, id: JsonRpcRequest['id'] | null): Response {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (reply.retryAfterSeconds !== undefined) headers['retry-after'] = String(reply.retryAfterSeconds);
  return new Response(JSON.stringify(replyMessage(reply, { id: id as JsonRpcRequest['id'] })), {
    status: reply.status,
    headers,
  });
}

/** `promise`'s value, or `undefined` once `ms` passed first (the timer never outlives the wait). */
async function firstOf<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
