import { formatEventId } from '../../machines/event-id.js';
import type { EventLog, StoredEvent } from './event-log.js';
import { eventFrame, HEARTBEAT_FRAME, type SseSink } from './sse.js';

/**
 * One SSE response attached to one stream of a session. It closes the race between replay and live
 * appends: while it replays from the log, live events are held; afterwards each event is written once,
 * in order, by sequence number. No duplicate and no gap at the hand-off.
 */
export class Attachment {
  private replaying = true;
  private held: StoredEvent[] = [];
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private streamFinished = false;

  constructor(
    readonly sink: SseSink,
    private readonly sessionId: string,
    private readonly epoch: string,
    readonly stream: number,
    /** The last sequence number the client has (its cursor). */
    private lastSent: number,
    heartbeatMs: number,
  ) {
    if (heartbeatMs > 0) {
      this.heartbeat = setInterval(() => sink.write(HEARTBEAT_FRAME), heartbeatMs);
      this.heartbeat.unref?.();
    }
    sink.onClose(() => clearInterval(this.heartbeat));
  }

  /** Replays what the log holds after the cursor, then goes live. */
  async replay(log: EventLog): Promise<void> {
    const read = await log.read(this.sessionId, this.stream, this.lastSent);
    for (const e of read?.events ?? []) this.write(e);
    this.replaying = false;
    const held = this.held.sort((a, b) => a.seq - b.seq);
    this.held = [];
    for (const e of held) this.write(e);
    if (read?.window.finished || this.streamFinished) this.finish();
  }

  /** Goes live without replay (a standalone GET without Last-Event-ID attaches at the head). */
  live(): void {
    this.replaying = false;
  }

  /** A new event was appended to the stream (already stored). */
  offer(event: StoredEvent): void {
    if (this.replaying) this.held.push(event);
    else this.write(event);
  }

  /** The stream's last event was appended: end the response once it is written. */
  finish(): void {
    this.streamFinished = true;
    if (!this.replaying) this.sink.end();
  }

  private write(e: StoredEvent): void {
    if (e.seq <= this.lastSent || this.sink.closed) return;
    this.lastSent = e.seq;
    this.sink.write(
      eventFrame(formatEventId({ epoch: this.epoch, stream: this.stream, seq: e.seq }), e.message),
    );
  }

  get finished(): boolean {
    return this.streamFinished;
  }
}
