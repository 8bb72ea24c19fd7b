import { maxEventBytesPerKey } from './keyed-events.js';
import { type MemoEntry, memoExpiresAt } from './keyed-memo.js';
import { KEYED_START_WAIT_MS } from './keyed-plan.js';

/**
 * Every bound and period of the keyed path, with its default: the keyed core (keyed-core.ts) owns each
 * deadline these give (lease renewal, sweep, poll, keep-alive, the starting attempt's wait), so a host
 * only sleeps until the core's next wake-up. Pure.
 */
export interface KeyedLimits {
  readonly maxKeyLength: number;
  readonly maxEntriesPerPrincipal: number;
  readonly maxEntriesPerAddress: number;
  readonly maxEventBytesPerKey: number;
  /** How long this instance's lease lasts; renewed (the lease tick) every third of it. */
  readonly leaseMs: number;
  /** How often an attached response looks at the log and entry without a wake-up. */
  readonly pollMs: number;
  /** An SSE comment on every keyed response this often (0: none). */
  readonly keepAliveMs: number;
  /** How often entries past their window (and their events) are deleted. */
  readonly sweepMs: number;
  /** How long the starting attempt waits for the SDK's first answer (`KEYED_START_WAIT_MS`). */
  readonly startWaitMs: number;
}

/** The limits an application's options give (`undefined`: the default), for a memo of `memoWindowMs`. */
export function keyedLimits(
  options: { readonly [K in keyof KeyedLimits]?: number | undefined },
  memoWindowMs: number,
  defaultMaxKeyLength: number,
): KeyedLimits {
  return {
    maxKeyLength: options.maxKeyLength ?? defaultMaxKeyLength,
    maxEntriesPerPrincipal: options.maxEntriesPerPrincipal ?? 10_000,
    maxEntriesPerAddress: options.maxEntriesPerAddress ?? 1_000,
    maxEventBytesPerKey: maxEventBytesPerKey(options.maxEventBytesPerKey),
    leaseMs: options.leaseMs ?? 10_000,
    pollMs: options.pollMs ?? 250,
    keepAliveMs: options.keepAliveMs ?? 15_000,
    sweepMs: options.sweepMs ?? Math.min(60_000, Math.max(1, memoWindowMs / 4)),
    startWaitMs: options.startWaitMs ?? KEYED_START_WAIT_MS,
  };
}

/** The lease tick's period: a third of the lease, so two ticks may fail before the lease runs out. */
export const leaseTickMs = (leaseMs: number): number => Math.max(1, leaseMs / 3);

/** The longest delay a host timer (`setTimeout`) honours. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A store that forgets entries by itself (the memory memo): how long from `now` until `entry` is forgotten,
 * at the end of its window (0 when that passed; clamped to `MAX_TIMER_MS`, the longest a timer holds);
 * undefined while it runs (no deadline: a running entry is never forgotten).
 */
export function memoForgetDelayMs(
  entry: Pick<MemoEntry, 'state' | 'finishedAt'>,
  memoWindowMs: number,
  now: number,
): number | undefined {
  const at = memoExpiresAt(entry, memoWindowMs);
  return at === undefined ? undefined : Math.min(MAX_TIMER_MS, Math.max(0, at - now));
}

/** What the host does with its one wake-up for the keyed core (`planKeyedWake`). */
export type KeyedWakePlan =
  /** Keep the wake-up it holds: it comes no later than the core's next deadline. */
  | { readonly kind: 'keep' }
  /** Cancel the wake-up it holds, if any; the core has no deadline. */
  | { readonly kind: 'clear' }
  /** Cancel the wake-up it holds, if any, and ask one at `at`, `delayMs` from now. */
  | { readonly kind: 'set'; readonly at: number; readonly delayMs: number };

/**
 * The host's wake-up for the core (`KeyedCore.nextWakeAt`): `held` is when the wake-up it holds fires,
 * `next` the core's next deadline. A deadline that moved later keeps the earlier wake-up: its tick finds
 * nothing due and asks again, which costs less than moving the timer on every fact.
 */
export function planKeyedWake(
  held: number | undefined,
  next: number | undefined,
  now: number,
): KeyedWakePlan {
  if (held !== undefined && next !== undefined && held <= next) return { kind: 'keep' };
  if (next === undefined) return { kind: 'clear' };
  return { kind: 'set', at: next, delayMs: Math.max(0, next - now) };
}
