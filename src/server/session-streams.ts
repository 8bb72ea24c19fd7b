import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { ServerMetrics } from '../metrics/server.js';
import { Attachment } from './attachment.js';
import type { EventLog } from './event-log.js';
import type { SessionHost } from './session-host.js';
import { closeFrame, type SseSink } from './sse.js';
import type { WakePort } from './wake-port.js';

/** What one session's streams need. */
export interface StreamsOptions {
  readonly id: string;
  readonly epoch: string;
  readonly log: EventLog;
  readonly heartbeatMs: number;
  readonly retryMs: number;
  readonly metrics?: ServerMetrics;
  /** The host's timer port (heartbeats and polls are wake-ups asked of it). */
  readonly wakes: WakePort;
}

/**
 * One session's streams, with a log and SSE sinks: the responses attached to them (one reader per
 * stream), and what is stored, always before any socket sees it.
 */
export class SessionStreams {
  /** Exists only while something is attached: an empty Map is ~200 bytes, a twentieth of an idle session. */
  private attachedHere: Map<number, Attachment> | undefined;

  constructor(
    private readonly o: StreamsOptions,
    private readonly host: SessionHost,
    /** Shared store: read attached streams this often too, in case a change report went missing. 0: never. */
    private readonly pollMs: number,
  ) {}

  attachedStreams(): ReadonlySet<number> {
    return new Set(this.attachedHere?.keys() ?? []);
  }

  /** Something changed the stream on another instance (or a poll): its reader looks. */
  wake(stream: number): void {
    this.attachedHere?.get(stream)?.wake();
  }

  /** The stream is done without a final event written here: its reader ends once it has written what it has. */
  finish(stream: number): void {
    this.attachedHere?.get(stream)?.finish();
  }

  /**
   * Stores, offers to the attached stream, then waits while its reader is far behind (`whenWritable`): a
   * tool awaiting its sends goes at its reader's pace instead of outrunning it until the reader is cut.
   */
  async store(stream: number, message: JsonRpcMessage): Promise<void> {
    await this.storeAndOffer(stream, message);
    await this.paced(stream);
  }

  /** Stores and offers to the attached stream, without waiting for its reader (write-behind.ts). */
  async storeAndOffer(stream: number, message: JsonRpcMessage): Promise<void> {
    const seq = await this.o.log.append(this.o.id, stream, message);
    this.attachedHere?.get(stream)?.offer({ seq, message });
  }

  /** Resolves once the stream's reader is not far behind (`whenWritable`): only its own sender waits. */
  async paced(stream: number): Promise<void> {
    await this.attachedHere?.get(stream)?.sink.whenWritable?.();
  }

  /** A call's answer: written once, then the stream is finished. False when one was written already. */
  async storeFinal(stream: number, message: JsonRpcMessage): Promise<boolean> {
    const seq = await this.o.log.appendFinal(this.o.id, stream, message);
    const attachment = this.attachedHere?.get(stream);
    if (seq !== undefined) attachment?.offer({ seq, message });
    attachment?.finish();
    return seq !== undefined;
  }

  /**
   * Ends every response: with `event: close` when the session ended (`reason`), without when it was
   * released (clients resume against the next process).
   */
  closeAll(reason?: string): void {
    for (const a of this.attachedHere?.values() ?? []) {
      if (reason !== undefined) a.sink.write(closeFrame(reason));
      a.sink.end();
    }
    this.attachedHere = undefined;
  }

  /** The response reading `stream` here, if any. */
  readerOf(stream: number): SseSink | undefined {
    return this.attachedHere?.get(stream)?.sink;
  }

  /** The sink becomes the stream's reader (the previous one was ended: execute-plan.ts). */
  attach(stream: number, sink: SseSink, lastSent: number): Attachment {
    const o = this.o;
    const attachment = new Attachment(sink, o.log, o.id, o.epoch, stream, lastSent, {
      wakes: o.wakes,
      heartbeatMs: o.heartbeatMs,
      pollMs: this.pollMs,
    });
    this.attachedHere ??= new Map();
    this.attachedHere.set(stream, attachment);
    this.host.send({ type: 'stream.attached' });
    sink.onClose(() => {
      if (this.attachedHere?.get(stream) === attachment) this.attachedHere.delete(stream);
      if (this.attachedHere?.size === 0) this.attachedHere = undefined;
      if (this.host.ended) return;
      this.host.used();
      this.host.send({ type: 'stream.detached' });
      o.metrics?.streamDetached(o.id, stream);
    });
    return attachment;
  }
}
