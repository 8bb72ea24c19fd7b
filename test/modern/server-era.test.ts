import { fc, test } from '@fast-check/vitest';
import { isLegacyRequest } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import {
  classifyEra,
  type EraFacts,
  handsToKeyed,
  PROTOCOL_VERSION_META_KEY,
  routeByEra,
  streamsUnkeyedCall,
} from '../../machines/server/era.js';

/** The official v2 server's predicate on the same facts, through a real Request. */
async function sdkSaysLegacy(
  facts: EraFacts,
  headers: Record<string, string>,
  text?: string,
): Promise<boolean> {
  const init: RequestInit = { method: facts.method, headers };
  if (facts.method === 'POST') init.body = text ?? '';
  return isLegacyRequest(new Request('http://127.0.0.1/mcp', init));
}

const V = PROTOCOL_VERSION_META_KEY;
const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const envelope = (version: unknown, extra: Record<string, unknown> = {}) => ({
  [V]: version,
  [CAPS]: {},
  ...extra,
});

const version = fc.constantFrom(
  '2026-07-28',
  '2025-11-25',
  '2025-06-18',
  '2025-03-26',
  '2027-01-01',
  'garbage',
  '9',
  '',
);
const meta = fc.oneof(
  fc.constant(undefined),
  fc.constant({}),
  fc.constant({ progressToken: 1 }),
  fc.constant({ progressToken: 1.5 }),
  fc.constant({ progressToken: 'p' }),
  version.map((v) => envelope(v)),
  version.map((v) => ({ [V]: v })),
  fc.constant({ [V]: 7 }),
  version.map((v) => envelope(v, { 'io.modelcontextprotocol/clientInfo': { name: 'c', version: '1' } })),
  version.map((v) => envelope(v, { 'io.modelcontextprotocol/logLevel': 'nope' })),
  version.map((v) => ({ [V]: v, [CAPS]: 'x' })),
  fc.constant('not an object'),
);
const params = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.constant([]),
  fc.tuple(meta, fc.constantFrom('a', undefined)).map(([m, name]) => ({
    ...(name === undefined ? {} : { name }),
    ...(m === undefined ? {} : { _meta: m }),
  })),
);
const method = fc.constantFrom(
  'initialize',
  'tools/call',
  'tools/list',
  'server/discover',
  'notifications/cancelled',
);
const id = fc.constantFrom<unknown>(1, 'x', 1.5, null, undefined);
const message = fc.oneof(
  fc.record({ jsonrpc: fc.constantFrom('2.0', '1.0'), id, method, params }, { requiredKeys: ['jsonrpc'] }),
  fc.record({ jsonrpc: fc.constant('2.0'), id: fc.constant(1), result: fc.constantFrom({}, 3) }),
  fc.record({ jsonrpc: fc.constant('2.0'), id, error: fc.constant({ code: -1, message: 'm' }) }),
  fc.record({ jsonrpc: fc.constant('2.0'), id: fc.constant(1), method, extra: fc.constant(true) }),
  fc.constantFrom(3, 'text', null, true),
);
const body = fc.oneof(
  { weight: 6, arbitrary: message.map((m) => JSON.stringify(m)) },
  { weight: 2, arbitrary: fc.array(message, { maxLength: 3 }).map((m) => JSON.stringify(m)) },
  { weight: 1, arbitrary: fc.constantFrom('', '{', 'not json', '   ') },
);
const headerVersion = fc.option(
  fc.oneof(
    version,
    version.map((v) => ` ${v}\t`),
  ),
  { nil: undefined },
);

describe('era: our rule is the official v2 server predicate', () => {
  test.prop([fc.constantFrom('POST', 'POST', 'POST', 'GET', 'DELETE'), headerVersion, body], {
    numRuns: 400,
  })(
    'classifyEra(request) is modern exactly when isLegacyRequest(request) is false',
    async (httpMethod, header, text) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (header !== undefined) headers['mcp-protocol-version'] = header;
      let parsed: unknown;
      try {
        parsed = text.trim() === '' ? undefined : JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const facts: EraFacts = { method: httpMethod, protocolVersion: header ?? null, body: parsed };
      const ours = classifyEra(facts).era === 'legacy';
      expect(ours).toBe(await sdkSaysLegacy(facts, headers, text));
    },
  );
});

describe('era: one row per case', () => {
  const modernMeta = { _meta: envelope('2026-07-28') };
  const rows: [string, EraFacts, string][] = [
    ['GET (2025 standalone stream or resume)', { method: 'GET', protocolVersion: '2025-11-25' }, 'legacy'],
    ['DELETE (2025 session end)', { method: 'DELETE', protocolVersion: null }, 'legacy'],
    [
      'GET with a modern header is still a session operation',
      { method: 'GET', protocolVersion: '2026-07-28' },
      'legacy',
    ],
    ['POST, body not JSON', { method: 'POST', protocolVersion: null, body: undefined }, 'legacy'],
    [
      'initialize (2025 handshake)',
      {
        method: 'POST',
        protocolVersion: null,
        body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} },
      },
      'legacy',
    ],
    [
      'initialize under a modern header',
      {
        method: 'POST',
        protocolVersion: '2026-07-28',
        body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} },
      },
      'modern:modern-header',
    ],
    [
      'a 2025 request in a session',
      {
        method: 'POST',
        protocolVersion: '2025-11-25',
        body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      },
      'legacy',
    ],
    [
      'a posted response',
      { method: 'POST', protocolVersion: '2025-11-25', body: { jsonrpc: '2.0', id: 2, result: {} } },
      'legacy',
    ],
    [
      'a 2026 request (claim and header)',
      {
        method: 'POST',
        protocolVersion: '2026-07-28',
        body: { jsonrpc: '2.0', id: 3, method: 'tools/list', params: modernMeta },
      },
      'modern:claim',
    ],
    [
      'a claim without the header (the modern path answers -32020)',
      {
        method: 'POST',
        protocolVersion: null,
        body: { jsonrpc: '2.0', id: 3, method: 'tools/list', params: modernMeta },
      },
      'modern:claim',
    ],
    [
      'a claim naming a 2025 version (the modern path answers -32022)',
      {
        method: 'POST',
        protocolVersion: null,
        body: { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: envelope('2025-11-25') } },
      },
      'modern:claim',
    ],
    [
      'a modern header without the envelope (-32602)',
      {
        method: 'POST',
        protocolVersion: '2026-07-28',
        body: { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      },
      'modern:modern-header',
    ],
    [
      'a 2026 notification',
      {
        method: 'POST',
        protocolVersion: '2026-07-28',
        body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: modernMeta },
      },
      'modern:claim',
    ],
    [
      'a 2025 batch',
      { method: 'POST', protocolVersion: null, body: [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }] },
      'legacy',
    ],
    ['an empty batch', { method: 'POST', protocolVersion: null, body: [] }, 'modern:malformed'],
    [
      'JSON that is no message',
      { method: 'POST', protocolVersion: null, body: { hello: 1 } },
      'modern:malformed',
    ],
  ];
  for (const [name, facts, expected] of rows) {
    it(name, async () => {
      const era = classifyEra(facts);
      expect(era.era === 'legacy' ? 'legacy' : `modern:${era.reason}`).toBe(expected);
      const text = facts.body === undefined ? 'not json' : JSON.stringify(facts.body);
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (facts.protocolVersion !== null) headers['mcp-protocol-version'] = facts.protocolVersion;
      expect(await sdkSaysLegacy(facts, headers, text)).toBe(expected === 'legacy');
    });
  }
});

describe('handsToKeyed: only calls whose standard headers agree reach the keyed hook', () => {
  const meta = { _meta: envelope('2026-07-28') };
  const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'charge', ...meta } };
  const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, ...meta } };
  const h = (o: Record<string, string>) => new Headers(o);
  const good = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'charge' };
  it.each([
    ['a call with agreeing headers', call, good, true],
    [
      'Mcp-Name in the Base64 sentinel form',
      call,
      { ...good, 'mcp-name': `=?base64?${btoa('charge')}?=` },
      true,
    ],
    ['Mcp-Name disagreeing', call, { ...good, 'mcp-name': 'other' }, false],
    ['Mcp-Method missing', call, { 'mcp-protocol-version': '2026-07-28', 'mcp-name': 'charge' }, false],
    ['version header disagreeing', call, { ...good, 'mcp-protocol-version': '2027-01-01' }, false],
    [
      'tools/list is not for the hook',
      { ...call, method: 'tools/list' },
      { ...good, 'mcp-method': 'tools/list' },
      false,
    ],
    ['a cancellation with no standard headers', cancel, {}, true],
    ['a cancellation whose Mcp-Method disagrees', cancel, { 'mcp-method': 'tools/call' }, false],
    ['a cancellation without the envelope', { ...cancel, params: { requestId: 1 } }, {}, false],
  ])('%s', (_name, body, headers, expected) => {
    expect(handsToKeyed(body, h(headers))).toBe(expected);
  });
});

describe('routeByEra: where a POST goes once its era is known', () => {
  const call = (meta: object | undefined) => ({
    method: 'POST',
    protocolVersion: '2026-07-28',
    body: { jsonrpc: '2.0', id: 7, method: 'tools/list', params: meta ? { _meta: meta } : {} },
  });
  const modernMeta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  const legacy = {
    method: 'POST',
    protocolVersion: '2025-11-25',
    body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} },
  };
  it('modern with a modern server; -32022 naming the supported versions without one; 2025 stays 2025', () => {
    expect(routeByEra(call(modernMeta), true, ['2025-11-25'])).toEqual({ kind: 'modern' });
    expect(routeByEra(call(modernMeta), false, ['2025-11-25'])).toMatchObject({
      kind: 'unsupported',
      status: 400,
      body: { id: 7, error: { code: -32022, data: { supported: ['2025-11-25'], requested: '2026-07-28' } } },
    });
    expect(routeByEra(legacy, true, ['2025-11-25'])).toEqual({ kind: 'legacy' });
    expect(routeByEra(legacy, false, ['2025-11-25'])).toEqual({ kind: 'legacy' });
  });
});

describe('streamsUnkeyedCall: with the extension, an unkeyed tools/call is answered as a stream (keep-alives)', () => {
  it.each([
    [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'lookup' } }, true],
    [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }, false],
    [{ jsonrpc: '2.0', method: 'tools/call' }, false],
    [[{ jsonrpc: '2.0', id: 1, method: 'tools/call' }], false],
    [null, false],
  ])('%j → %s', (body, expected) => {
    expect(streamsUnkeyedCall(body, 15_000)).toBe(expected);
    // Without keep-alives a stream gains nothing: the application's mode stands.
    expect(streamsUnkeyedCall(body, 0)).toBe(false);
  });
});
