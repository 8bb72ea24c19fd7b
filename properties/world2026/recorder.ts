/**
 * What the 2026-07-28 world saw, kept outside the machines so the properties judge from the outside: side
 * effects as a payment provider counts them, progress as the tool emitted it, what the application
 * received, and what it was told about losses.
 */
export type CallOutcome2026 = 'result' | 'error' | 'unknown';

export interface CallRecord2026 {
  readonly callKey: string;
  readonly tool: string;
  /** Virtual time the application made the call. */
  readonly at: number;
  /** The idempotency key the client sent (when the server advertised the extension). */
  key?: string;
  outcome?: CallOutcome2026;
  /** The decision's reason (`StatelessReason`). */
  reason?: string;
  outcomes: number;
  endedAt?: number;
  /** Attempts that ended because the world broke them (a cut, a stall, a refusal, an injected status). */
  faultedEnds: number;
  /** The last attempt ended broken by the world (a 410 right after it is its consequence). */
  afterFault?: boolean;
  /** The last attempt was a world-caused 410 answered with a gap; `gapsSeen`: the call's gaps by then. */
  lastWas410?: boolean;
  gapsSeen?: number;
  attempts: number;
  /** Attempts that ended in a way after which they may have run (not refused, not a not-processed status). */
  maybeRanEnds?: number;
}

export interface ProgressRecord {
  readonly uid: string;
  readonly callKey: string;
  /** The tool execution that emitted it. */
  readonly execution: string;
  readonly n: number;
}

export class Recorder2026 {
  readonly calls = new Map<string, CallRecord2026>();
  /** Non-idempotent side effects per application call. */
  readonly sideEffects = new Map<string, number>();
  /** Tool executions (bodies started) per application call. */
  readonly executions = new Map<string, number>();
  /** Executions that ran to their end (their result exists): callKey → execution ids. */
  readonly completed = new Map<string, string[]>();
  /** Keyed executions per call: their progress must arrive or be reported lost. */
  readonly keyedExecutions = new Map<string, string[]>();
  readonly progress: ProgressRecord[] = [];
  /** uid → times the application received it. */
  readonly delivered = new Map<string, number>();
  /** Per execution, the progress numbers in the order the application got them. */
  readonly deliveryOrder = new Map<string, number[]>();
  /** The execution whose result reached the application, per call. */
  readonly resultFrom = new Map<string, string>();
  readonly gaps: Array<{ callKey: string; lostCount: number | null; at: number }> = [];
  /** When each execution ran to its end. */
  readonly completedAt = new Map<string, number>();
  /** Virtual times an instance died or restarted. */
  readonly deaths: number[] = [];
  /** Virtual times a memo entry was forgotten (its window passed). */
  readonly forgotten: number[] = [];
  /** Connections the world broke (reset, stalled, ended, answered with an injected status). */
  readonly faultedConns = new Set<number>();
  /** -32020 answers the application's SDK got, per call (each makes it refresh and send again, once). */
  readonly headerRefusalsSeen = new Map<string, number>();
  /** When the application last refreshed its view of the tools' header declarations, per call. */
  readonly refreshedAt = new Map<string, number>();
  /** When a tool's header declaration changed, per tool. */
  readonly schemaChanges: Array<{ tool: string; at: number }> = [];
  /**
   * Attempts served a recorded -32020 with headers the SDK would have accepted: a refusal replayed as if
   * the tool had answered it.
   */
  readonly staleRefusals: string[] = [];
  /** Requests sent again (same headers) after the server refused their headers with a 400 -32020. */
  readonly staleResends: string[] = [];
  /** Virtual time the last fault ended. */
  faultsEndAt = 0;

  count(map: Map<string, number>, key: string): number {
    const n = (map.get(key) ?? 0) + 1;
    map.set(key, n);
    return n;
  }

  private readonly byUid = new Map<string, ProgressRecord>();

  emitted(p: ProgressRecord): void {
    this.progress.push(p);
    this.byUid.set(p.uid, p);
  }

  deliver(uid: string): void {
    this.count(this.delivered, uid);
    const p = this.byUid.get(uid);
    if (!p) return;
    const order = this.deliveryOrder.get(p.execution) ?? [];
    order.push(p.n);
    this.deliveryOrder.set(p.execution, order);
  }
}
