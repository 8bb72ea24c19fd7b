import { describe, expect, it } from 'vitest';
import { libraryEnding, rawAnswerAs } from '../../machines/client/modern-call-wire.js';

/** How a finished 2026-07-28 call is handed back to the SDK's transport (machines/client/modern-call-wire.ts). */
describe('the ending the SDK gets', () => {
  it('a definite failure on a status before any message is the raw answer; a refused connection the fetch error', () => {
    const status = { kind: 'http-status', status: 400 } as const;
    expect(libraryEnding('failed', status, false)).toBe('raw-answer');
    expect(libraryEnding('failed', { kind: 'refused' }, false)).toBe('fetch-error');
    // Once the SDK holds a stream, or for an answer or an unknown outcome, it is the final message.
    expect(libraryEnding('failed', status, true)).toBe('final');
    expect(libraryEnding('answered', status, false)).toBe('final');
    expect(libraryEnding('outcome-unknown', status, false)).toBe('final');
  });

  it('a raw JSON-RPC error answer is put under the application’s id (a re-issue’s answer names the re-issue)', () => {
    const reissued = JSON.stringify({
      jsonrpc: '2.0',
      id: 'n1~reissue-1',
      error: { code: -32020, message: 'm' },
    });
    expect(JSON.parse(rawAnswerAs(reissued, 'n1'))).toEqual({
      jsonrpc: '2.0',
      id: 'n1',
      error: { code: -32020, message: 'm' },
    });
    const nullId = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'm' } });
    expect(JSON.parse(rawAnswerAs(nullId, 3)).id).toBe(3);
    // Already the application's, or not a JSON-RPC error: as it came, byte for byte.
    const own = JSON.stringify({ jsonrpc: '2.0', id: 3, error: { code: 1, message: 'm' } });
    expect(rawAnswerAs(own, 3)).toBe(own);
    for (const other of [
      'Unauthorized',
      '{"error":"invalid_token"}',
      '[{"jsonrpc":"2.0","id":1,"error":{}}]',
      '',
    ])
      expect(rawAnswerAs(other, 3)).toBe(other);
  });
});
