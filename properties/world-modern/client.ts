import { type Actor, createActor, fromCallback, type InspectionEvent } from 'xstate';
import {
  ATTEMPT_START,
  type AttemptFact,
  attemptStep,
  CALL_CORE_RULES,
  type CallCoreRules,
  callEnding,
  callInput,
  callIsKeyed,
} from '../../machines/client/call-core.js';
import type { Exchange, IoEvent } from '../../machines/client/io.js';
import { CANCEL_DEADLINE_MS } from '../../machines/client/limits.js';
import {
  type AttemptInput,
  type ModernCallContext as CallMachineContext,
  type ModernCallEvent,
  type ModernCallInput,
  modernCallMachine,
} from '../../machines/client/modern-call.machine.js';
import {
  caseOf,
  DEFAULT_MODERN_CALL_POLICY,
  type ModernCallContext,
  type ModernCallDecision,
  type ModernCallPolicy,
  ModernCallReason,
  type ModernCallStreamEnd,
  ModernErrorCode,
} from '../../machines/client/modern-call-decide.js';
import { JsonRpcCode } from '../../machines/codes.js';
import {
  isResponse,
  type JsonRpcMessage,
  type JsonRpcRequest,
  type RequestId,
} from '../../machines/jsonrpc.js';
import type { VirtualClock } from '../world/clock.js';
import type { SimConnection, SimNetwork } from '../world/network.js';
import { ModernReceiver, type ModernSlowLink } from './link.js';
import type { CancelRecord, ModernRecorder } from './recorder.js';
import { type ModernTool, TOOLS_MODERN } from './tools.js';

/**
 * The simulated 2026-07-28 client: each application call is the real `modernCallMachine` (the client's
 * call lifecycle, every stream end decided by `decideModernCallEnd`) on the virtual clock, its `exchange`
 * actor one POST on the simulated network. Everything around the machine is the runtime's client core
 * (machines/client/call-core.ts), as `continuityFetch` runs it: whether the call is keyed and the machine's
 * input (`callInput`), the machine's events from what the network did (`attemptStep`: the exchange only
 * names the I/O facts), and how the ending reaches the application's library (`callEnding`).
 */
export interface ModernClientVariant {
  readonly name: string;
  /** What the call machine is started with (a mutant misreads the tool's hints or the memo window). */
  readonly input?: (input: ModernCallInput) => ModernCallInput;
  /** What the exchange reports instead of what happened (a mutant misclassifies an end, or drops ids). */
  readonly report?: (event: ModernCallEvent) => ModernCallEvent;
  /** What the application is told instead of what the machine delivered (a mutant words outcomes wrongly). */
  readonly distort?: (message: JsonRpcMessage) => JsonRpcMessage;
  /** The client core's decisions (a mutant swaps one: keying, naming a failure, the library ending). */
  readonly rules?: Partial<CallCoreRules>;
  /** How the finished call reaches the library (the runtime's `callEnding`; a mutant drops the abort override). */
  readonly ending?: typeof callEnding;
}

export const CORRECT_CLIENT_MODERN: ModernClientVariant = { name: 'mcp-continuity' };

export interface ModernClientDeps {
  readonly clock: VirtualClock;
  readonly net: SimNetwork;
  /** Takes a connection the client opened (the world routes it to the server, or swallows it). */
  readonly serve: (conn: SimConnection) => void;
  readonly recorder: ModernRecorder;
  readonly nextId: () => number;
  /** What the client learnt from `server/discover`: the extension's memo window, if advertised. */
  readonly extension?: { readonly memoWindowMs: number };
  readonly policy: ModernCallPolicy;
  /** The client's stall timeout (0: off, as without heartbeats). */
  readonly stallTimeoutMs: number;
  /** Told each decision (coverage). */
  readonly onDecision?: (end: ModernCallStreamEnd, ctx: ModernCallContext, d: ModernCallDecision) => void;
  /**
   * The application's SDK got a -32020 for this call: as the official v2 `Client.callTool` does, it
   * refreshes its tools/list view and sends the call again as a NEW request (new id, through our client
   * a new idempotency key), once. Answers whether it did (then this answer is not the call's outcome).
   */
  readonly onHeaderMismatch?: (callKey: string) => boolean;
  /** The last hop is a slow link: a call's answer arrives in chunks (link.ts). */
  readonly link?: ModernSlowLink;
  /** Each open attempt's receiver by connection id, while it listens (the world starts trickles on them). */
  readonly receivers?: Map<number, { readonly callKey: string; readonly receiver: ModernReceiver }>;
  /** The principal the application's requests are authenticated as ('' : the one principal). */
  readonly principal?: string;
  /** The application's remote address (what a server without `authenticate` bounds). */
  readonly address?: string;
}

/**
 * A POST of this world: the exchange plus the `Mcp-Param-*` header the application built from its view
 * of the tool's declarations (`paramHeader`: it sent one). Every re-issue of one request carries the same.
 */
export interface ModernSimExchange extends Exchange {
  readonly paramHeader: boolean;
  /** Who the server authenticates the request as (its credentials). */
  readonly principal: string;
  readonly address: string;
}

export const SIM_MODERN_CALL_POLICY: ModernCallPolicy = {
  ...DEFAULT_MODERN_CALL_POLICY,
  maxReissues: 4,
  backoff: { initialDelayMs: 200, maxDelayMs: 4_000, factor: 2, maxRetries: 10, jitter: 'full' },
  memoMarginMs: 2_000,
};

/** One application call: the real call machine with simulated I/O. */
export class SimCall {
  readonly actor: Actor<typeof modernCallMachine>;

  constructor(
    private readonly deps: ModernClientDeps,
    variant: ModernClientVariant,
    readonly callKey: string,
    tool: ModernTool,
    /** The idempotency key; the application's own when it reuses one (a bug it may have). */
    key: string,
    seed: number,
    /** The application's view said the tool declares an `Mcp-Param-*` header: it sends one. */
    paramHeader = false,
  ) {
    const { clock, net, recorder } = deps;
    const rules: CallCoreRules = { ...CALL_CORE_RULES, ...variant.rules };
    const rec = recorder.calls.get(callKey);
    const request: JsonRpcRequest = {
      jsonrpc: '2.0',
      id: deps.nextId(),
      method: 'tools/call',
      params: { name: tool, arguments: { callKey }, _meta: { progressToken: `p-${callKey}` } },
    };
    const route = {
      request,
      tool: TOOLS_MODERN[tool].annotations,
      extension: deps.extension,
      useExtension: true,
      policy: deps.policy,
      newKey: () => key,
      stallTimeoutMs: deps.stallTimeoutMs,
      startedAt: clock.now(),
      jitterSeed: seed,
    };
    // The call's first key (its SDK's retry after a -32020 is a new request with a new key).
    if (rec && callIsKeyed(route, rules) && rec.key === undefined) rec.key = key;
    if (callIsKeyed(route, rules))
      recorder.keysSent.set(callKey, (recorder.keysSent.get(callKey) ?? new Set<string>()).add(key));
    const report = variant.report ?? ((e: ModernCallEvent) => e);
    // This request got a 400 -32020: sending it again carries the same headers, which the server refused.
    let refusedHeaders = false;
    const exchange = fromCallback<ModernCallEvent, AttemptInput>(({ input, sendBack }) => {
      if (rec) rec.attempts++;
      if (refusedHeaders)
        recorder.staleResends.push(`${callKey} (${tool}) sent again with the headers the server refused`);
      let faulted = false;
      let evicted = false;
      // This attempt's connection (set once the network opened it).
      let conn: SimConnection | undefined;
      let state = ATTEMPT_START;
      const send = (e: ModernCallEvent) => sendBack(report(e));
      // The attempt ended in a way that proves it did not run (refused; a status that says not processed).
      let provenNotRun = false;
      const ended = (end: ModernCallStreamEnd) => {
        if (end.kind === 'refused') faulted = true;
        provenNotRun =
          end.kind === 'refused' ||
          (end.kind === 'http-status' && end.status >= 400 && end.status < 500 && end.status !== 410) ||
          // A 503 proves it only with Retry-After (a server shedding load); without, a proxy may have
          // forwarded it first (the world's `upstreamReset`), and the client cannot tell the two apart.
          (end.kind === 'http-status' && end.status === 503 && end.retryAfterMs !== undefined);
        if (end.kind === 'http-status' && end.status === 410) {
          evicted = true;
          // The 410 the check holds the next cursor to is one the client heard, not one the network lost.
          if (conn) recorder.evictionHeard(conn);
        }
        if (end.kind === 'http-status' && caseOf(end) === '400-header-mismatch') refusedHeaders = true;
      };
      /** One I/O fact to the client core; its events to the machine. */
      const tell = (fact: AttemptFact): void => {
        const step = attemptStep(state, fact, clock.now(), rules);
        state = step.state;
        if (fact.kind === 'answer')
          this.raw = step.keepRaw ? { status: fact.status, body: fact.body } : this.raw;
        if (fact.kind === 'failed' && !state.responded) this.fetchFailed = true;
        for (const e of step.events) {
          if (e.type === 'attempt.ended') ended(e.end);
          send(e);
        }
      };
      const onEvent = (ev: IoEvent): void => {
        if (ev.type === 'sse.events') for (const one of ev.events) onEvent(one);
        else tell(factOf(ev, clock.now()));
      };
      const post: ModernSimExchange = {
        method: 'POST',
        body: input.request,
        paramHeader,
        principal: deps.principal ?? '',
        address: deps.address ?? 'app',
      };
      // The network's messages reach the exchange through the last hop's bytes (link.ts).
      const receiver = new ModernReceiver(
        clock,
        deps.link,
        onEvent,
        (bytes) => tell({ kind: 'bytes', bytes, completed: false }),
        () => {
          if (conn) conn.lastTraffic = clock.now();
        },
      );
      conn = net.connect(
        post,
        (ev) => receiver.receive(ev),
        (c) => deps.serve(c),
      );
      const opened = conn;
      deps.receivers?.set(opened.id, { callKey, receiver });
      return () => {
        receiver.stop();
        deps.receivers?.delete(opened.id);
        if (rec) {
          // A 410 right after a broken attempt is that fault's consequence (its events were evicted
          // meanwhile) and costs one more attempt; a second in a row is not the world's doing.
          // So is a 410 after a 410 the client answered with its gap (events evicted again while its
          // re-issue was on its way); a 410 after one it ignored is the client's doing. (The gap of this
          // attempt is reported before its exchange stops.)
          const gaps = recorder.gaps.filter((g) => g.callKey === callKey).length;
          const broken = evicted
            ? rec.afterFault === true || rec.lastWas410 === true
            : faulted || recorder.faultedConns.has(opened.id);
          rec.afterFault = broken && !evicted;
          rec.lastWas410 = evicted && broken && gaps > (rec.gapsSeen ?? 0);
          rec.gapsSeen = gaps;
          if (broken) rec.faultedEnds++;
          if (!provenNotRun) rec.maybeRanEnds = (rec.maybeRanEnds ?? 0) + 1;
        }
        recorder.closedByClient.set(opened, clock.now());
        net.abandon(opened);
      };
    });
    const machine = modernCallMachine.provide({
      actors: { exchange },
      actions: {
        deliver: (_, { message }) => {
          const m = variant.distort ? variant.distort(message) : message;
          // The final answer reaches the application as the call's ending says (below).
          if (isResponse(m)) this.final = m;
          else {
            this.wrote = true;
            const uid = (m as { params?: { uid?: unknown } }).params?.uid;
            if (typeof uid === 'string') recorder.deliver(uid);
          }
        },
        reportGap: (_, { gap }) => recorder.gaps.push({ callKey, lostCount: gap.lostCount, at: clock.now() }),
        sendCancel: (_, { request: cancel }) => this.postCancel(cancel),
      },
    });
    const baseInput = callInput(route, rules);
    let lastDecision: ModernCallDecision | undefined;
    const inspect = deps.onDecision
      ? (ev: InspectionEvent) => {
          if (ev.type !== '@xstate.snapshot' || ev.actorRef !== this.actor) return;
          const c = (ev.snapshot as unknown as { context?: CallMachineContext }).context;
          if (!c?.decision || c.decision === lastDecision || !c.end) return;
          lastDecision = c.decision;
          deps.onDecision?.(c.end, { ...c, elapsedMs: c.now - c.startedAt } as never, c.decision);
        }
      : undefined;
    this.actor = createActor(machine, {
      clock,
      input: variant.input ? variant.input(baseInput) : baseInput,
      inspect,
    });
    this.actor.subscribe((s) => {
      if (s.status !== 'done' || !s.output) return;
      // How the runtime hands the ending to the application's library (the SDK), as the SDK reads it.
      const ending = (variant.ending ?? callEnding)(
        s.output,
        {
          aborted: this.aborted,
          streamOpen: this.wrote,
          rawAnswer: this.raw !== undefined,
          fetchError: this.fetchFailed,
        },
        rules,
      );
      const answer =
        ending === 'raw-answer' && this.raw
          ? asSdkReads(this.raw, request.id)
          : ending === 'fetch-error'
            ? failedFetch(request.id)
            : this.final;
      if (ending === 'abort') this.settleAborted();
      else if (answer)
        this.settle(deps, variant.distort && answer !== this.final ? variant.distort(answer) : answer);
      // A definite failure passed through from the server (a 409) carries no reason: the machine's.
      if (rec && rec.reason === undefined && !this.superseded) rec.reason = s.output.reason;
    });
    this.actor.start();
  }

  /** The application aborted the call (its fetch's signal): the runtime's `signal.aborted`. */
  private aborted = false;

  /**
   * The application aborts the call, as `continuityFetch` hears its signal: `app.cancel` to the machine,
   * and the library's ending is the abort (its own reason), whatever the machine ends with.
   */
  abort(): void {
    if (this.aborted || this.actor.getSnapshot().status !== 'active') return;
    this.aborted = true;
    const { recorder, clock } = this.deps;
    const rec = recorder.calls.get(this.callKey);
    if (rec) rec.abortedAt = clock.now();
    this.actor.send({ type: 'app.cancel', at: clock.now() });
  }

  /**
   * The runtime's `postCancel`: one POST of the explicit cancel (§13), best effort, given up after
   * `CANCEL_DEADLINE_MS`; its answer is read by nobody but the recorder (the key's state it reports).
   */
  private postCancel(cancel: JsonRpcRequest): void {
    const { net, clock, recorder } = this.deps;
    const post: ModernSimExchange = {
      method: 'POST',
      body: cancel,
      paramHeader: false,
      principal: this.deps.principal ?? '',
      address: this.deps.address ?? 'app',
    };
    let conn: SimConnection | undefined;
    const done = () => {
      if (conn) net.abandon(conn);
    };
    conn = net.connect(
      post,
      (ev) => {
        if (ev.type === 'http.response') {
          const state = (ev.body as { result?: { keyState?: unknown } } | undefined)?.result?.keyState;
          if (typeof state === 'string') record.keyState = state;
        }
        if (ev.type === 'http.response' || ev.type === 'net.failed' || ev.type === 'net.ended') done();
      },
      (c) => this.deps.serve(c),
    );
    const record: CancelRecord = { callKey: this.callKey, sentAt: clock.now(), conn };
    recorder.cancels.push(record);
    clock.setTimeout(done, CANCEL_DEADLINE_MS);
  }

  /** The library rejected with the application's own abort reason: the call ended as aborted. */
  private settleAborted(): void {
    const rec = this.deps.recorder.calls.get(this.callKey);
    if (!rec) return;
    rec.outcomes++;
    rec.endedAt = this.deps.clock.now();
    rec.outcome = 'aborted';
  }

  /** The SDK sent the call again after this request's -32020: this request's end is not the call's. */
  private superseded = false;
  /** The machine's final answer, as delivered. */
  private final: JsonRpcMessage | undefined;
  /** A message reached the application before the answer (the runtime's SDK stream is open). */
  private wrote = false;
  /** The last answer that ended an attempt without a message (the runtime's `last.answer`). */
  private raw: { readonly status: number; readonly body: unknown } | undefined;
  /** An attempt failed before any response byte (the runtime's `last.error`). */
  private fetchFailed = false;

  /** The call's one answer reached the application (a second would be a duplicate). */
  private settle(deps: ModernClientDeps, m: JsonRpcMessage): void {
    const rec = deps.recorder.calls.get(this.callKey);
    if (!rec) return;
    const code = 'error' in m ? (m.error as { code?: unknown }).code : undefined;
    if (code === ModernErrorCode.HEADER_MISMATCH) {
      deps.recorder.count(deps.recorder.headerRefusalsSeen, this.callKey);
      if (deps.onHeaderMismatch?.(this.callKey)) {
        this.superseded = true;
        return;
      }
    }
    rec.outcomes++;
    rec.endedAt = deps.clock.now();
    const uid = 'result' in m ? (m.result as { _meta?: { uid?: unknown } })._meta?.uid : undefined;
    if (typeof uid === 'string') deps.recorder.resultFrom.set(this.callKey, uid.split('/')[0] as string);
    // The application reads the answer as it is worded (a mutant's distortion shows here).
    if ('result' in m) {
      rec.outcome = 'result';
      return;
    }
    const error = (m as { error: { code: number; data?: { reason?: unknown } } }).error;
    rec.outcome = error.code === JsonRpcCode.OUTCOME_UNKNOWN ? 'unknown' : 'error';
    if (typeof error.data?.reason === 'string') rec.reason = error.data.reason;
    // The application reads the code: a -32020 is a header mismatch however it came (a 400, or a stream).
    else if (error.code === ModernErrorCode.HEADER_MISMATCH) rec.reason = ModernCallReason.headerMismatch;
  }

  stop(): void {
    this.actor.stop();
  }
}

/**
 * A raw answer as the SDK reads it: a JSON-RPC error body is the server's error (under the application's
 * id, as `rawAnswerAs` puts it); any other body an HTTP error of the SDK's, which the application sees
 * as a failure.
 */
function asSdkReads(raw: { readonly status: number; readonly body: unknown }, id: RequestId): JsonRpcMessage {
  const error = (raw.body as { error?: { code?: unknown } } | undefined)?.error;
  if (typeof error?.code === 'number') return { jsonrpc: '2.0', id, error } as JsonRpcMessage;
  return { jsonrpc: '2.0', id, error: { code: JsonRpcCode.REQUEST_FAILED, message: `HTTP ${raw.status}` } };
}

/** The fetch error the SDK rethrows: the application sees a failure. */
function failedFetch(id: RequestId): JsonRpcMessage {
  return { jsonrpc: '2.0', id, error: { code: JsonRpcCode.REQUEST_FAILED, message: 'fetch failed' } };
}

/** What the simulated network did, as the I/O fact the runtime's exchange would tell the core. */
function factOf(ev: Exclude<IoEvent, { type: 'sse.events' }>, now: number): AttemptFact {
  switch (ev.type) {
    case 'http.stream':
      return { kind: 'headers' };
    case 'sse.activity':
    case 'sse.retry':
      return { kind: 'keep-alive' };
    case 'sse.event':
      return { kind: 'event', data: ev.message, ...(ev.id !== undefined ? { eventId: ev.id } : {}) };
    case 'http.response':
      // Every answer of this world is JSON.
      return {
        kind: 'answer',
        status: ev.status,
        contentType: 'application/json',
        body: ev.body,
        retryAfter: ev.retryAfter ?? null,
        wallMs: now,
      };
    case 'net.ended':
      return { kind: 'ended' };
    case 'net.failed':
      return { kind: 'failed', fault: ev.fault };
  }
}
