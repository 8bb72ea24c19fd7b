import { DeadlineQueue, MAX_TIMER_MS } from '../../machines/server/deadlines.js';

/** A wake-up asked for; `cancel` makes it never fire (or fire no more, for a periodic one). */
export interface Wake {
  cancel(): void;
}

interface Entry {
  /** Replaced by `NOTHING` when cancelled: see `ask`. */
  fn: (now: number) => void;
  /** For a periodic wake-up: asked again this long after each firing. */
  readonly periodMs?: number;
  cancelled: boolean;
}

const NOTHING = (): void => undefined;

/**
 * The timer port of one host: every deadline of the 2025 server (sweeps, lease renewals, heartbeats,
 * polls, stall cuts; their periods are decided in machines/server/deadlines.ts) is a wake-up asked of
 * it, and it holds ONE Node timer, set for the earliest of them. When it fires it tells each wake-up that
 * is due "it is now T". The timer never keeps the process alive (`unref`).
 */
export class WakePort {
  private readonly queue = new DeadlineQueue<Entry>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;

  constructor(
    /** Called with what a woken callback threw; the other wake-ups still run. */
    private readonly onError: (error: unknown) => void = (e) => console.error('mcp-continuity:', e),
    /** The host's clock: the "now" every wake-up and the session idle clocks read. */
    readonly now: () => number = () => Date.now(),
  ) {}

  /** Whether its timer would keep the process alive (never: it is unref'd); undefined without a timer. For tests. */
  hasRef(): boolean | undefined {
    return this.timer?.hasRef?.();
  }

  /** Wakes `fn` once, `ms` from now. */
  after(ms: number, fn: (now: number) => void): Wake {
    return this.ask(this.now() + Math.max(0, ms), { fn, cancelled: false });
  }

  /** Wakes `fn` every `periodMs` (each time `periodMs` after the previous firing) until cancelled. */
  every(periodMs: number, fn: (now: number) => void): Wake {
    return this.ask(this.now() + periodMs, { fn, periodMs, cancelled: false });
  }

  private ask(at: number, entry: Entry): Wake {
    this.queue.add(at, entry);
    this.arm();
    return {
      cancel: () => {
        entry.cancelled = true;
        // A cancelled wake-up stays queued until it comes due (a heartbeat's: 15 s) unless it is the
        // earliest; what it would have called must not be kept alive that long (a call's response, its
        // attachment: kilobytes per call, and per idle session, docs/benchmarks.md rows 2 and 4).
        entry.fn = NOTHING;
        this.prune();
      },
    };
  }

  /** Drops cancelled wake-ups from the front, so a host with none left holds no timer. */
  private prune(): void {
    while (this.queue.peek()?.cancelled) this.queue.shift();
    this.arm();
  }

  /** One timer, for the earliest wake-up (cancelled ones are dropped when they come due). */
  private arm(): void {
    const next = this.queue.next();
    if (next === undefined) {
      this.disarm();
      return;
    }
    if (this.timer !== undefined && this.timerAt <= next) return;
    this.disarm();
    this.timerAt = next;
    this.timer = setTimeout(() => this.fire(), Math.min(Math.max(0, next - this.now()), MAX_TIMER_MS));
    this.timer.unref?.();
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.now();
    for (const entry of this.queue.due(now)) {
      if (entry.cancelled) continue;
      try {
        entry.fn(now);
      } catch (error) {
        this.onError(error);
      }
      if (entry.periodMs !== undefined && !entry.cancelled) this.queue.add(now + entry.periodMs, entry);
    }
    this.arm();
  }
}

/**
 * The port of code that runs outside any server (a `toResponse` or `writeNodeResponse` called on its
 * own, a `MemoryEventLog` made by the application): the process is their host.
 */
export const processWakes = new WakePort();
