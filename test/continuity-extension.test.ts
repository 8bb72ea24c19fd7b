import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { JsonRpcCode } from '../machines/codes.js';
import {
  CONTINUITY_ERROR_STATUS,
  CONTINUITY_EXTENSION,
  ContinuityErrorCode,
  ContinuityMeta,
  continuityCapability,
  DEFAULT_CONTINUITY_SETTINGS,
  memoKey,
  parseContinuitySettings,
  readContinuityMeta,
  requestFingerprint,
} from '../machines/continuity-extension.js';
import { keyedRequestMachine } from '../machines/server/keyed-request.machine.js';
import { toMermaid } from '../scripts/diagram.js';

/** The `_meta` key format of MCP: an optional reverse-DNS prefix whose labels are letters, digits, hyphens. */
const META_KEY =
  /^(?:[a-zA-Z](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*\/)?[a-zA-Z0-9](?:[a-zA-Z0-9._-]*[a-zA-Z0-9])?$/;

describe('continuity extension names', () => {
  it('the identifier and _meta keys are well-formed and outside the prefixes MCP reserves', () => {
    for (const name of [CONTINUITY_EXTENSION, ...Object.values(ContinuityMeta)]) {
      expect(name).toMatch(META_KEY);
      const second = name.split('/')[0]?.split('.')[1];
      expect(second === 'modelcontextprotocol' || second === 'mcp').toBe(false);
    }
  });

  it('error codes are in the implementation-defined range -32000..-32019, distinct, and not the project’s or SDKs’', () => {
    const codes = Object.values(ContinuityErrorCode);
    expect(new Set(codes).size).toBe(codes.length);
    for (const c of codes) {
      expect(c).toBeGreaterThanOrEqual(-32019);
      expect(c).toBeLessThanOrEqual(-32000);
      expect(Object.values(JsonRpcCode)).not.toContain(c);
      expect([-32000, -32001]).not.toContain(c);
      expect(CONTINUITY_ERROR_STATUS[c]).toBeGreaterThanOrEqual(200);
    }
  });
});

describe('settings in server/discover', () => {
  it('round-trips through capabilities.extensions', () => {
    expect(parseContinuitySettings(continuityCapability(DEFAULT_CONTINUITY_SETTINGS))).toEqual(
      DEFAULT_CONTINUITY_SETTINGS,
    );
  });

  it('absent or malformed settings advertise nothing (the client behaves as without the extension)', () => {
    expect(parseContinuitySettings({})).toBeUndefined();
    expect(parseContinuitySettings({ extensions: { [CONTINUITY_EXTENSION]: {} } })).toBeUndefined();
    const bad = { ...DEFAULT_CONTINUITY_SETTINGS, memoWindowMs: -1 };
    expect(parseContinuitySettings({ extensions: { [CONTINUITY_EXTENSION]: bad } })).toBeUndefined();
    expect(parseContinuitySettings(null)).toBeUndefined();
    const tiny = { ...DEFAULT_CONTINUITY_SETTINGS, maxKeyLength: 63 };
    expect(parseContinuitySettings({ extensions: { [CONTINUITY_EXTENSION]: tiny } })).toBeUndefined();
  });
});

describe('reading a request _meta', () => {
  const meta = (m: Record<string, unknown>) => ({ name: 'charge', arguments: {}, _meta: m });

  it('no key: the request follows the core spec (close = cancel)', () => {
    expect(readContinuityMeta({ name: 'charge' }, 255)).toEqual({ kind: 'unkeyed' });
    expect(readContinuityMeta(undefined, 255)).toEqual({ kind: 'unkeyed' });
  });

  it('a first attempt, a re-issue that saw nothing (null), a re-issue with its last event id', () => {
    expect(readContinuityMeta(meta({ [ContinuityMeta.idempotencyKey]: 'k-1' }), 255)).toEqual({
      kind: 'keyed',
      key: 'k-1',
      reissue: false,
    });
    const none = meta({ [ContinuityMeta.idempotencyKey]: 'k-1', [ContinuityMeta.lastEventId]: null });
    expect(readContinuityMeta(none, 255)).toEqual({ kind: 'keyed', key: 'k-1', reissue: true });
    const seen = meta({ [ContinuityMeta.idempotencyKey]: 'k-1', [ContinuityMeta.lastEventId]: 'e-1-4' });
    expect(readContinuityMeta(seen, 255)).toEqual({
      kind: 'keyed',
      key: 'k-1',
      reissue: true,
      lastEventId: 'e-1-4',
    });
  });

  it.each([
    ['empty key', { [ContinuityMeta.idempotencyKey]: '' }],
    ['non-string key', { [ContinuityMeta.idempotencyKey]: 42 }],
    ['too long', { [ContinuityMeta.idempotencyKey]: 'x'.repeat(256) }],
    ['a space', { [ContinuityMeta.idempotencyKey]: 'a b' }],
    ['non-ASCII', { [ContinuityMeta.idempotencyKey]: 'clé' }],
    ['a last event id without a key', { [ContinuityMeta.lastEventId]: 'e-1-1' }],
    ['a non-string last event id', { [ContinuityMeta.idempotencyKey]: 'k', [ContinuityMeta.lastEventId]: 5 }],
  ])('invalid: %s', (_why, m) => {
    expect(readContinuityMeta(meta(m), 255).kind).toBe('invalid');
  });

  it('only tools/call is keyed (version 1); other methods ignore the key', () => {
    const m = meta({ [ContinuityMeta.idempotencyKey]: 'k-1' });
    expect(readContinuityMeta(m, 255, 'tools/call').kind).toBe('keyed');
    expect(readContinuityMeta(m, 255, 'resources/read')).toEqual({ kind: 'unkeyed' });
  });

  it('the length limit is the advertised one', () => {
    expect(readContinuityMeta(meta({ [ContinuityMeta.idempotencyKey]: 'x'.repeat(255) }), 255).kind).toBe(
      'keyed',
    );
    expect(readContinuityMeta(meta({ [ContinuityMeta.idempotencyKey]: 'x'.repeat(17) }), 16).kind).toBe(
      'invalid',
    );
  });
});

describe('key scope and request identity', () => {
  it('a key is scoped by principal, and no pair spells another', () => {
    expect(memoKey('alice', 'k')).not.toBe(memoKey('bob', 'k'));
    expect(memoKey('a|b', 'c')).not.toBe(memoKey('a', 'b|c'));
  });

  it('the fingerprint ignores _meta and key order, and sees every argument', () => {
    const a = requestFingerprint('tools/call', {
      name: 'charge',
      arguments: { amount: 5, currency: 'EUR' },
      _meta: { [ContinuityMeta.idempotencyKey]: 'k', traceparent: '00-1' },
    });
    const b = requestFingerprint('tools/call', {
      _meta: { [ContinuityMeta.lastEventId]: null },
      arguments: { currency: 'EUR', amount: 5 },
      name: 'charge',
    });
    expect(a).toBe(b);
    expect(
      requestFingerprint('tools/call', { name: 'charge', arguments: { amount: 6, currency: 'EUR' } }),
    ).not.toBe(a);
    expect(
      requestFingerprint('tools/call', { name: 'refund', arguments: { amount: 5, currency: 'EUR' } }),
    ).not.toBe(a);
    expect(
      requestFingerprint('resources/read', { name: 'charge', arguments: { amount: 5, currency: 'EUR' } }),
    ).not.toBe(a);
  });
});

describe('docs/continuity-extension.md', () => {
  it('shows the current diagram of the keyed request machine', () => {
    const doc = readFileSync(new URL('../docs/continuity-extension.md', import.meta.url), 'utf8');
    const between =
      /<!-- keyed-request diagram: begin -->\n```mermaid\n([\s\S]*?)```\n<!-- keyed-request diagram: end -->/.exec(
        doc,
      );
    expect(between?.[1]?.trimEnd()).toBe(toMermaid(keyedRequestMachine).trimEnd());
  });

  it('names every wire constant the code uses', () => {
    const doc = readFileSync(new URL('../docs/continuity-extension.md', import.meta.url), 'utf8');
    for (const name of [
      CONTINUITY_EXTENSION,
      ...Object.values(ContinuityMeta),
      ...Object.keys(DEFAULT_CONTINUITY_SETTINGS),
    ]) {
      expect(doc).toContain(`\`${name}\``);
    }
    for (const code of Object.values(ContinuityErrorCode)) {
      expect(doc).toMatch(new RegExp(`\\| ${code} \\| \`\\w+\` \\| ${CONTINUITY_ERROR_STATUS[code]} \\|`));
    }
  });
});
