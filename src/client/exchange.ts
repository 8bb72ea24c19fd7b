import { createParser } from 'eventsource-parser';
import { fromCallback } from 'xstate';
import { ADVERTISEMENT_HEADER, parseAdvertisement } from '../../machines/advertisement.js';
import { faultOf } from '../../machines/client/faults.js';
import type { Exchange, IoEvent } from '../../machines/client/io.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

export interface ExchangeIo {
  readonly url: URL;
  readonly fetch: FetchLike;
  /** Merged into every request (auth headers, agents…). */
  readonly requestInit?: RequestInit;
  /** Data that is not JSON-RPC: reported, never delivered as a message. */
  readonly onMalformed: (error: Error) => void;
}

/**
 * The `exchange` actor the stream machine invokes: one HTTP request, its response read to the end and
 * turned into IoEvents. Stopping the actor aborts the request. It decides nothing.
 */
export function createExchangeActor(io: ExchangeIo) {
  return fromCallback<IoEvent, Exchange>(({ input, sendBack }) => {
    const abort = new AbortController();
    void run(io, input, sendBack, abort.signal);
    return () => abort.abort();
  });
}

function headersFor(io: ExchangeIo, ex: Exchange): Headers {
  const headers = new Headers(io.requestInit?.headers);
  headers.set('Accept', ex.method === 'POST' ? 'application/json, text/event-stream' : 'text/event-stream');
  if (ex.method === 'POST') headers.set('Content-Type', 'application/json');
  if (ex.sessionId !== undefined) headers.set('Mcp-Session-Id', ex.sessionId);
  if (ex.protocolVersion !== undefined) headers.set('MCP-Protocol-Version', ex.protocolVersion);
  if (ex.lastEventId !== undefined) headers.set('Last-Event-ID', ex.lastEventId);
  return headers;
}

async function run(
  io: ExchangeIo,
  ex: Exchange,
  send: (e: IoEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  let response: Response;
  try {
    response = await io.fetch(io.url, {
      ...io.requestInit,
      method: ex.method,
      headers: headersFor(io, ex),
      body: ex.method === 'POST' ? JSON.stringify(ex.body) : undefined,
      signal,
    });
  } catch (error) {
    if (!signal.aborted) send({ type: 'net.failed', fault: faultOf(error) });
    return;
  }
  const sessionId = response.headers.get('mcp-session-id') ?? undefined;
  const advertisement = parseAdvertisement(response.headers.get(ADVERTISEMENT_HEADER));
  const isStream =
    response.status === 200 && response.headers.get('content-type')?.startsWith('text/event-stream');
  if (!isStream) {
    let body: unknown;
    try {
      const text = await response.text();
      body = text === '' ? undefined : tryJson(text);
    } catch (error) {
      if (!signal.aborted) send({ type: 'net.failed', fault: faultOf(error) });
      return;
    }
    if (!signal.aborted)
      send({ type: 'http.response', status: response.status, sessionId, body, advertisement });
    return;
  }
  send({ type: 'http.stream', sessionId, advertisement });
  const parser = createParser({
    onEvent: (e) => {
      let message: JsonRpcMessage | undefined;
      if (e.data !== '') {
        const parsed = tryJson(e.data);
        if (typeof parsed !== 'object' || parsed === null) {
          io.onMalformed(
            new Error(`SSE event ${e.id ?? ''} carries data that is not JSON-RPC: ${e.data.slice(0, 200)}`),
          );
        } else message = parsed as JsonRpcMessage;
      }
      send({ type: 'sse.event', id: e.id, event: e.event, message, data: e.data });
    },
    onRetry: (ms) => send({ type: 'sse.retry', ms }),
    onComment: () => send({ type: 'sse.activity' }),
  });
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const chunk = await reader?.read();
      if (!chunk || chunk.done) break;
      if (signal.aborted) return;
      parser.feed(decoder.decode(chunk.value, { stream: true }));
    }
  } catch (error) {
    if (!signal.aborted) send({ type: 'net.failed', fault: faultOf(error) });
    return;
  }
  if (!signal.aborted) send({ type: 'net.ended' });
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
