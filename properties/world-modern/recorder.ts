import { ContinuityMeta } from '../../machines/continuity-extension.js';
import type { EvictionReissue, InstanceDeath } from '../checks/trace.js';
import type { SimConnection } from '../world/network.js';
import type { TrickleRecord } from './link.js';

/**
 * What the 2026-07-28 world saw, kept outside the machines so the properties judge from the outside: side
 * effects as a payment provider counts them, progress as the tool emitted it, what the application
 * received, and what it was told about losses.
 */
export type ModernCallOutcome = 'result' | 'error' | 'unknown' | 'aborted';

export interface CallRecordModern {
  readonly callKey: string;
  readonly tool: string;
  /** Virtual time the application made the call. */
  readonly at: number;
  /** The idempotency key the client sent (when the server advertised the extension). */
  key?: string;
  /** The principal the application's requests are authenticated as ('': the world's one principal). */
  readonly principal: string;
  /** The application's remote address. */
  readonly address: string;
  /** When the application aborted it (its signal), if it did before it ended. */
  abortedAt?: number;
  outcome?: ModernCallOutcome;
  /** The decision's reason (`ModernCallReason`). */
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

/** An explicit cancel (§13) the client posted for a keyed call it aborted, as the wire saw it. */
export interface CancelRecord {
  readonly callKey: string;
  readonly sentAt: number;
  /** The cancel's connection (the server side reads it off the wire). */
  readonly conn: SimConnection;
  /** When it reached an instance, and which (`id#incarnation`). */
  arrivedAt?: number;
  servedBy?: string;
  /** The key's state the server answered (`cancelResult`'s `keyState`), if an answer arrived. */
  keyState?: string;
  /**
   * The key's state the server put in its answer, whether or not the answer reached the client (a cut may
   * lose it): what the key's other calls see is the server's state, not what the canceller heard.
   */
  stateSent?: string;
}

/** One tool body that started: when, where (`id#incarnation`), on which connection, keyed or not. */
export interface ExecutionStart {
  readonly callKey: string;
  readonly at: number;
  readonly where: string;
  /** Its request's connection (by object: a proxy's copy may share a client connection's id). */
  readonly conn: SimConnection;
  readonly keyed: boolean;
}

export class ModernRecorder {
  readonly calls = new Map<string, CallRecordModern>();
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
  /** Every idempotency key each call's requests carried (the SDK's re-send after a -32020 has its own). */
  readonly keysSent = new Map<string, Set<string>>();
  /** New keys the server refused at the per-principal bound (429), by call. */
  readonly boundRefusals: Array<{
    readonly callKey: string;
    readonly at: number;
    /** Whose bound: the principal's (the memo's), or the address's (a server without `authenticate`). */
    readonly bound: 'principal' | 'address';
  }> = [];
  /** Trickles the world started on attempts' connections (link.ts). */
  readonly trickles: TrickleRecord[] = [];
  /** Virtual time the last fault ended. */
  faultsEndAt = 0;
  /** Instances (`id#incarnation`) that started a tool body of each call. */
  readonly owners = new Map<string, string[]>();
  /** Instance incarnations that died, and when. */
  readonly instanceDeaths: InstanceDeath[] = [];
  /** The explicit cancels the client posted. */
  readonly cancels: CancelRecord[] = [];
  /** Every tool body that started, by execution id. */
  readonly starts = new Map<string, ExecutionStart>();
  /** Connections the client closed itself (it stopped the attempt), and when. */
  readonly closedByClient = new Map<SimConnection, number>();
  /** Every 410 a call's attempt got (it reached the client), and the cursor its next attempt carried. */
  readonly evictions: Array<{ -readonly [K in keyof EvictionReissue]: EvictionReissue[K] }> = [];
  /**
   * 410s the server sent, by connection, until the client hears them (`evictionHeard`). One the network
   * lost (a partition black-holed the connection, a reset discarded it on its way) told the client
   * nothing: its next attempt rightly carries the cursor it had, so it is no 410 of the check's.
   */
  private readonly evictionsSent = new Map<SimConnection, EvictionReissue & { next: undefined }>();

  /** A tool body of `callKey` started on `instance` (`id#incarnation`). */
  ranOn(callKey: string, instance: string): void {
    const list = this.owners.get(callKey) ?? [];
    if (!list.includes(instance)) list.push(instance);
    this.owners.set(callKey, list);
  }

  /** An instance incarnation (`id#incarnation`) died. */
  instanceDied(instance: string, at: number): void {
    this.instanceDeaths.push({ instance, at });
  }

  /**
   * An attempt reached the server side of the network: its cursor (the extension's `lastEventId`) is read
   * off the request, and a 410 answer off the wire, as a proxy would see them.
   */
  watchAttempt(conn: SimConnection, now: () => number): void {
    const body = conn.exchange.body as
      | { params?: { arguments?: { callKey?: unknown }; _meta?: Record<string, unknown> } }
      | undefined;
    const callKey = body?.params?.arguments?.callKey;
    if (typeof callKey !== 'string') return;
    const meta = body?.params?._meta ?? {};
    const sent =
      typeof meta[ContinuityMeta.lastEventId] === 'string'
        ? (meta[ContinuityMeta.lastEventId] as string)
        : null;
    // The previous 410 of this call is answered by this attempt's cursor.
    const open = this.evictions.findLast((e) => e.callKey === callKey);
    if (open && open.next === undefined) open.next = sent;
    const send = conn.send.bind(conn);
    conn.send = (event) => {
      if (event.type === 'http.response' && event.status === 410) {
        const data = (event.body as { error?: { data?: { resumeAfter?: unknown } } } | undefined)?.error
          ?.data;
        const offered = typeof data?.resumeAfter === 'string' ? data.resumeAfter : undefined;
        this.evictionsSent.set(conn, { callKey, at: now(), offered, sent, next: undefined });
      }
      send(event);
    };
  }

  /** The 410 the server sent on `conn` reached the client's attempt (its exchange read it). */
  evictionHeard(conn: SimConnection): void {
    const sent = this.evictionsSent.get(conn);
    if (!sent) return;
    this.evictionsSent.delete(conn);
    this.evictions.push({ ...sent });
  }

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
