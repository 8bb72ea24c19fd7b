import { describe, expect, it } from 'vitest';
import { admitAddressKey } from '../../machines/server/address-keys.js';
import { AddressKeys } from '../../machines/server/keyed-address-book.js';

/**
 * Two attempts of one key from one address race to create it (a re-issue crossing the first attempt): the
 * key is one key for the address's bound, and the loser's release does not take away the winner's
 * reservation (review finding: the running key went uncounted, so an address could pass its bound).
 */
describe('per-address keys under a same-key race', () => {
  it('an address at its bound may still send another attempt of a key it holds', () => {
    const keys = new Map([['k1', { state: 'running' as const }]]);
    expect(admitAddressKey(keys, 1, 60_000, 0, 'k2').admission.kind).toBe('full');
    expect(admitAddressKey(keys, 1, 60_000, 0, 'k1').admission.kind).toBe('admit');
  });

  it.each([
    ['the winner answers first', ['created', 'release'] as const],
    ['the loser answers first', ['release', 'created'] as const],
  ])('the key stays counted once when %s', (_, order) => {
    const held = new AddressKeys(2, 60_000);
    expect(held.reserve('a', 'k', 0).kind).toBe('admit');
    expect(held.reserve('a', 'k', 0).kind).toBe('admit');
    for (const step of order) held[step === 'created' ? 'created' : 'release']('a', 'k');
    expect(held.stats()).toEqual({ addresses: 1, keys: 1 });
    // The bound still holds: one more key fits, the next does not.
    expect(held.reserve('a', 'k2', 0).kind).toBe('admit');
    held.created('a', 'k2');
    expect(held.reserve('a', 'k3', 0).kind).toBe('full');
  });

  it('a reservation no attempt created goes, and the address with it', () => {
    const held = new AddressKeys(2, 60_000);
    held.reserve('a', 'k', 0);
    held.release('a', 'k');
    expect(held.stats()).toEqual({ addresses: 0, keys: 0 });
  });
});
