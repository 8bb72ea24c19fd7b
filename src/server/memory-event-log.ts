import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { logSweepPeriodMs } from '../../machines/server/deadlines.js';
import {
  DEFAULT_RETENTION_POLICY,
  forgottenBySweep,
  type RetentionPolicy,
  retainFrom,
  type StreamWindow,
} from '../../machines/server/retention.js';
import type { EventLog, EventLogObserver, StoredEvent } from './event-log.js';
import { type Wake, WakePort } from './wake-port.js';

export interface MemoryEventLogOptions {
  /** Defaults to `DEFAULT_RETENTION_POLICY.maxEventsPerStream`. */
  readonly maxEventsPerStream?: number;
  /** Defaults to `DEFAULT_RETENTION_POLICY.retentionMs`. */
  readonly retentionMs?: number;
  /** The clock events are stamped and aged with; injectable so tests need not wait. Defaults to `Date.now`. */
  readonly now?: () => number;
  /**
   * How often the background {@link MemoryEventLog.sweep} runs. Streams nobody touches are only aged by the
   * sweep, so this bounds how long expired messages of idle streams stay in memory. Defaults to a quarter
   * of `retentionMs`, at least one second (`logSweepPeriodMs`, machines/server/deadlines.ts).
   */
  readonly sweepIntervalMs?: number;
  /**
   * The timer port the sweep is a wake-up of: the server's, when the server made this log; else the
   * log's own (it is a host of its own).
   */
  readonly wakes?: WakePort;
}

/**
 * One stream, mutated in place so an append costs O(1): append times grow at the end of `times`, and
 * eviction moves `start` forward (compacting now and then). Callers only ever get copies (`viewOf`).
 */
interface StreamState {
  oldest: number;
  head: number;
  finished: boolean;
  /** Append times; `times[start + i]` belongs to sequence number `oldest + i`. */
  times: number[];
  start: number;
  /**
   * Exactly the retained events: keys are `oldest..head`. Each keeps its message's JSON text, made once
   * when appended: serializing every message again was most of a replay's server time (docs/benchmarks.md
   * row 3: 10,000 events, ~8 → ~1.6 ms). The price is memory: ~380 bytes per small retained event instead
   * of ~130 (V8 over-allocates the string `JSON.stringify` returns), within the retention bound.
   */
  readonly messages: Map<number, StoredEvent>;
}

function viewOf(s: StreamState): StreamWindow {
  return { oldest: s.oldest, head: s.head, finished: s.finished, appendedAt: s.times.slice(s.start) };
}

/**
 * An {@link EventLog} in process memory: the default for a single server process, and the reference the
 * contract suite's other backends are compared with. Not durable: a restart loses every session's events,
 * so sessions cannot survive one either.
 *
 * Memory is bounded by the retention policy: every append and every read evicts, and a background
 * {@link MemoryEventLog.sweep} ages streams nobody touches. What is evicted is decided by
 * `machines/server/retention.ts` alone, as for every backend.
 */
export class MemoryEventLog implements EventLog {
  readonly durable = false;
  readonly policy: RetentionPolicy;
  private readonly now: () => number;
  private readonly sweepIntervalMs: number;
  private readonly sessions = new Map<string, Map<number, StreamState>>();
  private readonly wakes: WakePort;
  private timer: Wake | undefined;
  private closed = false;
  private observer: EventLogObserver | undefined;

  /** @throws RangeError for a policy that cannot retain anything or a sweep interval that is not positive. */
  constructor(options: MemoryEventLogOptions = {}) {
    const maxEventsPerStream = options.maxEventsPerStream ?? DEFAULT_RETENTION_POLICY.maxEventsPerStream;
    const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_POLICY.retentionMs;
    if (!Number.isSafeInteger(maxEventsPerStream) || maxEventsPerStream < 1) {
      throw new RangeError(`maxEventsPerStream must be a positive integer, got ${maxEventsPerStream}`);
    }
    // Infinity is allowed: no age limit, only the count bound.
    if (Number.isNaN(retentionMs) || retentionMs < 0) {
      throw new RangeError(`retentionMs must be a non-negative number, got ${retentionMs}`);
    }
    const sweepIntervalMs = logSweepPeriodMs(retentionMs, options.sweepIntervalMs);
    if (Number.isNaN(sweepIntervalMs) || sweepIntervalMs <= 0) {
      throw new RangeError(`sweepIntervalMs must be positive, got ${sweepIntervalMs}`);
    }
    this.policy = Object.freeze({ maxEventsPerStream, retentionMs });
    this.now = options.now ?? Date.now;
    this.sweepIntervalMs = sweepIntervalMs;
    this.wakes = options.wakes ?? new WakePort();
  }

  async openStream(sessionId: string, stream: number): Promise<void> {
    this.ensureOpen();
    this.streamOf(sessionId, stream, true);
  }

  async append(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number> {
    this.ensureOpen();
    const s = this.streamOf(sessionId, stream, true);
    const now = this.now();
    s.head += 1;
    s.times.push(now);
    s.messages.set(s.head, { seq: s.head, message, data: JSON.stringify(message) });
    this.evict(s, now, sessionId, stream);
    this.startSweeping();
    return s.head;
  }

  async read(
    sessionId: string,
    stream: number,
    afterSeq: number,
  ): Promise<{ events: StoredEvent[]; window: StreamWindow } | undefined> {
    this.ensureOpen();
    const s = this.evicted(sessionId, stream);
    if (!s) return undefined;
    const events: StoredEvent[] = [];
    for (let seq = Math.max(s.oldest, Math.floor(afterSeq) + 1); seq <= s.head; seq++) {
      const event = s.messages.get(seq);
      if (event !== undefined) events.push(event);
    }
    return { events, window: viewOf(s) };
  }

  async window(sessionId: string, stream: number): Promise<StreamWindow | undefined> {
    this.ensureOpen();
    const s = this.evicted(sessionId, stream);
    return s ? viewOf(s) : undefined;
  }

  async appendFinal(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number | undefined> {
    this.ensureOpen();
    const s = this.streamOf(sessionId, stream, true);
    if (s.finished) return undefined;
    const seq = this.append(sessionId, stream, message);
    // Marked before anything awaits, so a racing call finds the stream finished.
    s.finished = true;
    return seq;
  }

  async dropSession(sessionId: string): Promise<void> {
    this.sessions.delete(sessionId);
  }

  setObserver(observer: EventLogObserver | undefined): void {
    this.observer = observer;
  }

  /**
   * Stops the background sweep, so the process can exit, and frees everything. Idempotent. A closed log
   * refuses further use (it rejects) rather than silently starting an empty one.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
    this.timer = undefined;
    this.sessions.clear();
  }

  /**
   * Age-evicts every stream, including those nobody reads or appends to any more, and forgets streams
   * that are finished and have nothing left to replay, and sessions left without streams. Unfinished
   * streams are kept even when empty: their head is what the next sequence number and cursor checks are
   * based on. Runs on a timer after the first append; call it directly to reclaim memory at a chosen time.
   *
   * A forgotten finished stream reads as unknown (`window` undefined) from then on, like a stream that
   * never existed.
   */
  sweep(): void {
    const now = this.now();
    for (const [sessionId, streams] of this.sessions) {
      for (const [stream, s] of streams) {
        this.evict(s, now, sessionId, stream);
        if (forgottenBySweep(s)) streams.delete(stream);
      }
      if (streams.size === 0) this.sessions.delete(sessionId);
    }
  }

  /** What is held right now, without evicting first: for tests and metrics. */
  stats(): { sessions: number; streams: number; events: number } {
    let streams = 0;
    let events = 0;
    for (const session of this.sessions.values()) {
      streams += session.size;
      for (const s of session.values()) events += s.messages.size;
    }
    return { sessions: this.sessions.size, streams, events };
  }

  private ensureOpen(): void {
    if (this.closed) throw new Error('MemoryEventLog is closed');
  }

  private streamOf(sessionId: string, stream: number, create: true): StreamState;
  private streamOf(sessionId: string, stream: number, create: false): StreamState | undefined;
  private streamOf(sessionId: string, stream: number, create: boolean): StreamState | undefined {
    let streams = this.sessions.get(sessionId);
    if (!streams) {
      if (!create) return undefined;
      streams = new Map();
      this.sessions.set(sessionId, streams);
    }
    let s = streams.get(stream);
    if (!s && create) {
      s = { oldest: 1, head: 0, finished: false, times: [], start: 0, messages: new Map() };
      streams.set(stream, s);
    }
    return s;
  }

  /** The stream after age eviction at the current time, or undefined when unknown. */
  private evicted(sessionId: string, stream: number): StreamState | undefined {
    const s = this.streamOf(sessionId, stream, false);
    if (s) this.evict(s, this.now(), sessionId, stream);
    return s;
  }

  /** Applies the shared retention rule and forgets what fell out of the window. */
  private evict(s: StreamState, now: number, sessionId: string, stream: number): void {
    const from = retainFrom(s, this.policy, now, (cutoff) => {
      // Times only grow, so the scan stops at the first event young enough: O(evicted), not O(retained).
      for (let i = s.start; i < s.times.length; i++)
        if ((s.times[i] as number) >= cutoff) return s.oldest + (i - s.start);
      return undefined;
    });
    if (from === s.oldest) return;
    for (let seq = s.oldest; seq < from; seq++) s.messages.delete(seq);
    this.observer?.evicted(from - s.oldest, sessionId, stream);
    s.start += from - s.oldest;
    s.oldest = from;
    if (s.start > 1024 && s.start * 2 > s.times.length) {
      s.times = s.times.slice(s.start);
      s.start = 0;
    }
  }

  private startSweeping(): void {
    if (this.timer !== undefined || this.closed) return;
    // A wake-up never keeps the process alive (the port's timer is unref'd).
    this.timer = this.wakes.every(this.sweepIntervalMs, () => this.sweep());
  }
}
