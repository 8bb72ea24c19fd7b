import { createParser } from 'eventsource-parser';
import type { JsonRpcMessage } from '../../../machines/jsonrpc.js';

/**
 * The JSON-RPC messages of one SDK response, in order: each SSE event's data (SSE) or the body itself
 * (JSON, one message or a batch), told to `each` as read. Reading stops early when `signal` aborts (the
 * body is cancelled, which the SDK takes as the end of the request). Data that is not JSON is skipped:
 * it is nothing a client could be sent.
 *
 * A callback, not a generator, and no TextDecoderStream pipe: a body that sends faster than it is read
 * (100,000 notifications) queues in the SDK's stream, whose reads cost time in its length; every hop
 * per message saved here keeps that queue short (bench: notifications/s, 2026-07-28).
 */
export async function forEachSdkMessage(
  response: Response,
  signal: AbortSignal,
  each: (message: JsonRpcMessage) => void,
): Promise<void> {
  const type = response.headers.get('content-type') ?? '';
  if (!response.body) return;
  if (!type.includes('text/event-stream')) {
    const parsed = parseJson(await response.text());
    for (const m of Array.isArray(parsed) ? parsed : parsed === undefined ? [] : [parsed]) each(m);
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const onAbort = () => void reader.cancel().catch(() => {});
  signal.addEventListener('abort', onAbort, { once: true });
  const parser = createParser({
    onEvent: (event) => {
      const m = parseJson(event.data);
      if (m !== undefined && !Array.isArray(m)) each(m);
    },
  });
  try {
    while (!signal.aborted) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    await reader.cancel().catch(() => {});
  }
}

/**
 * `forEachSdkMessage` as an async generator. Leaving the loop early stops the reading (the body is
 * cancelled), as `signal` aborting does.
 */
export async function* sdkMessages(response: Response, signal: AbortSignal): AsyncGenerator<JsonRpcMessage> {
  const stop = new AbortController();
  const queue: JsonRpcMessage[] = [];
  let wake: (() => void) | undefined;
  let over = false;
  let failure: { error: unknown } | undefined;
  const reading = forEachSdkMessage(response, AbortSignal.any([signal, stop.signal]), (m) => {
    queue.push(m);
    wake?.();
  }).then(
    () => {
      over = true;
      wake?.();
    },
    (error: unknown) => {
      failure = { error };
      over = true;
      wake?.();
    },
  );
  try {
    for (let i = 0; ; ) {
      if (i < queue.length) {
        yield queue[i] as JsonRpcMessage;
        queue[i++] = undefined as never; // what was yielded is not kept
        continue;
      }
      queue.length = 0;
      i = 0;
      if (over) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = undefined;
    }
    if (failure) throw failure.error;
  } finally {
    stop.abort();
    await reading;
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
