import { describe, expect, it } from 'vitest';
import {
  decideNotFound,
  isJsonRpcErrorBody,
  type NotFoundFacts,
  notFoundClose,
} from '../machines/client/not-found.js';

const facts = (over: Partial<NotFoundFacts>): NotFoundFacts => ({
  method: 'GET',
  stream: 'standalone',
  carriedSessionId: true,
  servedBefore: false,
  jsonRpcBody: false,
  ...over,
});

describe('what a 404 means (decideNotFound, issue 22)', () => {
  it("a POST's 404 ends the session, whatever else holds (the spec's signal)", () => {
    for (const stream of ['standalone', 'request'] as const)
      for (const servedBefore of [false, true])
        expect(decideNotFound(facts({ method: 'POST', stream, servedBefore }))).toBe('session-lost');
  });

  it('a standalone GET that never opened in this session: no standalone stream here; the session stays', () => {
    expect(decideNotFound(facts({}))).toBe('stream-not-offered');
    expect(notFoundClose(facts({}))).toEqual({ action: 'stop', reason: 'not_offered' });
  });

  it("a standalone GET that never opened, answered with the MCP server's JSON-RPC error: the session is gone", () => {
    // A client restored from its cursor store has never had its standalone stream open: were this "no
    // stream here", a session the server forgot would go unnoticed until the next POST.
    expect(decideNotFound(facts({ jsonRpcBody: true }))).toBe('session-lost');
    expect(isJsonRpcErrorBody({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'x' } })).toBe(
      true,
    );
    for (const body of [undefined, 'Cannot GET /mcp', {}, { error: 'x' }, { jsonrpc: '2.0', result: {} }])
      expect(isJsonRpcErrorBody(body)).toBe(false);
  });

  it('a standalone GET the server had served in this session: the session is gone', () => {
    expect(decideNotFound(facts({ servedBefore: true }))).toBe('session-lost');
    expect(notFoundClose(facts({ servedBefore: true }))).toEqual({ action: 'session-terminated' });
  });

  it("a call's resume (Last-Event-ID) with the session id: the session is gone", () => {
    expect(decideNotFound(facts({ stream: 'request', servedBefore: true }))).toBe('session-lost');
  });

  it('a GET without a session id cannot mean an expired session: only the stream is not there', () => {
    for (const servedBefore of [false, true]) {
      expect(decideNotFound(facts({ carriedSessionId: false, servedBefore }))).toBe('stream-not-offered');
      expect(decideNotFound(facts({ carriedSessionId: false, stream: 'request', servedBefore }))).toBe(
        'stream-lost',
      );
    }
    expect(notFoundClose(facts({ carriedSessionId: false, stream: 'request' }))).toEqual({
      action: 'stop',
      reason: 'not_found',
    });
  });
});
