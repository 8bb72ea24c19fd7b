import { type AddressKey, admitAddressKey, expiredAddressKeys } from './address-keys.js';
import type { MemoAdmission } from './keyed-memo.js';

/**
 * The keys each remote address created in this process (the keyed core keeps one; pure bookkeeping), for the per-address bound of a server without
 * `authenticate` (machines/server/address-keys.ts decides). A key is reserved before the memo creates it,
 * released when the memo did not (the key existed, or the memo was full), marked finished when its body
 * ends here, and forgotten once its window passed. Per process, as the 2025 side's count of sessions per
 * address: the memo's own bound is the one that holds across instances.
 */
export class AddressKeys {
  private readonly byAddress = new Map<string, Map<string, AddressKey>>();
  /**
   * Per reserved key: attempts between their reservation and the memo's answer, and whether one of them
   * created it. Two attempts of one key from one address race to create it: the loser's release must not
   * take away the winner's reservation (the running key would go uncounted).
   */
  private readonly holds = new Map<string, { pending: number; created: boolean }>();

  constructor(
    private readonly maxPerAddress: number,
    private readonly memoWindowMs: number,
  ) {}

  /** Reserves `memoKey` for `address` when the address is below its bound; the refusal otherwise. */
  reserve(address: string, memoKey: string, now: number): MemoAdmission {
    const keys = this.byAddress.get(address) ?? new Map<string, AddressKey>();
    // Fewer keys held than the bound, expired ones included: admitted whatever their windows, so the
    // address's keys are not scanned on every create (the sweep forgets the expired ones).
    const { admission, expired } =
      keys.size < this.maxPerAddress
        ? BELOW_BOUND
        : admitAddressKey(keys, this.maxPerAddress, this.memoWindowMs, now, memoKey);
    for (const k of expired) this.forget(address, keys, k);
    if (admission.kind === 'admit') {
      if (!keys.has(memoKey)) keys.set(memoKey, { state: 'running' });
      const hold = this.holds.get(holdKey(address, memoKey)) ?? { pending: 0, created: false };
      hold.pending++;
      this.holds.set(holdKey(address, memoKey), hold);
    }
    if (keys.size > 0) this.byAddress.set(address, keys);
    else this.byAddress.delete(address);
    return admission;
  }

  /** The memo created the key under this reservation: it stays until its window passed. */
  created(address: string, memoKey: string): void {
    const hold = this.holds.get(holdKey(address, memoKey));
    if (hold) hold.created = true;
    this.settle(address, memoKey);
  }

  /** The memo did not create the key here: the reservation goes, unless another attempt of it created it. */
  release(address: string, memoKey: string): void {
    this.settle(address, memoKey);
    const hold = this.holds.get(holdKey(address, memoKey));
    if (hold && (hold.created || hold.pending > 0)) return;
    const keys = this.byAddress.get(address);
    if (keys) this.forget(address, keys, memoKey);
    if (keys?.size === 0) this.byAddress.delete(address);
  }

  private settle(address: string, memoKey: string): void {
    const hold = this.holds.get(holdKey(address, memoKey));
    if (hold) hold.pending = Math.max(0, hold.pending - 1);
  }

  private forget(address: string, keys: Map<string, AddressKey>, memoKey: string): void {
    keys.delete(memoKey);
    this.holds.delete(holdKey(address, memoKey));
  }

  /** The key's body ended here: its window starts. */
  finished(address: string, memoKey: string, at: number): void {
    const keys = this.byAddress.get(address);
    if (keys?.has(memoKey)) keys.set(memoKey, { state: 'finished', finishedAt: at });
  }

  /** Forgets every key past its window (the runtime's sweep), so idle addresses leave nothing behind. */
  sweep(now: number): void {
    for (const [address, keys] of this.byAddress) {
      for (const k of expiredAddressKeys(keys, this.memoWindowMs, now)) this.forget(address, keys, k);
      if (keys.size === 0) this.byAddress.delete(address);
    }
  }

  stats(): { readonly addresses: number; readonly keys: number } {
    let keys = 0;
    for (const k of this.byAddress.values()) keys += k.size;
    return { addresses: this.byAddress.size, keys };
  }
}

const BELOW_BOUND = { admission: { kind: 'admit' }, expired: [] } as const;

const holdKey = (address: string, memoKey: string) => `${address}\u0000${memoKey}`;
