import type { InstanceDeath, SessionEnd } from '../checks/trace.js';

/**
 * What the world saw, kept outside both machines so the properties judge the system from the outside:
 * side effects as a payment provider would count them, messages as the server appended them, messages
 * as the application received them, and what the application was told about losses.
 */
export interface AppendedMessage {
  readonly uid: string;
  readonly sessionId: string;
  readonly stream: number;
  readonly seq: number;
  /** The application call it belongs to, if any (standalone notifications belong to none). */
  readonly callKey?: string;
  /** The client's key for the stream: a request key (`n:7`) or `standalone`. */
  readonly streamKey: string;
}

export interface GapRecord {
  readonly process: number;
  readonly streamKey: string;
  readonly sessionId?: string;
  readonly reason: string;
  readonly lostCount: number | null;
  /** The server no longer had the gap's session when the gap was reported. */
  readonly sessionGone: boolean;
}

export type CallOutcome = 'result' | 'error' | 'unknown';

export interface CallRecord {
  readonly callKey: string;
  readonly tool: string;
  readonly id: number;
  readonly process: number;
  outcome?: CallOutcome;
  /** Outcome unknown: `error.data.reason`. Error: what kind (`session_ended`, `status`, `connect_failed`). */
  reason?: string;
  outcomes: number;
  /** Virtual time the application made the call. */
  readonly at: number;
  /** Virtual time the application got its (first) outcome. */
  settledAt?: number;
}

export class Recorder {
  /** Non-idempotent side effects per application call (the payment provider's ledger). */
  readonly sideEffects = new Map<string, number>();
  readonly appended: AppendedMessage[] = [];
  /** uid → how many times the application received it (through `deliver` or `deliverOrphan`). */
  readonly delivered = new Map<string, number>();
  /** Delivery order per (session, stream): the seqs in the order the application got them. */
  readonly deliveryOrder = new Map<string, number[]>();
  readonly gaps: GapRecord[] = [];
  readonly calls = new Map<string, CallRecord>();
  readonly sessionsCreated: string[] = [];
  /** Sessions whose id reached a client. A session created by a lost initialize response is unknowable. */
  readonly adoptedSessions = new Set<string>();
  /**
   * Sessions nobody will resume: the client process restarted without a durable cursor, or the
   * application closed the session itself.
   */
  readonly abandonedSessions = new Set<string>();
  /** When a client process began to connect (sent its initialize), and when that connect failed. */
  readonly connectStartedAt = new Map<number, number>();
  readonly connectFailedAt = new Map<number, number>();
  /** Every fault the schedule injected, from when it began until it was over (a reset: one instant). */
  readonly faultSpans: Array<{ readonly from: number; readonly until: number }> = [];
  /** Client processes the application closed itself (`closeAndReconnect`). */
  readonly closedProcesses = new Set<number>();
  /** Calls whose answer the server's log refused after the tool ran (`storeFails`): outcome unknown is theirs. */
  readonly unstoredAnswers = new Set<string>();
  /** Sessions the client stopped using (id changed or ended) while the server still had them, and how. */
  readonly sessionLeftLive: string[] = [];
  /** Every answer a DELETE got (a DELETE cut before its answer is not here); `stranger`: who sent it, if not the owner. */
  readonly deleteAnswers: Array<{
    readonly sessionId: string;
    readonly status: number;
    readonly at: number;
    readonly stranger?: string;
  }> = [];
  /** Virtual time the last fault ended (a fault command, or the end of a partition or of 503s). */
  faultsEndAt = 0;
  /** Request keys (`n:7`) the application was answered outcome unknown for: their streams' loss is flagged. */
  readonly unknownRequests = new Set<string>();
  /** Sessions whose client ended (`terminated`) and told the application so: nothing more will come. */
  readonly endedSessions = new Set<string>();
  /** Application calls whose process died. Their answers may only arrive as orphans. */
  readonly abandonedCalls = new Set<string>();
  /** `session streamKey` of abandoned calls missing from the cursor store: nobody can resume them. */
  readonly forgottenStreams = new Set<string>();
  readonly notes: string[] = [];
  /** Every execution of a tool call by a server, whatever its side effect: callKey → how many. */
  readonly executions = new Map<string, number>();
  /** Every request a server ran: `session streamKey` → the streams it ran on, in order. */
  private readonly runs = new Map<string, number[]>();
  /** Request keys (`n:7`) → the server instances (incarnations) that admitted a run of them. */
  readonly owners = new Map<string, string[]>();
  /** The server incarnation serving now: a restart is a new instance, the old one died. */
  instance = 'i1';
  readonly deaths: InstanceDeath[] = [];
  /** Sessions the server ended: why, and how much was attached or running then. */
  readonly sessionEnds: SessionEnd[] = [];
  /** Client process → when the answer to its `tools/list` reached it (it knows the annotations since). */
  readonly annotationsKnownAt = new Map<number, number>();
  /**
   * A GET without a cursor that did not offer the standalone stream's events up to `head`, and reported no
   * loss: a later GET starts at the head (the server decides the client kept a cursor from the first), and
   * the first one cannot replay what was evicted before it came.
   */
  readonly headAttaches: Array<{ sessionId: string; head: number }> = [];
  /** Sessions the application closed its client on, while the server still had them, and when. */
  readonly closedSessions: Array<{ readonly sessionId: string; readonly at: number }> = [];
  /** Sessions a DELETE of their own client reached the server for. */
  readonly deletesArrived = new Set<string>();
  /** Streams of calls already settled for the application, found in a record a restarted process read. */
  readonly settledInRecord: string[] = [];
  /** Each `close()` of the application: when it was called, and when it returned (absent: never). */
  readonly closes: Array<{ readonly at: number; returnedAt?: number }> = [];
  /**
   * When the client stopped reading a connection the server still served (open, not black-holed, not a
   * finished response left open): a live stream the client cut.
   */
  readonly liveCuts: number[] = [];
  /** Event ids that carried a response (a request's answer) to any client process. */
  readonly answerEventIds = new Set<string>();
  /** GETs a client sent with `Last-Event-ID` = an answer's event id: it resumed a stream already answered. */
  readonly resumesFromAnswer: string[] = [];
  /** When the world, its faults over, found every live call settled and began to wait for the drain. */
  quietFrom: number | undefined;
  /** When the world stopped running (the end of `settle`). */
  endedAt = 0;
  /** The world is being torn down: its processes stop, which is nobody's decision. */
  worldStopped = false;
  /** Connections the client had stopped reading that were still open when the world stopped. */
  heldAfterStop = 0;

  countExecution(callKey: string): void {
    this.executions.set(callKey, (this.executions.get(callKey) ?? 0) + 1);
  }

  /** Returns how many times the request has run in this session. */
  countRun(sessionId: string, streamKey: string, stream: number): number {
    const key = `${sessionId} ${streamKey}`;
    const list = this.runs.get(key) ?? [];
    list.push(stream);
    this.runs.set(key, list);
    const owners = this.owners.get(streamKey) ?? [];
    if (!owners.includes(this.instance)) owners.push(this.instance);
    this.owners.set(streamKey, owners);
    return list.length;
  }

  /**
   * The server ended a session (`session.ended`): why, how much was attached or running in it then, and
   * how long it had gone unused (its idle clock, as the runtime keeps it) against its TTL.
   */
  sessionEnded(end: SessionEnd): void {
    this.sessionEnds.push(end);
  }

  /** The server process died (restart): its calls may end outcome unknown; a new incarnation serves. */
  serverDied(at: number): void {
    this.deaths.push({ instance: this.instance, at });
    this.instance = `i${this.deaths.length + 1}`;
  }

  /**
   * A stream whose request ran again later in the same session (a server without de-duplication got the
   * POST again). The client re-sent it because it had no event id of this one: nothing of it can reach the
   * application, and nothing has to.
   */
  isSuperseded(m: AppendedMessage): boolean {
    const list = this.runs.get(`${m.sessionId} ${m.streamKey}`);
    return list !== undefined && list.indexOf(m.stream) < list.length - 1;
  }

  countSideEffect(callKey: string): void {
    this.sideEffects.set(callKey, (this.sideEffects.get(callKey) ?? 0) + 1);
  }

  recordDelivery(uid: string): void {
    this.delivered.set(uid, (this.delivered.get(uid) ?? 0) + 1);
    const m = this.byUid().get(uid);
    if (!m) return;
    const key = `${m.sessionId}/${m.stream}`;
    const order = this.deliveryOrder.get(key) ?? [];
    order.push(m.seq);
    this.deliveryOrder.set(key, order);
  }

  private index: Map<string, AppendedMessage> | undefined;
  private indexed = 0;
  byUid(): Map<string, AppendedMessage> {
    if (!this.index) this.index = new Map();
    while (this.indexed < this.appended.length) {
      const m = this.appended[this.indexed++] as AppendedMessage;
      this.index.set(m.uid, m);
    }
    return this.index;
  }
}
