import { admitNewKey, type MemoAdmission, memoExpired } from './keyed-memo.js';

/**
 * The per-address bound on idempotency keys (docs/continuity-extension.md §6) for a server without
 * `authenticate`. There every caller is one principal (the empty string), so the memo's per-principal bound
 * is one bound for everyone: one address filling it would refuse every other address for a whole memo
 * window. Each address is therefore held to its own share first, as the 2025 side holds each address to its
 * share of sessions; the per-principal bound stays as the last resort. Pure: the runtime keeps, per address,
 * the keys it created (`AddressKey`), and this decides.
 */

/** A key one address created in this process: running, or finished at `finishedAt` (its window started). */
export interface AddressKey {
  readonly state: 'running' | 'finished';
  readonly finishedAt?: number;
}

export interface AddressKeysAdmission {
  /** Admit (the key is reserved for the address), or 429 with the time until the first key leaves its window. */
  readonly admission: MemoAdmission;
  /** The address's keys that left their window by `now`: the runtime forgets them. */
  readonly expired: readonly string[];
}

/**
 * May `address` create one more key? `keys`: the keys it created here, by memo key. A key that left its
 * window no longer counts; running keys and keys inside their window are never forgotten to make room.
 */
export function admitAddressKey(
  keys: ReadonlyMap<string, AddressKey>,
  maxPerAddress: number,
  memoWindowMs: number,
  now: number,
  /** The key asked for: another attempt of a key the address already holds is not one more key. */
  memoKey?: string,
): AddressKeysAdmission {
  const live: AddressKey[] = [];
  const expired: string[] = [];
  let held = false;
  for (const [k, key] of keys) {
    if (memoExpired(stored(key), memoWindowMs, now)) expired.push(k);
    else {
      live.push(key);
      if (k === memoKey) held = true;
    }
  }
  const admission = held
    ? ({ kind: 'admit' } as const)
    : admitNewKey(live.map(stored), maxPerAddress, memoWindowMs, now);
  return { admission, expired };
}

/** The keys of `keys` that left their window by `now` (the periodic sweep of every address). */
export function expiredAddressKeys(
  keys: ReadonlyMap<string, AddressKey>,
  memoWindowMs: number,
  now: number,
): string[] {
  return [...keys].filter(([, key]) => memoExpired(stored(key), memoWindowMs, now)).map(([k]) => k);
}

/** An address key as the memo's rules read an entry: `finished` is any state past running. */
const stored = (key: AddressKey) =>
  key.state === 'running'
    ? { state: 'running' as const }
    : { state: 'committed' as const, finishedAt: key.finishedAt ?? 0 };
