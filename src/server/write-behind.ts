/** Messages queued per session before the SDK server's `send` waits for the stores under way. */
export const WRITE_BEHIND_LIMIT = 64;

interface Queued {
  readonly stream: number;
  readonly message: unknown;
}

/**
 * One session's stores that the SDK server is not made to wait for (`EventLog.ordersAppends`): a tool's
 * notifications are queued while the previous group is being stored, then handed to the log together
 * (one script, one transaction), in order. A group is stored only once the one before it settled, and
 * a stream whose store failed gets nothing more stored until the failure is reported: no event is ever
 * stored after one of its stream that was lost. The failure is reported once, to whichever comes first:
 * the next send on the stream (refused, as the lost message's own send was before), or the stream's
 * answer (`settled`), which is then not vouched for. Exists only while stores are under way.
 */
export class WriteBehind {
  private queue: Queued[] = [];
  private storing: Promise<void> | undefined;
  /** Per stream: messages queued or being stored. */
  private readonly pending = new Map<number, number>();
  /** Per stream: the first failure not reported yet. */
  private readonly failed = new Map<number, { readonly error: unknown }>();

  constructor(private readonly store: (stream: number, message: unknown) => Promise<unknown>) {}

  /** Nothing queued, nothing being stored, no failure to report. */
  get empty(): boolean {
    return this.pending.size === 0 && this.failed.size === 0;
  }

  /**
   * Queues `message` for `stream`, or throws the stream's unreported failure (the message is then not
   * stored). Returns a promise to wait for when too many are queued, else undefined.
   */
  add(stream: number, message: unknown): Promise<void> | undefined {
    this.report(stream);
    this.queue.push({ stream, message });
    this.pending.set(stream, (this.pending.get(stream) ?? 0) + 1);
    this.storing ??= this.run();
    return this.queue.length >= WRITE_BEHIND_LIMIT ? this.storing : undefined;
  }

  /**
   * Resolves once every message of `stream` queued so far is stored; rejects with the stream's
   * unreported failure (reported then).
   */
  async settled(stream: number): Promise<void> {
    while (this.pending.has(stream)) await this.storing;
    this.report(stream);
  }

  /**
   * Resolves once nothing is queued or being stored, whatever the outcomes (failures stay to report):
   * awaited before the session's keys are dropped or the log closed, so no group lands after them.
   */
  async drain(): Promise<void> {
    while (this.storing) await this.storing;
  }

  private report(stream: number): void {
    const failure = this.failed.get(stream);
    if (!failure) return;
    this.failed.delete(stream);
    throw failure.error;
  }

  /** Stores the queue a group at a time: each group handed to the log in one go, in order. */
  private async run(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const group = this.queue;
        this.queue = [];
        const stored = group.map((q) =>
          this.failed.has(q.stream) ? Promise.resolve() : this.store(q.stream, q.message),
        );
        const outcomes = await Promise.allSettled(stored);
        outcomes.forEach((o, i) => {
          const { stream } = group[i] as Queued;
          if (o.status === 'rejected' && !this.failed.has(stream))
            this.failed.set(stream, { error: o.reason });
          const left = (this.pending.get(stream) ?? 1) - 1;
          if (left > 0) this.pending.set(stream, left);
          else this.pending.delete(stream);
        });
      }
    } finally {
      this.storing = undefined;
    }
  }
}
