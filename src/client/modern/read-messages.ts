import { createParser } from 'eventsource-parser';
import { answerShape, asMessage } from '../../../machines/client/stateless-wire.js';
import type { JsonRpcMessage } from '../../../machines/jsonrpc.js';

/**
 * Reads a short answer (`server/discover`, `tools/list`) to its end and hands back its JSON-RPC messages
 * and a copy of it for the SDK, byte for byte the same text with the same status and headers.
 */
export async function readThrough(
  response: Response,
): Promise<{ messages: JsonRpcMessage[]; copy: Response }> {
  const text = await response.text();
  const headers = new Headers(response.headers);
  // The text is decoded: its length and encoding are no longer those of the wire.
  headers.delete('content-encoding');
  headers.delete('content-length');
  const copy = new Response(text, { status: response.status, statusText: response.statusText, headers });
  return { messages: messagesOf(response.status, response.headers.get('content-type'), text), copy };
}

/** The JSON-RPC messages of a JSON body or an event stream's text. */
export function messagesOf(status: number, contentType: string | null, text: string): JsonRpcMessage[] {
  const shape = answerShape(status, contentType);
  if (shape === 'json') {
    const m = asMessage(parse(text));
    return m ? [m] : [];
  }
  if (shape !== 'event-stream') return [];
  const messages: JsonRpcMessage[] = [];
  const parser = createParser({
    onEvent: (e) => {
      const m = asMessage(parse(e.data));
      if (m) messages.push(m);
    },
  });
  parser.feed(text);
  return messages;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
