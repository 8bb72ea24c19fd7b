import type { JsonRpcMessage } from '../../../machines/jsonrpc.js';

/** The first event of a stream is read at most this far; a longer one is passed through unchanged. */
const MAX_FIRST_EVENT_BYTES = 64 * 1024;

/**
 * An SSE response whose first event's JSON-RPC message is replaced by `rewrite(message)`; every other
 * byte passes through as it came. Used for the listen acknowledgement, which the v2 SDK writes as the
 * stream's first event (`event: message` + one `data:` line). Anything that is not that shape (no
 * event-stream, no JSON, a first event over 64 KiB) passes through unchanged. Cancelling the result
 * cancels the original body.
 */
export function rewritingFirstEvent(
  response: Response,
  rewrite: (message: JsonRpcMessage) => JsonRpcMessage,
): Response {
  const body = response.body;
  if (body === null || !(response.headers.get('content-type') ?? '').includes('text/event-stream'))
    return response;
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = '';
  let done = false;
  const relayed = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const chunk = await reader.read();
        if (done) {
          if (chunk.done) controller.close();
          else controller.enqueue(chunk.value);
          return;
        }
        if (chunk.done) {
          // The stream ended inside its first event: what there was goes through as it came.
          if (pending.length > 0) controller.enqueue(encoder.encode(pending));
          controller.close();
          return;
        }
        pending += decoder.decode(chunk.value, { stream: true });
        const end = /\r?\n\r?\n/.exec(pending);
        if (end === null && pending.length <= MAX_FIRST_EVENT_BYTES) return;
        done = true;
        const first = end === null ? pending : pending.slice(0, end.index);
        const rest = end === null ? '' : pending.slice(end.index);
        pending = '';
        controller.enqueue(encoder.encode(end === null ? first : rewritten(first, rewrite) + rest));
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
  return lines.map((l) => (l.startsWith('data:') ? `data: ${JSON.stringify(next)}` : l)).join('\n');
}
