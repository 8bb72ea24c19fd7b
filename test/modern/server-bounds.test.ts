import { describe, expect, it } from 'vitest';
import { CANCEL_METHOD, readCancelKey } from '../../machines/continuity-extension.js';
import { isListenRequest } from '../../machines/listen-wire.js';
import { admitAddressKey } from '../../machines/server/address-keys.js';
import { admitModernId } from '../../machines/server/admission.js';
import { cancelResult, routeKeyedMessage } from '../../machines/server/keyed-plan.js';
import { admitListen, holderOf, resolveLimits, sdkListenBound } from '../../machines/server/limits.js';

/** The pure decisions behind the 2026 server's bounds and the explicit cancel (issue 22 items 1, 4, 6). */

describe('admitListen', () => {
  const limits = resolveLimits({ maxListens: 10, maxListensPerPrincipal: 3, retryAfterSeconds: 4 });
  it('admits below both bounds; a holder at its share gets 429, a full process 503, both with Retry-After', () => {
    expect(admitListen({ listens: 9, listensOfHolder: 2 }, limits)).toEqual({ ok: true });
    expect(admitListen({ listens: 5, listensOfHolder: 3 }, limits)).toMatchObject({
      ok: false,
      status: 429,
      reason: 'max_listens_per_principal',
      code: -32005,
      retryAfterSeconds: 4,
    });
    expect(admitListen({ listens: 10, listensOfHolder: 0 }, limits)).toMatchObject({
      status: 503,
      reason: 'max_listens',
    });
  });
  it("the SDK's own bound is above ours, so it never answers first", () => {
    expect(sdkListenBound(limits)).toBeGreaterThan(limits.maxListens);
    expect(resolveLimits().maxListensPerPrincipal).toBeLessThan(1_024);
  });
  it('holders: a principal, else the address', () => {
    expect(holderOf('alice', '10.0.0.1')).toBe('principal:alice');
    expect(holderOf(undefined, '10.0.0.1')).toBe('address:10.0.0.1');
    expect(isListenRequest({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen' })).toBe(true);
    expect(isListenRequest({ jsonrpc: '2.0', method: 'subscriptions/listen' })).toBe(false);
  });
});

describe('admitAddressKey', () => {
  it('counts running keys and keys inside their window; forgets the rest; Retry-After until the first leaves', () => {
    const keys = new Map([
      ['a', { state: 'running' as const }],
      ['b', { state: 'finished' as const, finishedAt: 1_000 }],
      ['c', { state: 'finished' as const, finishedAt: 100 }],
    ]);
    // Window 1 s at t = 1,200: c left its window (1,100), b leaves at 2,000.
    const full = admitAddressKey(keys, 2, 1_000, 1_200);
    expect(full.expired).toEqual(['c']);
    expect(full.admission).toEqual({ kind: 'full', retryAfterSeconds: 1 });
    expect(admitAddressKey(keys, 3, 1_000, 1_200).admission).toEqual({ kind: 'admit' });
    // Every key running: nothing frees before one finishes and its window passes.
    const running = new Map([['a', { state: 'running' as const }]]);
    expect(admitAddressKey(running, 1, 60_000, 0).admission).toEqual({ kind: 'full', retryAfterSeconds: 60 });
  });
});

describe('admitModernId', () => {
  it('caps a string id at maxRequestIdLength; numbers and absent ids pass', () => {
    expect(admitModernId({ id: 'x'.repeat(256) }, { maxRequestIdLength: 256 })).toEqual({ ok: true });
    expect(admitModernId({ id: 'x'.repeat(257) }, { maxRequestIdLength: 256 })).toMatchObject({
      ok: false,
      status: 400,
      code: -32600,
      reason: 'id_too_long',
    });
    expect(admitModernId({ id: 7 }, { maxRequestIdLength: 1 })).toEqual({ ok: true });
    expect(admitModernId([{ id: 'x'.repeat(300) }], { maxRequestIdLength: 1 })).toEqual({ ok: true });
  });
});

describe('the explicit cancel (§13)', () => {
  const cancel = (params: unknown, id?: string) => ({
    jsonrpc: '2.0' as const,
    ...(id === undefined ? {} : { id }),
    method: CANCEL_METHOD,
    params,
  });
  it('reads the key as a call key is read; a cancel without an id is -32602', () => {
    expect(readCancelKey({ idempotencyKey: 'k-1' }, 255)).toEqual({ kind: 'key', key: 'k-1' });
    expect(readCancelKey({ idempotencyKey: 'k'.repeat(256) }, 255).kind).toBe('invalid');
    expect(readCancelKey({}, 255).kind).toBe('invalid');
    expect(routeKeyedMessage(cancel({ idempotencyKey: 'k-1' }, 'c') as never, 255)).toEqual({
      kind: 'cancel-request',
      key: 'k-1',
      id: 'c',
    });
    expect(routeKeyedMessage(cancel({ idempotencyKey: 'k-1' }) as never, 255)).toMatchObject({
      kind: 'reply',
      reply: { status: 400, error: { code: -32602 } },
    });
  });
  it("answers the key's state after the cancel, or unknown", () => {
    expect(cancelResult(undefined)).toEqual({ resultType: 'complete', keyState: 'unknown' });
    expect(cancelResult({ state: 'cancelled' }).keyState).toBe('cancelled');
    expect(cancelResult({ state: 'committed' }).keyState).toBe('committed');
  });
});
