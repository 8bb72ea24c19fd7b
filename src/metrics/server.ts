import { OutcomeUnknownReason } from '../../machines/codes.js';
import { RESUME_STATUS, type ResumeAnswer, type StreamWindow } from '../../machines/server/retention.js';
import type { EventLog } from '../server/event-log.js';
import type { MemoStore } from '../server/memo-store.js';
import { DetachClock } from './detach-clock.js';
import { ConventionMetric, ServerMetric } from './names.js';
import type { Recorder } from './recorder.js';
import { SessionTimer } from './session-timer.js';

/**
 * What a server records. `createContinuityServer` and its sessions call these with facts the session
 * machine and the event log already decided (a resume answer, an ended session, an eviction); nothing
 * here decides anything about the protocol.
 */
export class ServerMetrics {
  private readonly detaches: DetachClock;
  /** Retention windows of the servers observed; the margin is taken against the shortest. */
  private readonly windows: number[] = [];
  private worstLatencyMs = 0;
  private declared = false;
  private readonly sessions: SessionTimer;
  /** The memo stores observed (`observeMemo`): the gauge is the sum of their live entries. */
  private readonly memos: MemoStore[] = [];

  constructor(
    private readonly recorder: Recorder,
    now: () => number,
  ) {
    this.detaches = new DetachClock(now);
    this.sessions = new SessionTimer(recorder, ConventionMetric.serverSessionDuration, now);
  }

  /**
   * Called once by `createContinuityServer`: declares the server figures, watches the log's evictions
   * and starts reporting the retention margin against `log.policy.retentionMs`.
   */
  observe(log: EventLog): this {
    if (!this.declared) {
      this.declared = true;
      for (const spec of Object.values(ServerMetric)) this.recorder.declare(spec);
      this.recorder.declare(ConventionMetric.serverSessionDuration);
      this.recorder.gauge(ServerMetric.retentionMargin, () => this.retentionMarginMs());
    }
    this.windows.push(log.policy.retentionMs);
    log.setObserver?.({ evicted: (count) => this.recorder.add(ServerMetric.evictedEvents, count) });
    return this;
  }

  /**
   * The retention window minus the worst reconnect latency seen so far (the window itself before any
   * reconnect was seen). Undefined before a server is observed.
   */
  retentionMarginMs(): number | undefined {
    if (this.windows.length === 0) return undefined;
    return Math.min(...this.windows) - this.worstLatencyMs;
  }

  /**
   * The session machine answered a `Last-Event-ID`. `window` is the stream's window the answer was
   * computed from: an accepted resume replays what it holds after the cursor.
   */
  resumeAnswered(sessionId: string, answer: ResumeAnswer, window: StreamWindow | undefined): void {
    if ('stream' in answer) {
      const latency = this.detaches.resumed(sessionId, answer.stream);
      if (latency !== undefined) this.reconnected(latency);
    }
    switch (answer.kind) {
      case 'replay':
        this.recorder.add(ServerMetric.resumes, 1);
        this.recorder.add(ServerMetric.replayedEvents, Math.max(0, (window?.head ?? 0) - answer.afterSeq));
        return;
      case 'gone':
        this.rejected(answer.reason, RESUME_STATUS.gone);
        if (answer.lostCount !== null) this.recorder.add(ServerMetric.lostEvents, answer.lostCount);
        return;
      case 'invalid':
        this.rejected(answer.reason, RESUME_STATUS.invalid);
        return;
      case 'unknown-session':
        this.rejected('unknown_session', RESUME_STATUS['unknown-session']);
        return;
    }
  }

  /** A GET with `Last-Event-ID` named a session this server does not hold: 404. */
  resumeOfUnknownSession(): void {
    this.rejected('unknown_session', RESUME_STATUS['unknown-session']);
  }

  /** A stream's response closed while its session lives: a reconnect may follow. */
  streamDetached(sessionId: string, stream: number): void {
    this.detaches.detached(sessionId, stream);
  }

  /** A session was created here (its initialize): its duration is timed from now. */
  sessionStarted(sessionId: string): void {
    this.sessions.started(sessionId);
  }

  /**
   * A session this instance took over from a durable or shared store (a restart, another instance):
   * timed from `createdAt` (wall clock, ms, from its record), so its end here records its whole duration.
   * A record without it (written before it was kept) is not timed.
   */
  sessionRestored(sessionId: string, createdAt: number | undefined, wallNow = Date.now()): void {
    if (createdAt !== undefined) this.sessions.startedAgo(sessionId, Math.max(0, wallNow - createdAt));
  }

  /**
   * A session ended where the end was decided: counted, and its duration recorded
   * (`mcp.server.session.duration`) when its start is known here (created here, or restored from a
   * record that kept it). Its end `reason` is not an error.
   */
  sessionEnded(sessionId: string, reason: string): void {
    this.detaches.forget(sessionId);
    this.recorder.add(ServerMetric.sessionsEnded, 1, { reason });
    this.sessions.ended(sessionId, { 'mcp_continuity.reason': reason });
  }

  /**
   * A session whose end another instance decided and counted: this instance only stops timing it, so
   * its timer entry does not stay until the 100,000-entry bound pushes it out.
   */
  sessionEndedElsewhere(sessionId: string): void {
    this.detaches.forget(sessionId);
    this.sessions.forget(sessionId);
  }

  /** Sessions this instance is timing for `mcp.server.session.duration`. */
  get timedSessions(): number {
    return this.sessions.size;
  }

  /**
   * The continuity extension's memo (`createKeyedRequests({ metrics })`): `server.memo_entries` reports
   * its live entries, for stores that count them (`MemoStore.liveEntries`: memory and SQLite now, Redis
   * as of its previous reading).
   */
  observeMemo(memo: MemoStore): void {
    if (this.memos.length === 0)
      this.recorder.gauge(ServerMetric.memoEntries, () => {
        let total: number | undefined;
        for (const m of this.memos) {
          const n = m.liveEntries?.();
          if (n !== undefined) total = (total ?? 0) + n;
        }
        return total;
      });
    if (!this.memos.includes(memo)) this.memos.push(memo);
  }

  /** A request was answered as outcome unknown (a restart interrupted it). */
  outcomeUnknown(reason: string): void {
    this.recorder.add(ServerMetric.outcomeUnknown, 1, { reason });
  }

  /**
   * A request was refused as malformed or not allowed (4xx): expected when anyone can reach the server,
   * so counted here rather than reported as an error.
   */
  requestRejected(reason: string, status: number): void {
    this.recorder.add(ServerMetric.rejectedRequests, 1, { reason, 'http.response.status_code': status });
  }

  /** A keyed call's body started on this instance (`createKeyedRequests`). */
  keyedExecuted(): void {
    this.recorder.add(ServerMetric.keyedExecutions, 1);
  }

  /**
   * A keyed call's stored entry moved (`from` → `to`, a compare-and-set this instance won): into
   * `outcomeUnknown`, the declaration that the instance running it died (`instance_lost`) is counted in
   * `server.outcome_unknown`, once per key whichever instance declared it.
   */
  keyedEntryMoved(to: string): void {
    if (to === 'outcomeUnknown') this.outcomeUnknown(OutcomeUnknownReason.instanceLost);
  }

  /** A keyed attempt is served from its key's log without starting anything. */
  keyedAttached(): void {
    this.recorder.add(ServerMetric.keyedAttaches, 1);
  }

  /** A keyed attempt was answered with an error before anything ran: `code` is its JSON-RPC code. */
  keyedRefused(code: number, status: number): void {
    this.recorder.add(ServerMetric.keyedRefusals, 1, {
      reason: String(code),
      'http.response.status_code': status,
    });
  }

  /** A request was refused at a limit (`ContinuityServerOptions.limits`): 429 or 503. */
  requestLimited(reason: string, status: number): void {
    this.recorder.add(ServerMetric.limitedRequests, 1, { reason, 'http.response.status_code': status });
  }

  private reconnected(latencyMs: number): void {
    this.worstLatencyMs = Math.max(this.worstLatencyMs, latencyMs);
    this.recorder.record(ServerMetric.reconnectLatency, latencyMs);
  }

  private rejected(reason: string, status: number): void {
    this.recorder.add(ServerMetric.resumeRejections, 1, { reason, 'http.response.status_code': status });
  }
}
