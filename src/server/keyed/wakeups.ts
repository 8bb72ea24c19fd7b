/**
 * In-process wake-ups for responses attached to a key's log: whoever appends to it or changes its entry
 * rings the log's bell, and every response waiting on it looks again at once. Waiters also look again
 * after `pollMs` without one (another instance's change may not be reported), so a missed ring only
 * delays. No entry outlives its waiters.
 */
export class Wakeups {
  private readonly waiting = new Map<string, Set<() => void>>();

  ring(logId: string): void {
    const set = this.waiting.get(logId);
    if (!set) return;
    this.waiting.delete(logId);
    for (const wake of set) wake();
  }

  /** Resolves at the next ring of `logId`, after `ms`, or when `signal` aborts, whichever is first. */
  wait(logId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiting.get(logId);
      if (!set) {
        set = new Set();
        this.waiting.set(logId, set);
      }
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        const s = this.waiting.get(logId);
        s?.delete(done);
        if (s?.size === 0) this.waiting.delete(logId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Waiters now (tests: nothing is left behind). */
  get size(): number {
    return this.waiting.size;
  }
}
