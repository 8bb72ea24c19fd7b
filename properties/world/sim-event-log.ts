import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import {
  appendToWindow,
  EMPTY_WINDOW,
  evictWindow,
  finishWindow,
  type RetentionPolicy,
  type StreamWindow,
} from '../../machines/server/retention.js';

interface SimStream {
  window: StreamWindow;
  readonly messages: Map<number, JsonRpcMessage>;
}

/**
 * The simulated event log of the worlds: the `EventLog` contract (src/testing/contracts/event-log.ts),
 * synchronously, on a virtual clock. What is kept and what a cursor gets is `machines/server/retention.ts`'s
 * (`appendToWindow`, `evictWindow`, `finishWindow`), as in every runtime log. test/contracts/event-log.test.ts
 * runs the contract on it.
 */
export class SimEventLog {
  private readonly sessions = new Map<string, Map<number, SimStream>>();

  constructor(
    readonly policy: RetentionPolicy,
    private readonly now: () => number,
  ) {}

  /** Registers a stream; idempotent. */
  openStream(sessionId: string, stream: number): void {
    this.streamOf(sessionId, stream);
  }

  /** Stores one message (evicting by count and age) and returns its sequence number. */
  append(sessionId: string, stream: number, message: JsonRpcMessage): number {
    const s = this.streamOf(sessionId, stream);
    const before = s.window.oldest;
    const { window, seq } = appendToWindow(s.window, this.now(), this.policy);
    for (let n = before; n < window.oldest; n++) s.messages.delete(n);
    s.window = window;
    s.messages.set(seq, message);
    return seq;
  }

  /** Appends and finishes the stream, unless it is finished already (then undefined: nothing written). */
  appendFinal(sessionId: string, stream: number, message: JsonRpcMessage): number | undefined {
    if (this.sessions.get(sessionId)?.get(stream)?.window.finished) return undefined;
    const seq = this.append(sessionId, stream, message);
    const s = this.streamOf(sessionId, stream);
    s.window = finishWindow(s.window);
    return seq;
  }

  /** The retained window after age eviction now; undefined for a stream the log does not know. */
  window(sessionId: string, stream: number): StreamWindow | undefined {
    const s = this.sessions.get(sessionId)?.get(stream);
    if (!s) return undefined;
    const before = s.window.oldest;
    s.window = evictWindow(s.window, this.now(), this.policy);
    for (let n = before; n < s.window.oldest; n++) s.messages.delete(n);
    return s.window;
  }

  /** Every retained event after `afterSeq`, in order, and the window they were read from. */
  read(
    sessionId: string,
    stream: number,
    afterSeq: number,
  ): { events: Array<{ seq: number; message: JsonRpcMessage }>; window: StreamWindow } | undefined {
    const window = this.window(sessionId, stream);
    const s = this.sessions.get(sessionId)?.get(stream);
    if (!window || !s) return undefined;
    const events: Array<{ seq: number; message: JsonRpcMessage }> = [];
    for (let seq = Math.max(afterSeq + 1, window.oldest); seq <= window.head; seq++) {
      const message = s.messages.get(seq);
      if (message) events.push({ seq, message });
    }
    return { events, window };
  }

  dropSession(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  private streamOf(sessionId: string, stream: number): SimStream {
    let streams = this.sessions.get(sessionId);
    if (!streams) {
      streams = new Map();
      this.sessions.set(sessionId, streams);
    }
    let s = streams.get(stream);
    if (!s) {
      s = { window: EMPTY_WINDOW, messages: new Map() };
      streams.set(stream, s);
    }
    return s;
  }
}
