/**
 * Writes values one at a time, and only the newest of those that arrived meanwhile: the last one wins. A
 * cursor record superseded before its write started is never written. Used by the transport (for every
 * `CursorStore`) and by `FileCursorStore` (for callers that save without the transport).
 */
export class LatestWrite<T> {
  private pending: { readonly value: T } | undefined;
  private writing: Promise<void> | undefined;

  constructor(private readonly write: (value: T) => Promise<void>) {}

  /** Resolves once `value`, or a newer value, is written; rejects with the error of a write that failed. */
  push(value: T): Promise<void> {
    this.pending = { value };
    this.writing ??= this.drain();
    return this.writing;
  }

  private async drain(): Promise<void> {
    try {
      // A microtask later: the values pushed in the same tick (a burst of events) make one write.
      await undefined;
      while (this.pending) {
        const { value } = this.pending;
        this.pending = undefined;
        await this.write(value);
      }
    } finally {
      this.writing = undefined;
    }
  }
}
