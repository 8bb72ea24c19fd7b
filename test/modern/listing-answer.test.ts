import { describe, expect, it } from 'vitest';
import {
  endsListing,
  LISTING_TOO_LARGE,
  listingOverCap,
  listingTooLargeError,
  overCapAnswer,
} from '../../machines/client/listing-answer.js';
import { JsonRpcCode } from '../../machines/codes.js';
import { passListing } from '../../src/client/modern/pass-listing.js';

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

  it('over the cap, a 2xx becomes the error for the request; any other status goes on as that status, bodiless', async () => {
    expect(overCapAnswer(200)).toBe('error-for-request');
    for (const status of [401, 403, 404, 500]) expect(overCapAnswer(status)).toBe('status-without-body');
    // A 401 with a body past the cap still reaches the SDK as a 401 with its WWW-Authenticate (so its
    // authorization flow starts), not as a 200 carrying -32055.
    const huge = new Response('x'.repeat(4096), {
      status: 401,
      headers: { 'content-type': 'text/html', 'www-authenticate': 'Bearer resource_metadata="m"' },
    });
    const request = { jsonrpc: '2.0' as const, id: 1, method: 'tools/list' };
    const passed = await passListing(huge, { request, maxBytes: 1024, onMessage: () => undefined });
    expect(passed.status).toBe(401);
    expect(passed.headers.get('www-authenticate')).toBe('Bearer resource_metadata="m"');
    expect(await passed.text()).toBe('');
  });
});
