/**
 * A discrete-event virtual clock. XState actors take it as their `clock`, and the simulated network and
 * tools schedule on it too, so one ordering governs every timer in the world: earliest first, ties in
 * the order they were set. Nothing here reads real time.
 */
export class VirtualClock {
  private current = 0;
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  /** Upper bound on timers fired by one `runUntil`, so a livelock fails loudly instead of spinning. */
  static readonly MAX_FIRINGS = 200_000;

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): number {
    const id = this.nextId++;
    this.timers.set(id, { at: this.current + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(id: unknown): void {
    this.timers.delete(id as number);
  }

  /** Fires every timer due at or before `until`, each at its own time, then sets the clock to `until`. */
  runUntil(until: number): void {
    let fired = 0;
    for (;;) {
      const next = this.nextDue(until);
      if (!next) break;
      if (++fired > VirtualClock.MAX_FIRINGS)
        throw new Error(`livelock: over ${VirtualClock.MAX_FIRINGS} timers`);
      this.timers.delete(next.id);
      this.current = next.at;
      next.fn();
    }
    this.current = Math.max(this.current, until);
  }

  runFor(ms: number): void {
    this.runUntil(this.current + ms);
  }

  private nextDue(until: number): { id: number; at: number; fn: () => void } | undefined {
    let best: { id: number; at: number; fn: () => void } | undefined;
    for (const [id, t] of this.timers) {
      if (t.at > until) continue;
      if (!best || t.at < best.at || (t.at === best.at && id < best.id)) best = { id, ...t };
    }
    return best;
  }
}
