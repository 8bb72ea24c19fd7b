import { describe, expect, it } from 'vitest';
import {
  endsListing,
  LISTING_TOO_LARGE,
  listingOverCap,
  listingTooLargeError,
} from '../../machines/client/listing-answer.js';
import { JsonRpcCode } from '../../machines/codes.js';

describe('listing answers (server/discover, tools/list) as the 2026 client reads them', () => {
  it('the request’s own response ends the exchange; a notification, a request or another id’s response does not', () => {
    expect(endsListing({ jsonrpc: '2.0', id: 3, result: {} }, 3)).toBe(true);
    expect(endsListing({ jsonrpc: '2.0', id: 3, error: { code: -1, message: 'x' } }, 3)).toBe(true);
    expect(endsListing({ jsonrpc: '2.0', id: '3', result: {} }, 3)).toBe(false);
    expect(endsListing({ jsonrpc: '2.0', method: 'notifications/message' }, 3)).toBe(false);
    expect(endsListing({ jsonrpc: '2.0', id: 3, method: 'ping' }, 3)).toBe(false);
  });

  it('the cap: the limit itself is read, one byte more is not', () => {
    expect(listingOverCap(1024, 1024)).toBe(false);
    expect(listingOverCap(1025, 1024)).toBe(true);
  });

  it('over the cap the application gets an error for its own request, naming the method and the limit', () => {
    expect(listingTooLargeError('a', 'tools/list', 1024)).toEqual({
      jsonrpc: '2.0',
      id: 'a',
      error: {
        code: JsonRpcCode.MALFORMED_ANSWER,
        message: "The server's tools/list answer exceeded 1024 bytes; not read further",
        data: { reason: LISTING_TOO_LARGE, limit: 1024 },
      },
    });
  });
});
