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
}

export type CallOutcome = 'result' | 'error' | 'unknown';

export interface CallRecord {
  readonly callKey: string;
  readonly tool: string;
  readonly id: number;
  readonly process: number;
  outcome?: CallOutcome;
  outcomes: number;
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
  /** Sessions the application's client dropped although the server still had them. */
  readonly droppedLiveSessions: string[] = [];
  /** Sessions whose id reached a client. A session created by a lost initialize response is unknowable. */
  readonly adoptedSessions = new Set<string>();
  /**
   * Sessions nobody will resume: the client process restarted without a durable cursor, or the
   * application closed the session itself.
   */
  readonly abandonedSessions = new Set<string>();
  /** Application calls whose process died. Their answers may only arrive as orphans. */
  readonly abandonedCalls = new Set<string>();
  readonly notes: string[] = [];

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
