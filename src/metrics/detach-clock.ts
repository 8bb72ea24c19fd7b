/**
 * When each stream's response last closed, so the resume that follows can be timed: that interval is the
 * server's view of the client's reconnect latency. Entries go when the resume arrives or the session
 * ends; a hard cap keeps a server whose clients never come back from growing without bound.
 */
const MAX_TRACKED_SESSIONS = 10_000;

export class DetachClock {
  private readonly sessions = new Map<string, Map<number, number>>();

  constructor(private readonly now: () => number) {}

  detached(sessionId: string, stream: number): void {
    let streams = this.sessions.get(sessionId);
    if (!streams) {
      if (this.sessions.size >= MAX_TRACKED_SESSIONS) {
        // Maps iterate in insertion order: the session tracked longest goes first.
        const oldest = this.sessions.keys().next().value;
        if (oldest !== undefined) this.sessions.delete(oldest);
      }
      streams = new Map();
      this.sessions.set(sessionId, streams);
    }
    streams.set(stream, this.now());
  }

  /** Milliseconds since the stream detached, or undefined when no detach is on record. */
  resumed(sessionId: string, stream: number): number | undefined {
    const streams = this.sessions.get(sessionId);
    const at = streams?.get(stream);
    if (streams === undefined || at === undefined) return undefined;
    streams.delete(stream);
    if (streams.size === 0) this.sessions.delete(sessionId);
    return Math.max(0, this.now() - at);
  }

  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }
}
