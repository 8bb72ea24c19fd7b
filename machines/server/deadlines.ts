/**
 * Every deadline of the 2025 server, decided here: how often sessions are swept, leases renewed, logs
 * aged, streams heartbeaten and polled; when an idle session sleeps and when a sleeping one wakes; when a
 * paced reader that takes nothing is cut. The I/O shell (src/server/wake-port.ts) keeps one timer per
 * host: it asks {@link DeadlineQueue.next} when to wake, sleeps until then, and hands the queue "it is now
 * T" (`due`). The simulated world (properties/world/server.ts) does the same on its virtual clock.
 */

/** The longest delay a Node timer honours; a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * The session sweep: idle sessions go to sleep, and sleeping ones whose TTL ran out are woken so their
 * machine expires them. Expiry is late by one period at most, so the period is a quarter of the TTL,
 * between 10 ms and 1 s.
 */
export const sweepPeriodMs = (idleTtlMs: number): number => Math.max(10, Math.min(1_000, idleTtlMs / 4));

/**
 * Shared store: the lease is renewed three times per lease (it survives one or two missed beats: a GC
 * pause, a slow Redis), and at least four times per idle TTL (busy sessions are touched as often, so no
 * other instance expires them). Never more often than every 50 ms.
 */
export const leaseRenewPeriodMs = (leaseMs: number, idleTtlMs: number): number =>
  Math.max(50, Math.min(leaseMs / 3, idleTtlMs / 4));

/**
 * Shared store: a stream attached here whose events come from another instance is also read this often,
 * in case a change report went missing. Without a shared store: never (0).
 */
export const sharedPollMs = (sharedStore: boolean, given: number | undefined): number =>
  sharedStore ? (given ?? 1_000) : 0;

/** What the Redis change-feed reader waits for next: one blocking read, or a pause after a failed one. */
export type FeedWait =
  | { readonly kind: 'block'; readonly ms: number }
  | { readonly kind: 'pause'; readonly ms: number };

/**
 * Shared store (Redis): how long the change-feed reader waits. A blocking read waits 1 s at most, so a
 * stopped reader notices within a second; after a failed read (Redis restarting, say: the client
 * reconnects by itself) it pauses a quarter of that before it looks again, not spinning on the error.
 */
export const feedReaderWait = (lastReadFailed: boolean): FeedWait =>
  lastReadFailed ? { kind: 'pause', ms: FEED_BLOCK_MS / 4 } : { kind: 'block', ms: FEED_BLOCK_MS };

const FEED_BLOCK_MS = 1_000;

/**
 * The memory log's sweep, which ages streams nobody touches: a quarter of the retention, at least 1 s
 * (unless `given`), never past what a timer honours.
 */
export const logSweepPeriodMs = (retentionMs: number, given: number | undefined): number =>
  Math.min(given ?? Math.max(1_000, retentionMs / 4), MAX_TIMER_MS);

/**
 * A request the SDK left unanswered gets an answer from the machine (outcome unknown, Invalid Request,
 * Internal error); when the log refuses that answer too, its stream ends with nothing stored and a
 * resume of it would wait for an answer nobody writes. So the answer is stored again after this wait:
 * doubling from 250 ms to 8 s; `undefined` once the session has ended (no one will resume it), or after
 * `UNSTORED_ANSWER_ATTEMPTS` tries, about 30 s in all (given up: the client's request timeout ends the call).
 */
export function unstoredAnswerRetryMs(attempt: number, sessionEnded: boolean): number | undefined {
  if (sessionEnded || attempt >= UNSTORED_ANSWER_ATTEMPTS) return undefined;
  return Math.min(8_000, 250 * 2 ** attempt);
}

export const UNSTORED_ANSWER_ATTEMPTS = 7;

/** What the sweep does with one session. */
export type SweepVerdict = 'sleep' | 'wake' | 'stay';

/** What the sweep knows of one session. */
export interface SweepFacts {
  readonly now: number;
  /** When the session was last used (here, or on another instance): its idle clock. */
  readonly lastUsed: number;
  readonly asleep: boolean;
  /** How long unused before it sleeps (the sweep period). */
  readonly idleForMs: number;
  readonly idleTtlMs: number;
  /** Something is attached or running here. */
  readonly busy: boolean;
  /** The machine is in `live.idle` (not waiting on a store, not settling). */
  readonly machineIdle: boolean;
}

/**
 * A session unused for `idleForMs`, with nothing attached or running and an idle machine, sleeps (it is
 * kept only as its persisted snapshot). A sleeping one past its TTL wakes, so its machine decides the
 * expiry (`session.woken`). Anything else stays as it is.
 */
export function sweepVerdict(f: SweepFacts): SweepVerdict {
  if (f.asleep) return f.now - f.lastUsed >= f.idleTtlMs ? 'wake' : 'stay';
  if (f.busy || !f.machineIdle || f.now - f.lastUsed < f.idleForMs) return 'stay';
  return 'sleep';
}

/** How long a woken session was asleep for its machine: its idle clock goes on from its last use. */
export const sleptFor = (now: number, lastUsed: number): number => Math.max(0, now - lastUsed);

/** What a paced reader's stall check decides, `stallMs` after producers began to wait. */
export type StallVerdict = 'released' | 'watch-again' | 'cut';

/**
 * Producers wait while the reader is behind; every `stallMs` the backlog is looked at again. Nobody waits
 * any more: done. It shrank: the reader is slow but reading, watch again. It did not: the reader is cut
 * (its response ends; the client resumes from the log), which releases the producers.
 */
export function stallVerdict(waiting: boolean, backlogBefore: number, backlogNow: number): StallVerdict {
  if (!waiting) return 'released';
  return backlogNow < backlogBefore ? 'watch-again' : 'cut';
}

/**
 * The wake-ups a host asked for, earliest first (ties in the order asked): a binary heap, so a host with
 * thousands of streams (a heartbeat each) pays O(log n) per wake-up. Pure bookkeeping: it never reads a
 * clock; it is told the time.
 */
export class DeadlineQueue<K> {
  private readonly heap: Array<{ at: number; order: number; key: K }> = [];
  private order = 0;

  get size(): number {
    return this.heap.length;
  }

  /** Asks to be woken for `key` at `at`. */
  add(at: number, key: K): void {
    const entry = { at, order: this.order++, key };
    this.heap.push(entry);
    this.up(this.heap.length - 1);
  }

  /** When the host must wake next; undefined when nothing is asked for. */
  next(): number | undefined {
    return this.heap[0]?.at;
  }

  /** The earliest key, without removing it. */
  peek(): K | undefined {
    return this.heap[0]?.key;
  }

  /** Removes the earliest key (one cancelled before it came due, say). */
  shift(): void {
    this.pop();
  }

  /** It is now `now`: the keys due, in order, removed from the queue. */
  due(now: number): K[] {
    const out: K[] = [];
    for (let top = this.heap[0]; top !== undefined && top.at <= now; top = this.heap[0]) {
      out.push(top.key);
      this.pop();
    }
    return out;
  }

  private pop(): void {
    const last = this.heap.pop();
    if (last === undefined || this.heap.length === 0) return;
    this.heap[0] = last;
    this.down(0);
  }

  private before(a: number, b: number): boolean {
    const x = this.heap[a] as { at: number; order: number };
    const y = this.heap[b] as { at: number; order: number };
    return x.at < y.at || (x.at === y.at && x.order < y.order);
  }

  private swap(a: number, b: number): void {
    const t = this.heap[a] as (typeof this.heap)[number];
    this.heap[a] = this.heap[b] as (typeof this.heap)[number];
    this.heap[b] = t;
  }

  private up(i: number): void {
    for (let c = i; c > 0; ) {
      const p = (c - 1) >> 1;
      if (!this.before(c, p)) return;
      this.swap(c, p);
      c = p;
    }
  }

  private down(i: number): void {
    const n = this.heap.length;
    for (let p = i; ; ) {
      const l = 2 * p + 1;
      const r = l + 1;
      let m = p;
      if (l < n && this.before(l, m)) m = l;
      if (r < n && this.before(r, m)) m = r;
      if (m === p) return;
      this.swap(p, m);
      p = m;
    }
  }
}
