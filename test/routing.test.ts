import { describe, expect, it } from 'vitest';
import { routeInbound, tagRequestId, untagRequestId } from '../machines/server/routing.js';

describe('routing client messages between instances that share a session', () => {
  it('tags and untags request ids exactly, numbers and strings kept apart', () => {
    for (const id of [0, 17, 'x', '17', 'a~b', '']) {
      expect(untagRequestId(tagRequestId('inst1', id))).toEqual({ instance: 'inst1', id });
    }
    expect(untagRequestId(tagRequestId('i', 1))?.id).toBe(1);
    expect(untagRequestId(tagRequestId('i', '1'))?.id).toBe('1');
  });

  it('leaves ids it did not make alone', () => {
    for (const id of [1, 'plain', 'mcpc~', 'mcpc~~1', 'mcpc~i~{', 'mcpc~i~[1]', 'mcpc~i~null', null]) {
      expect(untagRequestId(id)).toBeUndefined();
    }
  });

  it('an answer goes to the instance that asked, with its original id', () => {
    const answer = { jsonrpc: '2.0' as const, id: tagRequestId('a', 3), result: {} };
    expect(routeInbound(answer, 'b', () => undefined)).toEqual({
      kind: 'forward',
      instance: 'a',
      message: { jsonrpc: '2.0', id: 3, result: {} },
    });
    expect(routeInbound(answer, 'a', () => undefined)).toEqual({
      kind: 'here',
      message: { jsonrpc: '2.0', id: 3, result: {} },
    });
    const untagged = { jsonrpc: '2.0' as const, id: 3, error: { code: 1, message: 'no' } };
    expect(routeInbound(untagged, 'b', () => 'a')).toEqual({ kind: 'here', message: untagged });
  });

  it('a cancellation goes to the instance running the call', () => {
    const cancel = { jsonrpc: '2.0' as const, method: 'notifications/cancelled', params: { requestId: 7 } };
    const owners: Record<string, string> = { 'n:7': 'a' };
    expect(routeInbound(cancel, 'b', (key) => owners[key])).toEqual({
      kind: 'forward',
      instance: 'a',
      message: cancel,
    });
    expect(routeInbound(cancel, 'a', (key) => owners[key]).kind).toBe('here');
    // A string id "7" is another request than the number 7.
    const other = { ...cancel, params: { requestId: '7' } };
    expect(routeInbound(other, 'b', (key) => owners[key]).kind).toBe('here');
    const initialized = { jsonrpc: '2.0' as const, method: 'notifications/initialized' };
    expect(routeInbound(initialized, 'b', () => 'a')).toEqual({ kind: 'here', message: initialized });
  });
});
