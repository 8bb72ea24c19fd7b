import { describe, expect, it } from 'vitest';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { rewritingFirstEvent } from '../../src/server/modern/first-event.js';

/** The listen acknowledgement's rewrite (src/server/modern/first-event.ts) over the chunkings a body can have. */

const ACK = { jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { n: 'é' } };
const stamp = (m: JsonRpcMessage): JsonRpcMessage =>
  'method' in m ? ({ ...m, params: { ...(m.params ?? {}), stamped: true } } as JsonRpcMessage) : m;

function sse(chunks: Array<string | Uint8Array>, type = 'text/event-stream'): Response {
  const encoder = new TextEncoder();
  let i = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      const next = chunks[i++];
      if (next === undefined) c.close();
      else c.enqueue(typeof next === 'string' ? encoder.encode(next) : next);
    },
  });
  return new Response(body, { headers: { 'content-type': type } });
}

/** Reads the whole body, bounded: a stalled stream fails the test instead of hanging it. */
async function text(r: Response): Promise<string> {
  return Promise.race([
    r.text(),
    new Promise<string>((_, reject) => setTimeout(() => reject(new Error('the body stalled')), 5_000)),
  ]);
}

const first = `event: message\ndata: ${JSON.stringify(ACK)}\n\n`;
const later =
  'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"u":"ü"}}\n\n';
const stamped = `event: message\ndata: ${JSON.stringify(stamp(ACK as JsonRpcMessage))}\n\n`;

describe('rewritingFirstEvent', () => {
  it('one chunk: the first event rewritten, the rest as it came', async () => {
    expect(await text(rewritingFirstEvent(sse([first + later]), stamp))).toBe(stamped + later);
  });

  it('the first event split over many chunks (one byte each) is rewritten, never stalls', async () => {
    const bytes = new TextEncoder().encode(first + later);
    const oneByOne = Array.from(bytes, (b) => new Uint8Array([b]));
    expect(await text(rewritingFirstEvent(sse(oneByOne), stamp))).toBe(stamped + later);
  });

  it('a character cut between two chunks after the first event passes whole', async () => {
    const bytes = new TextEncoder().encode(first + later);
    const cut = bytes.indexOf(0xc3, new TextEncoder().encode(first).length); // the first byte of 'ü'
    const out = await text(
      rewritingFirstEvent(sse([bytes.subarray(0, cut + 1), bytes.subarray(cut + 1)]), stamp),
    );
    expect(out).toBe(stamped + later);
  });

  it('CRLF line endings are kept', async () => {
    const crlf = first.replaceAll('\n', '\r\n');
    expect(await text(rewritingFirstEvent(sse([crlf, later]), stamp))).toBe(
      stamped.replaceAll('\n', '\r\n') + later,
    );
  });

  it('passes through unchanged: not an event stream, not JSON, two data lines, a stream ending inside it', async () => {
    const json = new Response('{"a":1}', { headers: { 'content-type': 'application/json' } });
    expect(rewritingFirstEvent(json, stamp)).toBe(json);
    expect(await text(rewritingFirstEvent(sse([': keep-alive\ndata: nope\n\n', later]), stamp))).toBe(
      `: keep-alive\ndata: nope\n\n${later}`,
    );
    const two = `data: ${JSON.stringify(ACK)}\ndata: more\n\n`;
    expect(await text(rewritingFirstEvent(sse([two]), stamp))).toBe(two);
    expect(await text(rewritingFirstEvent(sse(['event: message\ndata: {"jsonrpc"']), stamp))).toBe(
      'event: message\ndata: {"jsonrpc"',
    );
  });

  it('a first event with no end in its first 64 KiB is passed through unchanged', async () => {
    const big = `event: message\ndata: ${JSON.stringify({ ...ACK, params: { pad: 'x'.repeat(70_000) } })}\n\n`;
    expect(await text(rewritingFirstEvent(sse([big.slice(0, 66_000), big.slice(66_000)]), stamp))).toBe(big);
  });

  it('cancelling the result cancels the original body', async () => {
    let cancelled: unknown;
    const body = new ReadableStream<Uint8Array>({
      pull: () => new Promise<void>(() => undefined),
      cancel: (reason) => {
        cancelled = reason;
      },
    });
    const r = rewritingFirstEvent(
      new Response(body, { headers: { 'content-type': 'text/event-stream' } }),
      stamp,
    );
    await r.body?.cancel('gone');
    expect(cancelled).toBe('gone');
  });
});
