import { formatEventId } from '../../machines/event-id.js';
import { replayStep } from '../../machines/server/session-commands.js';
import type { EventLog, StoredEvent } from './event-log.js';
import { eventFrame, HEARTBEAT_FRAME, type SseSink } from './sse.js';
import type { Wake, WakePort } from './wake-port.js';

const REPLAY_CHUNK = 64 * 1024;

/**
 * One SSE response attached to one stream of a session. It writes each event once, in order, with no
 * gap: an event appended here is written at once when it is the next one the client lacks; anything else
 * (a replay, an event appended by another instance, one that overtook another) is read back from the
 * log after the client's cursor. Reads are never concurrent, and an offer or wake-up during a read
 * causes one more read, so nothing appended is missed at the hand-off from replay to live.
 */
export class Attachment {
  private reading = false;
  private readAgain = false;
  /**
   * Events offered while a read was under way, written after it when they follow on. Re-reading for
   * each of them instead kept a reader of a fast writer (one round trip per append, as on Redis) reading
   * the log again and again, a whole window each time.
   */
  private offered: StoredEvent[] = [];
  private heartbeat: Wake | undefined;
  private poll: Wake | undefined;
  private streamFinished = false;

  constructor(
    readonly sink: SseSink,
    private readonly log: EventLog,
    private readonly sessionId: string,
    private readonly epoch: string,
    readonly stream: number,
    /** The last sequence number the client has (its cursor). */
    private lastSent: number,
    timing: {
      /** The host's timer port. */
      readonly wakes: WakePort;
      /** A comment line this often (0: never). */
      readonly heartbeatMs: number;
      /** Shared store: read the log this often too, in case another instance's change report went missing. */
      readonly pollMs: number;
    },
  ) {
    const { wakes, heartbeatMs, pollMs } = timing;
    if (heartbeatMs > 0) this.heartbeat = wakes.every(heartbeatMs, () => sink.write(HEARTBEAT_FRAME));
    if (pollMs > 0) this.poll = wakes.every(pollMs, () => this.wake());
    sink.onClose(() => {
      this.heartbeat?.cancel();
      this.poll?.cancel();
    });
  }

  /** Writes what the log holds after the cursor; afterwards appends are written as they come. */
  replay(): Promise<void> {
    return this.pull();
  }

  /** A new event was appended to the stream here (already stored). */
  offer(event: StoredEvent): void {
    if (this.reading) this.offered.push(event);
    else if (event.seq === this.lastSent + 1) this.write(event);
    else if (event.seq > this.lastSent) void this.pull();
  }

  /** The stream changed somewhere (another instance appended, or a poll): read what is new. */
  wake(): void {
    if (!this.sink.closed) void this.pull();
  }

  /** The stream's last event was appended: end the response once it is written. */
  finish(): void {
    this.streamFinished = true;
    if (!this.reading) this.sink.end();
  }

  get finished(): boolean {
    return this.streamFinished;
  }

  private async pull(): Promise<void> {
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    try {
      do {
        this.readAgain = false;
        const read = await this.log.read(this.sessionId, this.stream, this.lastSent);
        if (!read) break;
        const step = replayStep(read.window, read.events, this.lastSent);
        if (step.end === 'lost') {
          this.sink.end();
          return;
        }
        this.writeAll(step.write);
        if (step.end === 'finished') this.streamFinished = true;
        // What was offered meanwhile and follows on is written; a gap left among it is read.
        const offered = this.offered.sort((a, b) => a.seq - b.seq);
        this.offered = [];
        for (const e of offered) this.write(e);
        if (offered.some((e) => e.seq > this.lastSent)) this.readAgain = true;
      } while (this.readAgain && !this.sink.closed);
    } catch {
      // The log failed (Redis unreachable, say): the client resumes from its cursor against a log that works.
      this.sink.end();
      return;
    } finally {
      this.reading = false;
    }
    if (this.streamFinished) this.sink.end();
  }

  /**
   * Events read back from the log (a replay, say), written in strings of about `REPLAY_CHUNK` characters
   * (a string is written once it reaches that length):
   * one write per event cost a `TextEncoder` call, a web-stream enqueue and a socket write each (row 3 of
   * docs/benchmarks.md).
   */
  private writeAll(events: readonly StoredEvent[]): void {
    let chunk = '';
    for (const e of events) {
      this.lastSent = e.seq;
      chunk += eventFrame(
        formatEventId({ epoch: this.epoch, stream: this.stream, seq: e.seq }),
        e.message,
        e.data,
      );
      if (chunk.length >= REPLAY_CHUNK) {
        if (this.sink.closed) return;
        this.sink.write(chunk);
        chunk = '';
      }
    }
    if (chunk !== '' && !this.sink.closed) this.sink.write(chunk);
  }

  private write(e: StoredEvent): void {
    if (e.seq !== this.lastSent + 1 || this.sink.closed) return;
    this.lastSent = e.seq;
    this.sink.write(
      eventFrame(formatEventId({ epoch: this.epoch, stream: this.stream, seq: e.seq }), e.message, e.data),
    );
  }
}
