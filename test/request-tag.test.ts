import { describe, expect, it } from 'vitest';
import type { JsonRpcMessage } from '../machines/jsonrpc.js';
import {
  clientOwner,
  taggedByAnother,
  tagOutgoing,
  tagRequestId,
  untagIncoming,
  untagRequestId,
} from '../machines/request-tag.js';

const me = clientOwner('0123456789ab');
const other = clientOwner('ba9876543210');

describe('the one request-id tagging scheme', () => {
  it('tags and untags exactly, numbers and strings kept apart', () => {
    for (const id of [0, 17, 'x', '17', 'a~b', '']) {
      expect(untagRequestId(tagRequestId(me, id))).toEqual({ instance: me, id });
    }
    expect(tagRequestId(me, 7)).not.toBe(tagRequestId(me, '7'));
    expect(tagRequestId(me, 7)).not.toBe(tagRequestId(other, 7));
  });

  it('leaves ids it did not make alone', () => {
    for (const id of [1, 'plain', 'mcpc~', 'mcpc~~1', `mcpc~${me}~{`, `mcpc~${me}~null`, null])
      expect(untagRequestId(id)).toBeUndefined();
    expect(taggedByAnother(me, 'plain')).toBe(false);
    expect(taggedByAnother(me, tagRequestId(me, 1))).toBe(false);
    expect(taggedByAnother(me, tagRequestId(other, 1))).toBe(true);
  });

  it('a client request and its progress token go out tagged; its cancellation names the tagged id', () => {
    const request: JsonRpcMessage = {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'x', _meta: { progressToken: 2 } },
    };
    const out = tagOutgoing(me, request);
    expect(out).toEqual({
      jsonrpc: '2.0',
      id: tagRequestId(me, 2),
      method: 'tools/call',
      params: { name: 'x', _meta: { progressToken: tagRequestId(me, 2) } },
    });
    const cancel: JsonRpcMessage = {
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 2 },
    };
    expect(tagOutgoing(me, cancel)).toEqual({ ...cancel, params: { requestId: tagRequestId(me, 2) } });
    const answer: JsonRpcMessage = { jsonrpc: '2.0', id: 'srv-1', result: {} };
    expect(tagOutgoing(me, answer)).toBe(answer);
  });

  it('answers and progress of our own requests come back with their original ids; others unchanged', () => {
    expect(untagIncoming(me, { jsonrpc: '2.0', id: tagRequestId(me, '2'), result: {} })).toEqual({
      jsonrpc: '2.0',
      id: '2',
      result: {},
    });
    const progress = (token: string): JsonRpcMessage => ({
      jsonrpc: '2.0',
      method: 'notifications/progress',
      params: { progressToken: token, progress: 1 },
    });
    expect(untagIncoming(me, progress(tagRequestId(me, 2)))).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/progress',
      params: { progressToken: 2, progress: 1 },
    });
    const foreign = progress(tagRequestId(other, 2));
    expect(untagIncoming(me, foreign)).toBe(foreign);
    const theirs: JsonRpcMessage = { jsonrpc: '2.0', id: tagRequestId(other, 2), result: {} };
    expect(untagIncoming(me, theirs)).toBe(theirs);
  });
});
