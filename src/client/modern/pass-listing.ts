import { createParser } from 'eventsource-parser';
import {
  endsListing,
  listingOverCap,
  listingTooLargeError,
  overCapAnswer,
} from '../../../machines/client/listing-answer.js';
import { answerShape, asMessage } from '../../../machines/client/modern-call-wire.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../../machines/jsonrpc.js';
import { readCappedText } from '../read-capped.js';

export interface PassListingArgs {
  /** The application's request (`server/discover`, `tools/list`): its id ends the exchange. */
  readonly request: JsonRpcRequest;
  /** No more of the body than this is read (`listingOverCap`). */
  readonly maxBytes: number;
  /** Each JSON-RPC message of the answer, before the application gets it. */
  readonly onMessage: (message: JsonRpcMessage) => void;
}

const encoder = new TextEncoder();
const frame = (message: JsonRpcMessage) =>
  encoder.encode(`event: message\ndata: ${JSON.stringify(message)}\n\n`);

/**
 * Hands a `server/discover` or `tools/list` answer to the application as it arrives, reading its messages
 * on the way (machines/client/listing-answer.ts decides). An event stream is passed on event by event
 * (its JSON-RPC messages, re-framed without SSE ids) and ends with the request's own response, even if
 * the server keeps it open; any other answer is read whole, up to the cap. Over the cap the application
 * gets a JSON-RPC error for its request instead.
 */
export async function passListing(response: Response, args: PassListingArgs): Promise<Response> {
  const headers = new Headers(response.headers);
  // The body is decoded (and re-framed): its length and encoding are no longer those of the wire.
  headers.delete('content-encoding');
  headers.delete('content-length');
  const init = { status: response.status, statusText: response.statusText, headers };
  if (answerShape(response.status, response.headers.get('content-type')) === 'event-stream')
    return new Response(eventsThrough(response, args), init);
  const text = await readCappedText(response, args.maxBytes);
  if (text === undefined)
    return overCapAnswer(response.status) === 'error-for-request' ? tooLarge(args) : new Response(null, init);
  const message =
    answerShape(response.status, response.headers.get('content-type')) === 'json'
      ? asMessage(parseJson(text))
      : undefined;
  if (message) args.onMessage(message);
  return new Response(text, init);
}

function tooLarge(args: PassListingArgs): Response {
  const error = listingTooLargeError(args.request.id, args.request.method, args.maxBytes);
  return new Response(JSON.stringify(error), {
    status: 200,
    headers: { 'content-type': 'application/json' },
  });
}

/** The answer's events as they come, up to and including the request's own response. */
function eventsThrough(response: Response, args: PassListingArgs): ReadableStream<Uint8Array> {
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  let bytes = 0;
  let ended = false;
  const out: Uint8Array[] = [];
  const parser = createParser({
    maxBufferSize: args.maxBytes,
    onEvent: (e) => {
      if (ended || (e.event !== undefined && e.event !== 'message')) return;
      const message = asMessage(parseJson(e.data));
      if (!message) return;
      args.onMessage(message);
      out.push(frame(message));
      if (endsListing(message, args.request.id)) ended = true;
    },
  });
  const stopReading = () => reader?.cancel().catch(() => undefined);
  return new ReadableStream<Uint8Array>({
    // Reads until something can be handed on: keep-alives alone are read through, never handed on.
    pull: async (controller) => {
      let bodyDone = false;
      while (out.length === 0 && !ended) {
        const chunk = reader ? await reader.read() : { done: true as const, value: undefined };
        if (chunk.done) {
          bodyDone = true;
          break;
        }
        bytes += chunk.value.byteLength;
        if (listingOverCap(bytes, args.maxBytes)) {
          out.push(frame(listingTooLargeError(args.request.id, args.request.method, args.maxBytes)));
          ended = true;
          break;
        }
        parser.feed(decoder.decode(chunk.value, { stream: true }));
      }
      for (const f of out.splice(0)) controller.enqueue(f);
      if (ended) void stopReading();
      if (ended || bodyDone) controller.close();
    },
    cancel: () => {
      ended = true;
      void stopReading();
    },
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
