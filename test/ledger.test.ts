import { describe, expect, it } from 'vitest';
import {
  defaultRetryPolicy,
  inboundOf,
  type Ledger,
  learnAnnotations,
  ledgerAdd,
  ledgerOnSessionLost,
  ledgerSettle,
  outcomeUnknownError,
  pendingEntries,
} from '../machines/client/ledger.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../machines/jsonrpc.js';
import { clientOwner, tagRequestId } from '../machines/request-tag.js';

const call = (id: number, name: string): JsonRpcRequest => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: {} },
});

const annotations = learnAnnotations(
  {},
  {
    tools: [
      { name: 'charge', annotations: { destructiveHint: true } },
      { name: 'search', annotations: { readOnlyHint: true } },
      { name: 'upsert', annotations: { idempotentHint: true } },
      { name: 'bare' },
    ],
  },
);

describe('request ledger', () => {
  it('settles once: a settled call leaves the ledger, and settling it again changes nothing', () => {
    const l: Ledger = {};
    ledgerAdd(l, call(1, 'charge'));
    ledgerAdd(l, call(2, 'charge'));
    ledgerSettle(l, 1);
    expect(Object.keys(l)).toEqual(['n:2']);
    ledgerSettle(l, 1);
    expect(Object.keys(l)).toEqual(['n:2']);
  });

  it('keeps 1 and "1" apart', () => {
    const l: Ledger = {};
    ledgerAdd(l, call(1, 'a'));
    ledgerAdd(l, { ...call(2, 'b'), id: '1' });
    expect(Object.keys(l).sort()).toEqual(['n:1', 's:1']);
  });

  /** @spec design-note "reconcile any in-flight requests as unknown outcome (do not blindly retry)" */
  it('on session loss: reads and annotated tools are re-sent, everything else is outcome unknown', () => {
    const l: Ledger = {};
    for (const [i, name] of ['charge', 'search', 'upsert', 'bare'].entries()) ledgerAdd(l, call(i, name));
    ledgerAdd(l, { jsonrpc: '2.0', id: 9, method: 'resources/read', params: { uri: 'x' } });
    ledgerAdd(l, { jsonrpc: '2.0', id: 10, method: 'sampling/whatever' });
    const lost = ledgerOnSessionLost(l, defaultRetryPolicy, annotations);
    expect(lost.resend.map((r) => r.id).sort()).toEqual([1, 2, 9]);
    expect(lost.unknown.map((r) => r.id).sort()).toEqual([0, 10, 3]);
    expect(
      pendingEntries(l)
        .map((e) => e.request.id)
        .sort(),
    ).toEqual([1, 2, 9]);
    expect(l['n:0']).toBeUndefined();
  });

  it('learns annotations from tools/list and ignores junk', () => {
    expect(annotations.search).toEqual({ readOnlyHint: true, idempotentHint: false });
    expect(learnAnnotations(annotations, { tools: 'nope' })).toBe(annotations);
    expect(learnAnnotations({}, { tools: [{ annotations: {} }, null] })).toEqual({});
  });

  it('the outcome-unknown error carries code and reason', () => {
    expect(outcomeUnknownError(3, 'session_lost')).toMatchObject({
      id: 3,
      error: { code: -32050, data: { reason: 'session_lost' } },
    });
  });
});

describe('the one orphan rule (inboundOf)', () => {
  const me = clientOwner('0123456789ab');
  const other = clientOwner('ba9876543210');
  const progress = (token: string | number): JsonRpcMessage => ({
    jsonrpc: '2.0',
    method: 'notifications/progress',
    params: { progressToken: token, progress: 1 },
  });

  it('a response to a pending request is its answer; any other response is an orphan', () => {
    const l: Ledger = {};
    ledgerAdd(l, call(1, 'charge'));
    expect(inboundOf(l, me, { jsonrpc: '2.0', id: 1, result: {} })).toMatchObject({ kind: 'answer' });
    expect(inboundOf(l, me, { jsonrpc: '2.0', id: 2, result: {} })).toEqual({ kind: 'orphan' });
    expect(inboundOf(l, me, { jsonrpc: '2.0', id: '1', result: {} })).toEqual({ kind: 'orphan' });
    ledgerSettle(l, 1);
    // A replay of an answer already delivered is never delivered twice.
    expect(inboundOf(l, me, { jsonrpc: '2.0', id: 1, result: {} })).toEqual({ kind: 'orphan' });
  });

  it('progress tagged by another owner is an orphan; our own, untagged and other messages are not', () => {
    expect(inboundOf({}, me, progress(tagRequestId(other, 2)))).toEqual({ kind: 'orphan' });
    expect(inboundOf({}, me, progress(tagRequestId(me, 2)))).toEqual({ kind: 'message' });
    expect(inboundOf({}, me, progress(2))).toEqual({ kind: 'message' });
    expect(inboundOf({}, undefined, progress(2))).toEqual({ kind: 'message' });
    expect(inboundOf({}, me, { jsonrpc: '2.0', method: 'notifications/message' })).toEqual({
      kind: 'message',
    });
  });
});
