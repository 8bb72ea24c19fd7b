import type { IoEvent } from '../../machines/client/io.js';
import { isResponse, type JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { VirtualClock } from '../world/clock.js';

/**
 * The last hop to the client, as bytes: what the client core's progress rule (`attemptStep`'s `bytes`
 * facts, `STALL_PROGRESS_BYTES`) is about. The simulated network delivers whole messages; this receiver,
 * one per attempt, turns them back into a byte stream where the world says so:
 *
 * - a slow link (`ModernSlowLink`): a call's answer is large and arrives in chunks at the link's rate, taking
 *   longer than the client's stall timeout although every 64 KiB arrive well within it (alive);
 * - a trickle (`trickle()`): from now on the message in flight never completes; a few bytes keep coming
 *   (a proxy buffering, a server stuck mid-write), which prove nothing (a stall).
 *
 * What arrives is FIFO as on one TCP connection: a keep-alive sent after a large answer waits behind it.
 * A reset is not: it ends the connection at once and discards what was still unread.
 */
export interface ModernSlowLink {
  /** Bytes of a call's answer (the JSON-RPC response that ends it). */
  readonly answerBytes: number;
  /** The link delivers this many bytes… */
  readonly chunkBytes: number;
  /** …every this many ms. */
  readonly chunkMs: number;
}

/** A slow link: a 256 KiB answer at 16 KiB per 500 ms (8 s), 64 KiB every 2 s: alive by the progress rule. */
export const SLOW_LINK_MODERN: ModernSlowLink = {
  answerBytes: 256 * 1024,
  chunkBytes: 16 * 1024,
  chunkMs: 500,
};

/** A trickle: 1 KiB every 500 ms, never completing what it carries (7 KiB per 3.5 s stall interval). */
export const TRICKLE_BYTES = 1024;
export const TRICKLE_MS = 500;

/** A trickle the world started on one attempt's connection, and when it stopped holding the attempt. */
export interface TrickleRecord {
  readonly callKey: string;
  readonly conn: number;
  readonly at: number;
  /** The client stopped listening (its attempt ended), or a reset ended the connection. */
  endedAt?: number;
  /** The faults stopped (the world settles): the trickle stops, the connection goes silent. */
  stoppedAt?: number;
}

export class ModernReceiver {
  private readonly queue: Array<{ readonly event: IoEvent; left: number; started?: true }> = [];
  private pumping = false;
  private stopped = false;
  private trickling: TrickleRecord | undefined;

  constructor(
    private readonly clock: VirtualClock,
    private readonly link: ModernSlowLink | undefined,
    /** A whole message (or end) reached the client. */
    private readonly deliver: (event: IoEvent) => void,
    /** Bytes that complete nothing reached the client. */
    private readonly bytes: (n: number) => void,
    /** Bytes moved on the connection (the balancer sees traffic). */
    private readonly traffic: () => void,
  ) {}

  /** What the network delivered. */
  receive(event: IoEvent): void {
    if (this.stopped) return;
    if (event.type === 'net.failed') {
      // A reset: what was unread is gone, and the client hears of it at once.
      this.queue.length = 0;
      this.end();
      this.deliver(event);
      return;
    }
    // Behind a message that never completes, nothing arrives.
    if (this.trickling) return;
    this.queue.push({ event, left: this.sizeOf(event) });
    if (!this.pumping) this.pump();
  }

  /**
   * From now on the message in flight never completes: a few bytes every `TRICKLE_MS`. False when the
   * connection already trickles or its client stopped listening.
   */
  trickle(record: TrickleRecord): boolean {
    if (this.stopped || this.trickling) return false;
    this.trickling = record;
    this.queue.length = 0;
    const drip = () => {
      if (this.stopped || this.trickling !== record || record.stoppedAt !== undefined) return;
      this.traffic();
      this.bytes(TRICKLE_BYTES);
      this.clock.setTimeout(drip, TRICKLE_MS);
    };
    this.clock.setTimeout(drip, TRICKLE_MS);
    return true;
  }

  /** The client stopped listening (its exchange ended). */
  stop(): void {
    this.end();
  }

  private end(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.trickling && this.trickling.stoppedAt === undefined) this.trickling.endedAt = this.clock.now();
  }

  /** Only a call's answer is large, and only on a slow link; everything else fits in one chunk. */
  private sizeOf(event: IoEvent): number {
    if (!this.link) return 0;
    const answer = (e: { readonly message?: JsonRpcMessage }) =>
      e.message !== undefined && isResponse(e.message);
    if (event.type === 'sse.event' && answer(event)) return this.link.answerBytes;
    if (event.type === 'sse.events') return event.events.some(answer) ? this.link.answerBytes : 0;
    if (event.type === 'http.response' && event.status === 200) return this.link.answerBytes;
    return 0;
  }

  private pump(): void {
    const link = this.link;
    while (!this.stopped) {
      const head = this.queue[0];
      if (!head) return;
      if (head.left <= 0 || !link) {
        this.queue.shift();
        this.deliver(head.event);
        continue;
      }
      // A whole answer's status line and headers arrive before its body (the core's `headers` fact).
      if (head.event.type === 'http.response' && !head.started) this.deliver({ type: 'http.stream' });
      head.started = true;
      this.pumping = true;
      this.clock.setTimeout(() => {
        this.pumping = false;
        if (this.stopped || this.queue[0] !== head) return;
        head.left -= link.chunkBytes;
        this.traffic();
        // The chunk that completes the message is the message itself (the core resets its count on it).
        if (head.left > 0) this.bytes(link.chunkBytes);
        this.pump();
      }, link.chunkMs);
      return;
    }
  }
}
