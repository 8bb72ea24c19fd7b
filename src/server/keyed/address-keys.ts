import {
  type AddressKey,
  admitAddressKey,
  expiredAddressKeys,
} from '../../../machines/server/address-keys.js';
import type { MemoAdmission } from '../../../machines/server/keyed-memo.js';

/**
 * The keys each remote address created in this process, for the per-address bound of a server without
 * `authenticate` (machines/server/address-keys.ts decides). A key is reserved before the memo creates it,
 * released when the memo did not (the key existed, or the memo was full), marked finished when its body
 * ends here, and forgotten once its window passed. Per process, as the 2025 side's count of sessions per
 * address: the memo's own bound is the one that holds across instances.
 */
export class AddressKeys {
  private readonly byAddress = new Map<string, Map<string, AddressKey>>();

  constructor(
    private readonly maxPerAddress: number,
    private readonly memoWindowMs: number,
  ) {}

  /** Reserves `memoKey` for `address` when the address is below its bound; the refusal otherwise. */
  reserve(address: string, memoKey: string, now: number): MemoAdmission {
    const keys = this.byAddress.get(address) ?? new Map<string, AddressKey>();
    const { admission, expired } = admitAddressKey(keys, this.maxPerAddress, this.memoWindowMs, now);
    for (const k of expired) keys.delete(k);
    if (admission.kind === 'admit') keys.set(memoKey, { state: 'running' });
    if (keys.size > 0) this.byAddress.set(address, keys);
    else this.byAddress.delete(address);
    return admission;
  }

  /** The memo did not create the key: the reservation goes. */
  release(address: string, memoKey: string): void {
    const keys = this.byAddress.get(address);
    keys?.delete(memoKey);
    if (keys?.size === 0) this.byAddress.delete(address);
  }

  /** The key's body ended here: its window starts. */
  finished(address: string, memoKey: string, at: number): void {
    const keys = this.byAddress.get(address);
    if (keys?.has(memoKey)) keys.set(memoKey, { state: 'finished', finishedAt: at });
  }

  /** Forgets every key past its window (the runtime's sweep), so idle addresses leave nothing behind. */
  sweep(now: number): void {
    for (const [address, keys] of this.byAddress) {
      for (const k of expiredAddressKeys(keys, this.memoWindowMs, now)) keys.delete(k);
      if (keys.size === 0) this.byAddress.delete(address);
    }
  }

  stats(): { readonly addresses: number; readonly keys: number } {
    let keys = 0;
    for (const k of this.byAddress.values()) keys += k.size;
    return { addresses: this.byAddress.size, keys };
  }
}
