import type { JsonRpcMessage } from '../../../machines/jsonrpc.js';

/** The first event of a stream is read at most this far; a longer one is passed through unchanged. */
const MAX_FIRST_EVENT_BYTES = 64 * 1024;

/**
 * An SSE response whose first event's JSON-RPC message is replaced by `rewrite(message)`; every other
 * byte passes through as it came. Used for the listen acknowledgement, which the v2 SDK writes as the
 * stream's first event (`event: message` + one `data:` line). Anything that is not that shape (no
 * event-stream, no JSON, several `data:` lines, a first event over 64 KiB) passes through unchanged.
 * Cancelling the result cancels the original body.
 */
export function rewritingFirstEvent(
  response: Response,
  rewrite: (message: JsonRpcMessage) => JsonRpcMessage,
): Response {
  const body = response.body;
  if (body === null || !(response.headers.get('content-type') ?? '').includes('text/event-stream'))
    return response;
  const reader = body.getReader();
  // Bytes, not text: the boundary (a blank line) is ASCII, so the first event decodes whole and every byte
  // after it passes as it came, a character cut between two chunks included.
  let pending: Uint8Array<ArrayBuffer> = new Uint8Array(0);
  let passing = false;
  const relayed = new ReadableStream<Uint8Array>({
    // Each pull enqueues something or ends the stream: a pull that returned empty-handed would never be
    // called again, and the reader would wait for ever on a first event split over several chunks.
    async pull(controller) {
      try {
        for (;;) {
          const chunk = await reader.read();
          if (passing) {
            if (chunk.done) controller.close();
            else controller.enqueue(chunk.value);
            return;
          }
          if (chunk.done) {
            // The stream ended inside its first event: what there was goes through as it came.
            if (pending.length > 0) controller.enqueue(pending);
            controller.close();
            return;
          }
          pending = concat(pending, chunk.value);
          const end = eventEnd(pending);
          if (end < 0 && pending.length <= MAX_FIRST_EVENT_BYTES) continue;
          passing = true;
          const out =
            end < 0
              ? pending
              : concat(
                  new TextEncoder().encode(
                    rewritten(new TextDecoder().decode(pending.subarray(0, end)), rewrite),
                  ),
                  pending.subarray(end),
                );
          pending = new Uint8Array(0);
          controller.enqueue(out);
          return;
        }
      } catch (error) {
        controller.error(error);
      }
    },
    async cancel(reason) {
      await reader.cancel(reason).catch(() => undefined);
    },
  });
  return new Response(relayed, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** One SSE event's text (no trailing blank line) with its `data:` message rewritten, or as it was. */
function rewritten(event: string, rewrite: (message: JsonRpcMessage) => JsonRpcMessage): string {
  const newline = event.includes('\r\n') ? '\r\n' : '\n';
  const lines = event.split(/\r?\n/);
  const dataLines = lines.filter((l) => l.startsWith('data:'));
  if (dataLines.length !== 1) return event;
  let message: JsonRpcMessage;
  try {
    message = JSON.parse((dataLines[0] as string).slice(5).trimStart()) as JsonRpcMessage;
  } catch {
    return event;
  }
  const next = rewrite(message);
  if (next === message) return event;
  return lines.map((l) => (l.startsWith('data:') ? `data: ${JSON.stringify(next)}` : l)).join(newline);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

const LF = 10;
const CR = 13;

/** Where the first event's blank line starts (`\n\n` or `\r\n\r\n`), or -1. */
function eventEnd(bytes: Uint8Array): number {
  for (let i = 0; i + 1 < bytes.length; i++) {
    if (bytes[i] === LF && bytes[i + 1] === LF) return i;
    if (bytes[i] === CR && bytes[i + 1] === LF && bytes[i + 2] === CR && bytes[i + 3] === LF) return i;
  }
  return -1;
}
