import { stallVerdict } from '../../machines/server/deadlines.js';
import { writeVerdict } from '../../machines/server/slow-reader.js';
import type { SseSink } from './sse.js';
import { processWakes, type Wake, type WakePort } from './wake-port.js';

const encoder = new TextEncoder();

export interface WebSinkLimits {
  /** The queue's capacity in bytes: a reader this far behind has its response ended. */
  readonly maxBufferedBytes: number;
  /** How far behind the reader may be before producers wait (`whenWritable`). */
  readonly paceBytes: number;
  /** How long producers may wait while the reader takes nothing before the response is ended. */
  readonly stallMs: number;
}

/**
 * Where a sink's frames are queued: a Web stream's controller, or (Node) a response written directly,
 * whose `desiredSize` is then always the whole capacity (its backlog is the socket's, see `attachSocket`).
 */
export interface FrameQueue {
  readonly desiredSize: number | null;
  enqueue(chunk: Uint8Array): void;
  close(): void;
}

/**
 * An SSE response over a Web `ReadableStream` (or a Node response, through a {@link FrameQueue}), with backpressure and pacing.
 *
 * Backpressure: what the reader has not taken is bounded (`maxBufferedBytes`); past it the response ends
 * after what is queued, and the client resumes with Last-Event-ID (every event is in the log).
 *
 * Pacing: while the reader is more than `paceBytes` behind, `whenWritable()` gives producers a promise,
 * settled when the reader has caught up or the response ends. While anyone waits, the reader must make
 * progress: if the backlog has not shrunk after `stallMs`, the response is ended (a Node socket is
 * destroyed), which releases the producers. A reader that is merely slow is never ended for it.
 *
 * "Behind" counts what is queued in the stream and, once the Node writer has attached its socket, what
 * waits in the socket's buffer: the Node writer reads the stream at once, so that is where a backlog is.
 */
export class WebSink implements SseSink {
  closed = false;
  private readonly listeners: Array<() => void> = [];
  private waiting: Array<() => void> = [];
  private stall: Wake | undefined;
  private socketBacklog: () => number = () => 0;
  private endStalled: () => void = () => this.end();
  private stallMs: number;

  constructor(
    private readonly controller: FrameQueue,
    private readonly limits: WebSinkLimits,
    /** The host's timer port: the stall check is a wake-up asked of it. */
    private readonly wakes: WakePort = processWakes,
  ) {
    this.stallMs = limits.stallMs;
  }

  /** The Node writer: the socket's unsent bytes count as backlog, and a stalled socket is destroyed. */
  attachSocket(backlog: () => number, destroy: () => void, stallMs = this.stallMs): void {
    this.socketBacklog = backlog;
    this.endStalled = destroy;
    this.stallMs = stallMs;
  }

  private get backlog(): number {
    return this.limits.maxBufferedBytes - (this.controller.desiredSize ?? 0) + this.socketBacklog();
  }

  whenWritable(): Promise<void> | undefined {
    if (this.closed || this.backlog <= this.limits.paceBytes) return undefined;
    if (this.stall === undefined) this.watch(this.backlog);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** The reader took something (a Web read, or the socket drained): release producers if it caught up. */
  taken(): void {
    if (this.waiting.length > 0 && (this.closed || this.backlog <= this.limits.paceBytes)) this.release();
  }

  /**
   * While producers wait, looks again every `stallMs`; `stallVerdict` (machines/server/deadlines.ts)
   * decides whether the reader is cut.
   */
  private watch(backlogBefore: number): void {
    this.stall = this.wakes.after(this.stallMs, () => {
      this.stall = undefined;
      this.taken();
      const now = this.backlog;
      const verdict = stallVerdict(this.waiting.length > 0, backlogBefore, now);
      if (verdict === 'watch-again') this.watch(now);
      if (verdict === 'cut') this.endStalled();
    });
  }

  private release(): void {
    this.stall?.cancel();
    this.stall = undefined;
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  write(chunk: string): void {
    if (this.closed) return;
    // The reader is too far behind (machines/server/slow-reader.ts): end the response after what is
    // queued. The frame is dropped here, not lost: it is in the event log, and the client resumes from its
    // cursor. A queue with no size (an errored stream) takes nothing more.
    const room = this.controller.desiredSize;
    const queued = room === null ? Number.POSITIVE_INFINITY : this.limits.maxBufferedBytes - room;
    if (writeVerdict(queued, this.limits.maxBufferedBytes) === 'cut') {
      this.end();
      return;
    }
    this.controller.enqueue(encoder.encode(chunk));
  }

  end(): void {
    if (this.closed) return;
    this.controller.close();
    this.gone();
  }

  /** The reader went away (client disconnected) or we ended. */
  gone(): void {
    this.release();
    if (this.closed && this.listeners.length === 0) return;
    this.closed = true;
    for (const l of this.listeners.splice(0)) l();
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.listeners.push(listener);
  }
}
