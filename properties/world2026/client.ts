import type { IoEvent } from '../../machines/client/io.js';
import {
  DEFAULT_STATELESS_POLICY,
  decideStatelessEnd,
  mayHaveRun,
  type StatelessCallContext,
  type StatelessDecision,
  type StatelessPolicy,
  type StatelessStreamEnd,
} from '../../machines/client/stateless-decide.js';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import { isResponse, type JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { VirtualClock } from '../world/clock.js';
import type { SimConnection, SimNetwork } from '../world/network.js';
import type { Recorder2026 } from './recorder.js';
import { TOOLS_2026, type Tool2026 } from './tools.js';

/**
 * The simulated 2026-07-28 client: one application call at a time per `SimCall`, each attempt one POST on
 * the simulated network, every end of a stream decided by the real `decideStatelessEnd` (the client's
 * decision table). The loop around it (what one attempt observed, the cursor across attempts, waiting
 * the decision's delay) is the stand-in for the client's call machine until that machine is shared.
 */
export interface ClientVariant2026 {
  readonly name: string;
  /** The decision for one stream end (a mutant wraps the real one). */
  readonly decide: typeof decideStatelessEnd;
  /** What the application is told instead of the decision (mutants only). */
  readonly distort?: (d: StatelessDecision) => StatelessDecision;
}

export const CORRECT_CLIENT_2026: ClientVariant2026 = { name: 'mcp-continuity', decide: decideStatelessEnd };

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
}

export const SIM_STATELESS_POLICY: StatelessPolicy = {
  ...DEFAULT_STATELESS_POLICY,
  maxReissues: 4,
  backoff: { initialDelayMs: 200, maxDelayMs: 4_000, factor: 2, maxRetries: 10, jitter: 'full' },
  memoMarginMs: 2_000,
};

/** One application call, through every attempt it takes. */
export class SimCall {
  private attempts = 0;
  private mayHaveRunBefore = false;
  private headerMismatchRetried = false;
  private lastEventId: string | undefined;
  private done = false;
  /** The uid of the last result received (which execution produced it). */
  private resultUid: string | undefined;

  constructor(
    private readonly deps: ClientDeps2026,
    private readonly variant: ClientVariant2026,
    readonly callKey: string,
    private readonly tool: Tool2026,
    /** The idempotency key; the application's own when it reuses one (a bug it may have). */
    private readonly key: string | undefined,
    private readonly seed: number,
  ) {
    const rec = deps.recorder.calls.get(callKey);
    if (rec && key !== undefined) rec.key = key;
    this.attempt(undefined);
  }

  private get record() {
    return this.deps.recorder.calls.get(this.callKey);
  }

  private attempt(carry: { lastEventId: string | null } | undefined): void {
    const { net, clock } = this.deps;
    const id = this.deps.nextId();
    const meta =
      this.deps.extension && this.key !== undefined
        ? {
            [ContinuityMeta.idempotencyKey]: this.key,
            ...(carry ? { [ContinuityMeta.lastEventId]: carry.lastEventId } : {}),
          }
        : undefined;
    const body: JsonRpcMessage = {
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: this.tool, arguments: { callKey: this.callKey }, ...(meta ? { _meta: meta } : {}) },
    };
    const rec = this.record;
    if (rec) rec.attempts++;
    let bytes = false;
    let ended = false;
    let stall: number | undefined;
    let conn: SimConnection | undefined;
    const armStall = () => {
      if (this.deps.stallTimeoutMs <= 0) return;
      if (stall !== undefined) clock.clearTimeout(stall);
      stall = clock.setTimeout(() => end({ kind: 'stalled' }), this.deps.stallTimeoutMs);
    };
    const end = (e: StatelessStreamEnd) => {
      if (ended) return;
      ended = true;
      if (stall !== undefined) clock.clearTimeout(stall);
      if (conn) net.abandon(conn);
      const faulted =
        e.kind === 'refused' ||
        (conn !== undefined && this.deps.recorder.faultedConns.has(conn.id)) ||
        (e.kind === 'http-status' && e.status === 410);
      if (faulted && rec) rec.faultedEnds++;
      this.decide(e);
    };
    const onEvent = (ev: IoEvent) => {
      if (ended) return;
      switch (ev.type) {
        case 'http.stream':
        case 'sse.activity':
        case 'sse.retry':
          bytes = true;
          armStall();
          return;
        case 'sse.events':
          for (const one of ev.events) onEvent(one);
          return;
        case 'sse.event': {
          bytes = true;
          armStall();
          if (ev.id !== undefined) this.lastEventId = ev.id;
          const m = ev.message;
          if (!m) return;
          if (isResponse(m)) {
            if (m.id === id) {
              this.resultUid = resultUid(m);
              end(responseEnd(m));
            }
            return;
          }
          const uid = (m as { params?: { uid?: unknown } }).params?.uid;
          if (typeof uid === 'string') this.deps.recorder.deliver(uid);
          return;
        }
        case 'http.response': {
          const b = ev.body as JsonRpcMessage | undefined;
          if (ev.status === 200 && b && isResponse(b)) {
            this.resultUid = resultUid(b);
            end(responseEnd(b));
          } else end({ kind: 'http-status', status: ev.status, body: ev.body });
          return;
        }
        case 'net.ended':
          end({ kind: 'ended-without-answer' });
          return;
        case 'net.failed':
          end(
            ev.fault === 'refused'
              ? { kind: 'refused' }
              : bytes
                ? { kind: 'cut-mid-stream' }
                : { kind: 'cut-before-response' },
          );
          return;
      }
    };
    conn = net.connect({ method: 'POST', body }, onEvent, (c) => this.deps.serve(c));
    armStall();
  }

  private decide(end: StatelessStreamEnd): void {
    const { clock, recorder } = this.deps;
    const rec = recorder.calls.get(this.callKey);
    const ctx: StatelessCallContext = {
      tool: TOOLS_2026[this.tool].annotations,
      extension: this.deps.extension,
      idempotencyKey: this.deps.extension ? this.key : undefined,
      lastEventId: this.lastEventId,
      attempts: this.attempts,
      mayHaveRunBefore: this.mayHaveRunBefore,
      headerMismatchRetried: this.headerMismatchRetried,
      elapsedMs: clock.now() - (rec?.at ?? 0),
      jitterSeed: this.seed,
    };
    const decided = this.variant.decide(end, ctx, this.deps.policy);
    this.deps.onDecision?.(end, ctx, decided);
    const d = this.variant.distort ? this.variant.distort(decided) : decided;
    if (d.action === 'reissue' || d.action === 'backoff-reissue') {
      if (d.refreshToolList) this.headerMismatchRetried = true;
      this.mayHaveRunBefore ||= mayHaveRun(end);
      if (d.gap) recorder.gaps.push({ callKey: this.callKey, lostCount: d.gap.lostCount });
      if (d.carry) this.lastEventId = d.carry.lastEventId ?? undefined;
      this.attempts++;
      const carry = d.carry ? { lastEventId: d.carry.lastEventId } : undefined;
      clock.setTimeout(() => this.attempt(carry), d.delayMs);
      return;
    }
    if (this.done || !rec) return;
    this.done = true;
    rec.outcomes++;
    rec.endedAt = clock.now();
    rec.reason = d.reason;
    if (d.action === 'deliver') {
      rec.outcome = end.kind === 'result' ? 'result' : 'error';
      if (end.kind === 'result' && this.resultUid)
        recorder.resultFrom.set(this.callKey, this.resultUid.split('/')[0] as string);
    } else rec.outcome = d.action === 'outcome-unknown' ? 'unknown' : 'error';
  }
}

/** The end a JSON-RPC response makes; a result's uid says which execution produced it. */
function resultUid(m: JsonRpcMessage): string | undefined {
  const uid = 'result' in m ? (m.result as { _meta?: { uid?: unknown } })._meta?.uid : undefined;
  return typeof uid === 'string' ? uid : undefined;
}

function responseEnd(m: JsonRpcMessage): StatelessStreamEnd {
  if ('result' in m) {
    const r = m.result as { resultType?: string };
    return { kind: 'result', resultType: r.resultType };
  }
  const e = (m as { error: { code: number; data?: unknown } }).error;
  return { kind: 'error-response', code: e.code, data: e.data };
}
