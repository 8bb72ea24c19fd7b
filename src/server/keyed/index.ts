import { createHash, randomBytes } from 'node:crypto';
import {
  type ContinuitySettings,
  DEFAULT_CONTINUITY_SETTINGS,
} from '../../../machines/continuity-extension.js';
import type { JsonRpcRequest } from '../../../machines/jsonrpc.js';
import { KeyedCore } from '../../../machines/server/keyed-core.js';
import type {
  KeyedCommand,
  KeyedFact,
  KeyedNote,
  KeyedSseFrame,
  KeyedStoreCall,
} from '../../../machines/server/keyed-core-io.js';
import { keyedLimits, planKeyedWake } from '../../../machines/server/keyed-timing.js';
import { type InspectOption, KeyedInspection } from '../../inspect/keyed-mirror.js';
import type { ContinuityMetrics } from '../../metrics/continuity-metrics.js';
import { KeyExecutionTrace } from '../../telemetry/key-execution-trace.js';
import { type ContinuityTelemetry, globalTelemetry } from '../../telemetry/telemetry.js';
import type { EventLog } from '../event-log.js';
import type { MemoStore } from '../memo-store.js';
import type { KeyedRequests, ModernCall, RunOnSdk } from '../modern/keyed-hook.js';
import { eventFrame } from '../sse.js';
import { type Wake, WakePort } from '../wake-port.js';
import { forEachSdkMessage, parseJson } from './sdk-messages.js';
import { executeStoreCall } from './store-calls.js';

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
  /** How long the attempt that starts a body waits for the SDK's first answer. Defaults to 1 s. */
  readonly startWaitMs?: number;
  /** Injectable clock. Defaults to `Date.now`. */
  readonly now?: () => number;
  /** Errors the runtime met and answered for (a store failing, say); never thrown to the client. */
  readonly onError?: (error: unknown) => void;
  /**
   * Spans and duration metrics on OpenTelemetry's MCP conventions: one SERVER span per execution of a key,
   * under the client's trace context from `params._meta` (docs/operations.md, "Traces"). Default: the OTel API's
   * globals (no-ops without an SDK).
   */
  readonly telemetry?: ContinuityTelemetry;
  /** Records executions, attaches and refused keys (docs/operations.md, "Metrics"): the server's `ContinuityMetrics`. */
  readonly metrics?: ContinuityMetrics;
  /** An XState inspector for each key's `keyedRequestMachine` (mirrored: src/inspect/keyed-mirror.ts). */
  readonly inspect?: InspectOption;
}

/**
 * The continuity extension's server runtime (docs/continuity-extension.md): keyed `tools/call` requests
 * run at most once per (principal, key), their messages go to the key's own event log, and every response
 * (first attempt or re-issue) is served from that log. Ports only: every decision and every deadline is the
 * keyed core's (machines/server/keyed-core.ts); this executes its commands on the memo and log stores, the
 * SDK, HTTP responses and one wake-up asked of the host's timer port (src/server/wake-port.ts) for the core's
 * next deadline.
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

/** A request waiting for its answer. */
interface Pending {
  readonly call: ModernCall;
  readonly run: RunOnSdk;
  readonly resolve: (response: Response | undefined) => void;
  passed: boolean;
}

/** A body run on the SDK: its abort, the reading of its answer, its span. */
interface BodyRun {
  readonly abort: AbortController;
  readonly reading: AbortController;
  readonly trace: KeyExecutionTrace;
  response: Response | undefined;
}

const encoder = new TextEncoder();

class KeyedRuntime implements KeyedRequests, KeyedRuntimeStats {
  readonly settings: ContinuitySettings;
  private readonly log: EventLog;
  private readonly memo: MemoStore;
  private readonly now: () => number;
  private readonly core: KeyedCore;
  private readonly onError: (error: unknown) => void;
  private readonly telemetry: ContinuityTelemetry;
  private readonly metrics: ContinuityMetrics | undefined;
  private readonly inspection: KeyedInspection | undefined;
  private readonly pending = new Map<number, Pending>();
  private readonly streams = new Map<number, ReadableStreamDefaultController<Uint8Array>>();
  private readonly runs = new Map<number, BodyRun>();
  private readonly stopWatching: (() => void) | undefined;
  /**
   * The host's timer port: the server's own once it mounts this runtime (`useWakes`), so the host holds one
   * timer for both eras; until then a port of its own.
   */
  private wakes: WakePort;
  /** The wake-up asked of it for the core's next deadline, and that deadline. */
  private wake: Wake | undefined;
  private wakeAt: number | undefined;
  private nextRequest = 1;

  constructor(options: KeyedRequestsOptions) {
    this.log = options.log;
    this.memo = options.memo;
    this.now = options.now ?? Date.now;
    this.onError = options.onError ?? (() => {});
    this.wakes = new WakePort(this.onError);
    this.telemetry = options.telemetry ?? globalTelemetry();
    this.metrics = options.metrics;
    this.metrics?.server.observeMemo(this.memo);
    this.inspection = options.inspect && new KeyedInspection(options.inspect);
    const finite = (n: number, otherwise: number) => (Number.isFinite(n) ? n : otherwise);
    const limits = keyedLimits(options, this.memo.memoWindowMs, DEFAULT_CONTINUITY_SETTINGS.maxKeyLength);
    this.settings = {
      memoWindowMs: this.memo.memoWindowMs,
      eventRetentionMs: finite(this.log.policy.retentionMs, DEFAULT_CONTINUITY_SETTINGS.eventRetentionMs),
      maxEventsPerRequest: finite(
        this.log.policy.maxEventsPerStream,
        DEFAULT_CONTINUITY_SETTINGS.maxEventsPerRequest,
      ),
      maxKeyLength: limits.maxKeyLength,
    };
    this.core = new KeyedCore(
      {
        instanceId: this.memo.instanceId,
        memoWindowMs: this.memo.memoWindowMs,
        limits,
        ids: {
          fingerprint: (canonical) => createHash('sha256').update(canonical).digest('base64url'),
          logDigest: (memoKey) => createHash('sha256').update(memoKey).digest('hex').slice(0, 24),
          epoch: () => randomBytes(8).toString('hex'),
        },
      },
      this.now(),
    );
    this.memo.onForget?.((logId) => this.tell({ kind: 'forgotten', logId }));
    // Another instance's appends wake the responses attached here (a hint; they also poll).
    this.stopWatching = this.log.shared?.watch((change) => {
      if (change.kind === 'appended') this.tell({ kind: 'log-changed', logId: change.sessionId });
    });
    this.drain();
  }

  serve(call: ModernCall, run: RunOnSdk): Promise<Response> | undefined {
    const request = this.nextRequest++;
    let resolve: (response: Response | undefined) => void = () => undefined;
    const answered = new Promise<Response | undefined>((r) => {
      resolve = r;
    });
    const pending: Pending = { call, run, resolve, passed: false };
    this.pending.set(request, pending);
    this.tell({
      kind: 'request',
      request,
      message: call.message,
      principal: call.principal,
      ...(call.address === undefined ? {} : { address: call.address }),
    });
    // The core routes at once: an unkeyed request is the endpoint's.
    return pending.passed ? undefined : (answered as Promise<Response>);
  }

  useWakes(wakes: WakePort): void {
    if (wakes === this.wakes) return;
    this.wakes = wakes;
    this.wake?.cancel();
    this.wake = undefined;
    this.wakeAt = undefined;
    this.sleep();
  }

  stats(): { readonly runningHere: number; readonly waitingLogs: number } {
    return this.core.stats();
  }

  addressStats(): { readonly addresses: number; readonly keys: number } {
    return this.core.addressStats();
  }

  async close(): Promise<void> {
    this.tell({ kind: 'close' });
    this.stopWatching?.();
  }

  private tell(fact: KeyedFact): void {
    this.core.handle(fact, this.now());
    this.drain();
  }

  private drain(): void {
    for (let c = this.core.poll(); c; c = this.core.poll()) {
      try {
        this.execute(c);
      } catch (error) {
        this.onError(error);
      }
    }
    this.sleep();
  }

  /**
   * One wake-up at the core's next deadline, kept or moved as `planKeyedWake` says (the core decides both:
   * machines/server/keyed-timing.ts).
   */
  private sleep(): void {
    const plan = planKeyedWake(this.wakeAt, this.core.nextWakeAt(), this.now());
    if (plan.kind === 'keep') return;
    this.wake?.cancel();
    this.wake = undefined;
    this.wakeAt = undefined;
    if (plan.kind === 'clear') return;
    this.wakeAt = plan.at;
    this.wake = this.wakes.after(plan.delayMs, () => {
      this.wake = undefined;
      this.wakeAt = undefined;
      this.tell({ kind: 'tick' });
    });
  }

  private execute(c: KeyedCommand): void {
    switch (c.kind) {
      case 'store':
        this.store(c.call).then(
          (value) => this.tell({ kind: 'store-answer', op: c.op, value }),
          (error: unknown) => this.tell({ kind: 'store-failed', op: c.op, error }),
        );
        return;
      case 'pass': {
        const p = this.pending.get(c.request);
        this.pending.delete(c.request);
        if (p) p.passed = true;
        p?.resolve(undefined);
        return;
      }
      case 'answer':
        this.respond(
          c.request,
          new Response(c.body, { status: c.status, headers: [...c.headers] as Array<[string, string]> }),
        );
        return;
      case 'open-stream':
        this.respond(c.request, this.openStream(c.request));
        return;
      case 'write':
        this.enqueue(c.request, frameText(c.frame));
        return;
      case 'end-stream': {
        const controller = this.streams.get(c.request);
        this.streams.delete(c.request);
        try {
          controller?.close();
        } catch {
          // Already closed by the client.
        }
        return;
      }
      case 'run-body':
        this.runBody(c.run, c.request, c.message as JsonRpcRequest);
        return;
      case 'read-refusal':
        this.readRefusal(c.run);
        return;
      case 'read-messages':
        this.readMessages(c.run);
        return;
      case 'stop-reading':
        this.runs.get(c.run)?.reading.abort();
        return;
      case 'abort-body':
        this.runs.get(c.run)?.abort.abort();
        return;
      case 'body-over':
        this.runs.get(c.run)?.trace.ended(c.final);
        return;
      case 'run-done':
        // Already ended with the body's answer, unless the run failed.
        this.runs.get(c.run)?.trace.ended(undefined);
        this.runs.delete(c.run);
        return;
      case 'note':
        this.note(c.note);
        return;
      case 'error':
        this.onError(c.error);
        return;
    }
  }

  private respond(request: number, response: Response): void {
    const p = this.pending.get(request);
    this.pending.delete(request);
    p?.resolve(response);
  }

  /** One store call on the ports (`async`: a synchronous throw is a failed call too). */
  private async store(call: KeyedStoreCall): Promise<unknown> {
    return executeStoreCall({ memo: this.memo, log: this.log }, call);
  }

  /** A 200 event stream the core writes to; the client closing it is a fact for the core. */
  private openStream(request: number): Response {
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.streams.set(request, controller);
      },
      cancel: () => {
        this.streams.delete(request);
        this.tell({ kind: 'stream-closed', request });
      },
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

  private enqueue(request: number, text: string): void {
    try {
      this.streams.get(request)?.enqueue(encoder.encode(text));
    } catch {
      // Closed by the client meanwhile: its `cancel` tells the core.
    }
  }

  /** Runs the body once on the SDK, detached from every client stream. */
  private runBody(id: number, request: number, message: JsonRpcRequest): void {
    const run = this.pending.get(request)?.run;
    const trace = new KeyExecutionTrace(this.telemetry, message);
    const body: BodyRun = {
      abort: new AbortController(),
      reading: new AbortController(),
      trace,
      response: undefined,
    };
    this.runs.set(id, body);
    Promise.resolve()
      .then(() => trace.within(() => (run as RunOnSdk)(message, body.abort.signal)))
      .then(
        (response) => {
          body.response = response;
          this.tell({ kind: 'body-response', run: id, status: response.status });
        },
        (error: unknown) => this.tell({ kind: 'body-failed', run: id, error }),
      );
  }

  private readRefusal(id: number): void {
    const response = this.runs.get(id)?.response as Response;
    response.text().then(
      (text) =>
        this.tell({
          kind: 'body-refusal',
          run: id,
          status: response.status,
          body: parseJson(text),
          text,
          headers: [...response.headers],
        }),
      (error: unknown) => this.tell({ kind: 'body-failed', run: id, error }),
    );
  }

  private readMessages(id: number): void {
    const body = this.runs.get(id) as BodyRun;
    const signal = AbortSignal.any([body.abort.signal, body.reading.signal]);
    (async () => {
      await forEachSdkMessage(body.response as Response, signal, (m) =>
        this.tell({ kind: 'body-message', run: id, message: m }),
      );
      this.tell({ kind: 'body-ended', run: id });
    })().catch((error: unknown) => this.tell({ kind: 'body-failed', run: id, error }));
  }

  /** Metrics, spans and the endpoint's limit counter. */
  private note(note: KeyedNote): void {
    switch (note.kind) {
      case 'executed':
        this.metrics?.server.keyedExecuted();
        if ('id' in note.message && note.message.id !== null)
          this.inspection?.started(note.entry, note.message.id);
        return;
      case 'recorded':
        this.inspection?.recorded(note.before, note.event, note.watched, note.after);
        return;
      case 'refused':
        this.metrics?.server.keyedRefused(note.code, note.status);
        return;
      case 'attached':
        this.metrics?.server.keyedAttached();
        if ('id' in note.message && note.message.id !== null)
          this.inspection?.attached(note.entry, note.message.id, note.afterSeq);
        if (note.run !== undefined)
          this.runs.get(note.run)?.trace.attached(note.message as JsonRpcRequest, note.lastEventId);
        return;
      case 'limited':
        this.pending.get(note.request)?.call.limited?.(note.reason, note.status);
        return;
      case 'state':
        this.metrics?.server.keyedEntryMoved(note.to);
        return;
      default:
        return;
    }
  }
}

/** A frame's SSE text. */
function frameText(frame: KeyedSseFrame): string {
  switch (frame.kind) {
    case 'event':
      return eventFrame(frame.id, frame.message);
    case 'data':
      return `data: ${JSON.stringify(frame.message)}\n\n`;
    case 'keep-alive':
      return ': keepalive\n\n';
  }
}
