import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admitBody, parseBody } from '../../machines/server/admission.js';
import { checkMessageShape, exceedsJsonDepth } from '../../machines/server/message-shape.js';

/**
 * Admission must refuse exactly what the SDK's schema drops: a message we pass and the SDK drops is never
 * answered (its session stays busy); one we refuse and the SDK takes is a client we fail for nothing.
 */
const oneOf = <T>(...values: T[]) => fc.constantFrom(...values);
const scalar = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  oneOf(2 ** 53, -(2 ** 53), 1.5, 0, -1),
  fc.string({ maxLength: 4 }),
  fc.boolean(),
  fc.constant(null),
);
const anyValue = fc.oneof(
  scalar,
  fc.array(scalar, { maxLength: 2 }),
  fc.dictionary(fc.string({ maxLength: 3 }), scalar, { maxKeys: 2 }),
);
const meta = fc.oneof(
  anyValue,
  fc.record(
    {
      progressToken: fc.oneof(scalar, fc.string()),
      'io.modelcontextprotocol/related-task': fc.oneof(anyValue, fc.record({ taskId: scalar })),
      other: anyValue,
    },
    { requiredKeys: [] },
  ),
);
const params = fc.oneof(anyValue, fc.record({ _meta: meta, name: anyValue }, { requiredKeys: [] }));
const validId = fc.oneof(fc.integer(), fc.string({ maxLength: 5 }), oneOf(2 ** 53 - 1, -(2 ** 53 - 1)));
const validMeta = fc.record(
  {
    progressToken: validId,
    'io.modelcontextprotocol/related-task': fc.record({ taskId: fc.string({ maxLength: 3 }) }),
    other: anyValue,
  },
  { requiredKeys: [] },
);
const validParams = fc.record({ _meta: validMeta, name: anyValue }, { requiredKeys: [] });
/** A valid message of each kind... */
const valid = fc.oneof(
  fc.record(
    { jsonrpc: fc.constant('2.0'), id: validId, method: fc.string({ maxLength: 8 }), params: validParams },
    { requiredKeys: ['jsonrpc', 'id', 'method'] },
  ),
  fc.record(
    { jsonrpc: fc.constant('2.0'), method: fc.string({ maxLength: 8 }), params: validParams },
    { requiredKeys: ['jsonrpc', 'method'] },
  ),
  fc.record({
    jsonrpc: fc.constant('2.0'),
    id: validId,
    result: fc.record({ _meta: validMeta, x: anyValue }, { requiredKeys: [] }),
  }),
  fc.record(
    {
      jsonrpc: fc.constant('2.0'),
      id: validId,
      error: fc.record(
        { code: fc.integer(), message: fc.string(), data: anyValue },
        { requiredKeys: ['code', 'message'] },
      ),
    },
    { requiredKeys: ['jsonrpc', 'error'] },
  ),
);
const keys = oneOf('jsonrpc', 'id', 'method', 'params', 'result', 'error', 'extra', '__proto__', '_meta');
const mutation = fc.oneof(
  fc.record({ set: keys, value: fc.oneof(anyValue, meta, params) }),
  fc.record({ drop: keys }),
  fc.record({
    setMeta: oneOf('progressToken', 'io.modelcontextprotocol/related-task'),
    value: fc.oneof(anyValue, meta),
  }),
);
/** ...with up to two mutations, so both sides of the boundary are explored. */
const message = fc.tuple(valid, fc.array(mutation, { maxLength: 2 })).map(([m, mutations]) => {
  const out: Record<string, unknown> = { ...m };
  for (const mu of mutations) {
    if ('set' in mu)
      Object.defineProperty(out, mu.set, {
        value: mu.value,
        enumerable: true,
        configurable: true,
        writable: true,
      });
    else if ('drop' in mu) delete out[mu.drop];
    else {
      const holder = (out.params ?? out.result) as Record<string, unknown> | undefined;
      if (holder && typeof holder === 'object' && !Array.isArray(holder)) {
        holder._meta = { ...(typeof holder._meta === 'object' ? holder._meta : {}), [mu.setMeta]: mu.value };
      }
    }
  }
  return out;
});
// What a POST body parses to: JSON, so no undefined anywhere, and `__proto__` as an own key.
const posted = message.map((m) => JSON.parse(JSON.stringify(m)) as unknown);

describe('JSON-RPC message shape', () => {
  it('accepts exactly what the SDK 1.32 schema accepts (generated messages)', () => {
    let accepted = 0;
    let rejected = 0;
    fc.assert(
      fc.property(posted, (m) => {
        const ours = checkMessageShape(m).ok;
        expect(ours).toBe(JSONRPCMessageSchema.safeParse(m).success);
        if (ours) accepted++;
        else rejected++;
      }),
      { numRuns: 3_000 },
    );
    // Both sides of the boundary were explored, not just garbage.
    expect(accepted).toBeGreaterThan(300);
    expect(rejected).toBeGreaterThan(300);
  });

  it.each([
    ['a non-integer id', { jsonrpc: '2.0', id: 1.5, method: 'tools/list' }],
    ['an id beyond 2^53', { jsonrpc: '2.0', id: 2 ** 53, method: 'tools/list' }],
    ['a non-string method', { jsonrpc: '2.0', id: 1, method: 7 }],
    ['array params', { jsonrpc: '2.0', id: 1, method: 'tools/list', params: [] }],
    ['an unknown top-level member', { jsonrpc: '2.0', id: 1, method: 'tools/list', extra: true }],
    ['an initialize with an extra member', { jsonrpc: '2.0', id: 1, method: 'initialize', params: {}, x: 1 }],
    [
      'a fractional progress token',
      { jsonrpc: '2.0', id: 1, method: 'x', params: { _meta: { progressToken: 0.5 } } },
    ],
    ['a response with id null', { jsonrpc: '2.0', id: null, error: { code: 1, message: 'm' } }],
  ])('refuses %s, as the SDK does', (_, m) => {
    expect(checkMessageShape(m).ok).toBe(false);
    expect(JSONRPCMessageSchema.safeParse(m).success).toBe(false);
    const answer = admitBody(m, true, 'S');
    expect(answer).toMatchObject({ ok: false, status: 400, code: -32600, reason: 'invalid_message' });
  });

  it('refuses a string id longer than the limit, and takes one at the limit', () => {
    const at = { jsonrpc: '2.0', id: 'x'.repeat(256), method: 'tools/list' };
    expect(admitBody(at, true, 'S', { maxRequestIdLength: 256 })).toMatchObject({ kind: 'request' });
    const over = { ...at, id: 'x'.repeat(257) };
    expect(admitBody(over, true, 'S', { maxRequestIdLength: 256 })).toMatchObject({
      ok: false,
      status: 400,
      reason: 'id_too_long',
    });
  });
});

describe('JSON nesting depth', () => {
  const depthOf = (v: unknown): number =>
    typeof v === 'object' && v !== null ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0;

  it('the text scan measures the depth JSON.parse builds (generated JSON, strings with brackets and escapes)', () => {
    const text = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a') });
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), text, fc.integer({ min: 0, max: 10 }), (v, s, max) => {
        const json = JSON.stringify([v, s, { [s]: s }]);
        expect(exceedsJsonDepth(json, max)).toBe(depthOf(JSON.parse(json)) > max);
      }),
      { numRuns: 2_000 },
    );
  });

  it('10,000 levels are refused with a 400 before anything parses them', () => {
    const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    expect(parseBody(deep, { maxJsonDepth: 128 })).toMatchObject({
      ok: false,
      status: 400,
      reason: 'too_deep',
    });
    expect(parseBody('{"a":[1]}', { maxJsonDepth: 2 })).toEqual({ ok: true, body: { a: [1] } });
    expect(parseBody('{"a":', { maxJsonDepth: 2 })).toMatchObject({
      ok: false,
      status: 400,
      reason: 'parse_error',
    });
  });
});
