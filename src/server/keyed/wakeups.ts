/**
 * In-process wake-ups for responses attached to a key's log: whoever appends to it or changes its entry
 * rings the log's bell, and every response waiting on it looks again at once. Waiters also look again
 * after `pollMs` without one (another instance's change may not be reported), so a missed ring only
 * delays. No entry outlives its waiters.
 */
export class Wakeups {
  private readonly waiters = new Map<string, Set<() => void>>();

  ring(logId: string): void {
    const set = this.waiters.get(logId);
    if (!set) return;
    this.waiters.delete(logId);
    for (const wake of set) wake();
  }

  /** Resolves at the next ring of `logId`, after `ms`, or when `signal` aborts, whichever is first. */
  wait(logId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiters.get(logId);
      if (!set) {
        set = new Set();
        this.waiters.set(logId, set);
      }
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        const s = this.waiters.get(logId);
        s?.delete(done);
        if (s?.size === 0) this.waiters.delete(logId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** True when a response here is waiting on `logId` (someone is watching the work). */
  waiting(logId: string): boolean {
    return this.waiters.has(logId);
  }

  /** Waiters now (tests: nothing is left behind). */
  get size(): number {
    return this.waiters.size;
  }
}
