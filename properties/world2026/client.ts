import { type Actor, createActor, fromCallback, type InspectionEvent } from 'xstate';
import type { Exchange, IoEvent } from '../../machines/client/io.js';
import {
  type AttemptInput,
  type StatelessCallContext as CallMachineContext,
  type StatelessCallEvent,
  type StatelessCallInput,
  statelessCallMachine,
} from '../../machines/client/stateless-call.machine.js';
import {
  caseOf,
  DEFAULT_STATELESS_POLICY,
  ModernErrorCode,
  type StatelessCallContext,
  type StatelessDecision,
  type StatelessPolicy,
  StatelessReason,
  type StatelessStreamEnd,
} from '../../machines/client/stateless-decide.js';
import { asMessage, endOfAnswer } from '../../machines/client/stateless-wire.js';
import { JsonRpcCode } from '../../machines/codes.js';
import { isResponse, type JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { VirtualClock } from '../world/clock.js';
import type { SimConnection, SimNetwork } from '../world/network.js';
import type { Recorder2026 } from './recorder.js';
import { TOOLS_2026, type Tool2026 } from './tools.js';

/**
 * The simulated 2026-07-28 client: each application call is the real `statelessCallMachine` (the client's
 * call lifecycle, every stream end decided by `decideStatelessEnd`) on the virtual clock, its `exchange`
 * actor one POST on the simulated network. The exchange decides nothing: it reports bytes, messages and
 * how the connection ended as the runtime's (src/client/modern/attempt-exchange.ts) does, reading answers
 * with the same `asMessage` / `endOfAnswer` (machines/client/stateless-wire.ts): a failure before the
 * response headers is `cut-before-response` (or `refused`), one after them `cut-mid-stream`.
 */
export interface ClientVariant2026 {
  readonly name: string;
  /** What the call machine is started with (a mutant misreads the tool's hints or the memo window). */
  readonly input?: (input: StatelessCallInput) => StatelessCallInput;
  /** What the exchange reports instead of what happened (a mutant misclassifies an end, or drops ids). */
  readonly report?: (event: StatelessCallEvent) => StatelessCallEvent;
  /** What the application is told instead of what the machine delivered (a mutant words outcomes wrongly). */
  readonly distort?: (message: JsonRpcMessage) => JsonRpcMessage;
}

export const CORRECT_CLIENT_2026: ClientVariant2026 = { name: 'mcp-continuity' };

export interface ClientDeps2026 {
  readonly clock: VirtualClock;
  readonly net: SimNetwork;
  /** Takes a connection the client opened (the world routes it to the server, or swallows it). */
  readonly serve: (conn: SimConnection) => void;
  readonly recorder: Recorder2026;
  readonly nextId: () => number;
  /** What the client learnt from `server/discover`: the extension's memo window, if advertised. */
  readonly extension?: { readonly memoWindowMs: number };
  readonly policy: StatelessPolicy;
  /** The client's stall timeout (0: off, as without heartbeats). */
  readonly stallTimeoutMs: number;
  /** Told each decision (coverage). */
  readonly onDecision?: (end: StatelessStreamEnd, ctx: StatelessCallContext, d: StatelessDecision) => void;
  /**
   * The application's SDK got a -32020 for this call: as the official v2 `Client.callTool` does, it
   * refreshes its tools/list view and sends the call again as a NEW request (new id, through our client
   * a new idempotency key), once. Answers whether it did (then this answer is not the call's outcome).
   */
  readonly onHeaderMismatch?: (callKey: string) => boolean;
}

/**
 * A POST of this world: the exchange plus the `Mcp-Param-*` header the application built from its view
 * of the tool's declarations (`paramHeader`: it sent one). Every re-issue of one request carries the same.
 */
export interface SimExchange2026 extends Exchange {
  readonly paramHeader: boolean;
}

export const SIM_STATELESS_POLICY: StatelessPolicy = {
  ...DEFAULT_STATELESS_POLICY,
  maxReissues: 4,
  backoff: { initialDelayMs: 200, maxDelayMs: 4_000, factor: 2, maxRetries: 10, jitter: 'full' },
  memoMarginMs: 2_000,
};

/** One application call: the real call machine with simulated I/O. */
export class SimCall {
  readonly actor: Actor<typeof statelessCallMachine>;

  constructor(
    deps: ClientDeps2026,
    variant: ClientVariant2026,
    readonly callKey: string,
    tool: Tool2026,
    /** The idempotency key; the application's own when it reuses one (a bug it may have). */
    key: string,
    seed: number,
    /** The application's view said the tool declares an `Mcp-Param-*` header: it sends one. */
    paramHeader = false,
  ) {
    const { clock, net, recorder } = deps;
    const rec = recorder.calls.get(callKey);
    // The call's first key (its SDK's retry after a -32020 is a new request with a new key).
    if (rec && deps.extension && rec.key === undefined) rec.key = key;
    const report = variant.report ?? ((e: StatelessCallEvent) => e);
    // This request got a 400 -32020: sending it again carries the same headers, which the server refused.
    let refusedHeaders = false;
    const exchange = fromCallback<StatelessCallEvent, AttemptInput>(({ input, sendBack }) => {
      if (rec) rec.attempts++;
      if (refusedHeaders)
        recorder.staleResends.push(`${callKey} (${tool}) sent again with the headers the server refused`);
      let bytes = false;
      let faulted = false;
      let evicted = false;
      const send = (e: StatelessCallEvent) => sendBack(report(e));
      // The attempt ended in a way that proves it did not run (refused; a status that says not processed).
      let provenNotRun = false;
      const ended = (end: StatelessStreamEnd) => {
        if (end.kind === 'refused') faulted = true;
        provenNotRun =
          end.kind === 'refused' ||
          (end.kind === 'http-status' && end.status >= 400 && end.status < 500 && end.status !== 410) ||
          // A 503 proves it only with Retry-After (a server shedding load); without, a proxy may have
          // forwarded it first (the world's `upstreamReset`), and the client cannot tell the two apart.
          (end.kind === 'http-status' && end.status === 503 && end.retryAfterMs !== undefined);
        if (end.kind === 'http-status' && end.status === 410) evicted = true;
        if (end.kind === 'http-status' && caseOf(end) === '400-header-mismatch') refusedHeaders = true;
        send({ type: 'attempt.ended', at: clock.now(), end });
      };
      const onEvent = (ev: IoEvent): void => {
        const at = clock.now();
        switch (ev.type) {
          case 'http.stream':
          case 'sse.activity':
          case 'sse.retry':
            bytes = true;
            send({ type: 'attempt.activity', at });
            return;
          case 'sse.events':
            for (const one of ev.events) onEvent(one);
            return;
          case 'sse.event':
            bytes = true;
            if (ev.message) send({ type: 'attempt.message', at, message: ev.message, eventId: ev.id });
            else send({ type: 'attempt.activity', at });
            return;
          case 'http.response': {
            // As the runtime's exchange reads an answer that is not an event stream (stateless-wire.ts): a
            // JSON-RPC message is a message like any other (the machine tells the call's own answer apart).
            const message = ev.status === 200 ? asMessage(ev.body) : undefined;
            if (message) send({ type: 'attempt.message', at, message });
            else ended(endOfAnswer(ev.status, ev.body, ev.retryAfter ?? null, at));
            return;
          }
          case 'net.ended':
            ended({ kind: 'ended-without-answer' });
            return;
          case 'net.failed':
            ended(
              ev.fault === 'refused'
                ? { kind: 'refused' }
                : bytes
                  ? { kind: 'cut-mid-stream' }
                  : { kind: 'cut-before-response' },
            );
            return;
        }
      };
      const post: SimExchange2026 = { method: 'POST', body: input.request, paramHeader };
      const conn = net.connect(post, onEvent, (c) => deps.serve(c));
      return () => {
        if (rec) {
          // A 410 right after a broken attempt is that fault's consequence (its events were evicted
          // meanwhile) and costs one more attempt; a second in a row is not the world's doing.
          // So is a 410 after a 410 the client answered with its gap (events evicted again while its
          // re-issue was on its way); a 410 after one it ignored is the client's doing. (The gap of this
          // attempt is reported before its exchange stops.)
          const gaps = recorder.gaps.filter((g) => g.callKey === callKey).length;
          const broken = evicted
            ? rec.afterFault === true || rec.lastWas410 === true
            : faulted || recorder.faultedConns.has(conn.id);
          rec.afterFault = broken && !evicted;
          rec.lastWas410 = evicted && broken && gaps > (rec.gapsSeen ?? 0);
          rec.gapsSeen = gaps;
          if (broken) rec.faultedEnds++;
          if (!provenNotRun) rec.maybeRanEnds = (rec.maybeRanEnds ?? 0) + 1;
        }
        net.abandon(conn);
      };
    });
    const machine = statelessCallMachine.provide({
      actors: { exchange },
      actions: {
        deliver: (_, { message }) => {
          const m = variant.distort ? variant.distort(message) : message;
          if (isResponse(m)) this.settle(deps, m);
          else {
            const uid = (m as { params?: { uid?: unknown } }).params?.uid;
            if (typeof uid === 'string') recorder.deliver(uid);
          }
        },
        reportGap: (_, { gap }) => recorder.gaps.push({ callKey, lostCount: gap.lostCount, at: clock.now() }),
        sendCancel: () => undefined,
      },
    });
    const baseInput: StatelessCallInput = {
      request: {
        jsonrpc: '2.0',
        id: deps.nextId(),
        method: 'tools/call',
        params: { name: tool, arguments: { callKey }, _meta: { progressToken: `p-${callKey}` } },
      },
      tool: TOOLS_2026[tool].annotations,
      extension: deps.extension,
      idempotencyKey: key,
      policy: deps.policy,
      stallTimeoutMs: deps.stallTimeoutMs,
      startedAt: clock.now(),
      jitterSeed: seed,
    };
    let lastDecision: StatelessDecision | undefined;
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
      // A definite failure passed through from the server (a 409) carries no reason: the machine's.
      if (s.status === 'done' && rec && rec.reason === undefined && !this.superseded)
        rec.reason = s.output?.reason;
    });
    this.actor.start();
  }

  /** The SDK sent the call again after this request's -32020: this request's end is not the call's. */
  private superseded = false;

  /** The call's one answer reached the application (a second would be a duplicate). */
  private settle(deps: ClientDeps2026, m: JsonRpcMessage): void {
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
    else if (error.code === ModernErrorCode.HEADER_MISMATCH) rec.reason = StatelessReason.headerMismatch;
  }

  stop(): void {
    this.actor.stop();
  }
}
