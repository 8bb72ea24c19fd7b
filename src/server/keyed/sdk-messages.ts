import { createParser } from 'eventsource-parser';
import type { JsonRpcMessage } from '../../../machines/jsonrpc.js';

/**
 * The JSON-RPC messages of one SDK response, in order: each SSE event's data (SSE) or the body itself
 * (JSON, one message or a batch). Reading stops early when `signal` aborts (the body is cancelled, which
 * the SDK takes as the end of the request). Data that is not JSON is skipped: it is nothing a client
 * could be sent.
 */
export async function* sdkMessages(response: Response, signal: AbortSignal): AsyncGenerator<JsonRpcMessage> {
  const type = response.headers.get('content-type') ?? '';
  if (!response.body) return;
  if (!type.includes('text/event-stream')) {
    const parsed = parseJson(await response.text());
    for (const m of Array.isArray(parsed) ? parsed : parsed === undefined ? [] : [parsed]) yield m;
    return;
  }
  // Read and decode here rather than through a TextDecoderStream: the pipe's extra hops per chunk let a
  // body that sends faster than it is read (100,000 notifications) grow the SDK's queue, whose reads
  // then cost time in its length (bench: notifications/s, 2026-07-28).
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const onAbort = () => void reader.cancel().catch(() => {});
  signal.addEventListener('abort', onAbort, { once: true });
  const queue: JsonRpcMessage[] = [];
  const parser = createParser({
    onEvent: (event) => {
      const m = parseJson(event.data);
      if (m !== undefined && !Array.isArray(m)) queue.push(m);
    },
  });
  try {
    while (!signal.aborted) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      while (queue.length > 0) yield queue.shift() as JsonRpcMessage;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    await reader.cancel().catch(() => {});
  }
}

/** A body's JSON (an object or a batch), or `undefined` when it is not JSON. */
export function parseJson(text: string): JsonRpcMessage | JsonRpcMessage[] | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null ? (v as JsonRpcMessage) : undefined;
  } catch {
    return undefined;
  }
}
