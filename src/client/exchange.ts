import { createParser } from 'eventsource-parser';
import { fromCallback } from 'xstate';
import { ADVERTISEMENT_HEADER, parseAdvertisement } from '../../machines/advertisement.js';
import { faultOf } from '../../machines/client/faults.js';
import type { Exchange, IoEvent, SseEvent } from '../../machines/client/io.js';
import {
  acceptableEventId,
  DEFAULT_MAX_MESSAGE_BYTES,
  MAX_EVENT_ID_LENGTH,
  STALL_PROGRESS_BYTES,
} from '../../machines/client/limits.js';
import { asJsonRpcMessage, claimedId } from '../../machines/client/wire.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { readCappedText } from './read-capped.js';

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

export interface ExchangeIo {
  readonly url: URL;
  readonly fetch: FetchLike;
  /** Merged into every request (auth headers, agents…). */
  readonly requestInit?: RequestInit;
  /** Data that is not JSON-RPC, or a response past the limits: reported, never delivered as a message. */
  readonly onMalformed: (error: Error) => void;
  /** The most one SSE event's data (characters) or one JSON body (bytes) may hold. Default 16 MiB. */
  readonly maxMessageBytes?: number;
  /** The `Authorization` header for each request (the provider's current token), read just before it is sent. */
  readonly authorization?: () => Promise<string | undefined>;
  /** `follow`: redirects are followed (the application's `redirectPolicy`). Default: never followed. */
  readonly followRedirects?: boolean;
}

/**
 * The `exchange` actor the stream machine invokes: one HTTP request, its response read to the end and
 * turned into IoEvents. Stopping the actor ends its events at once, and aborts the request (see
 * `DRAIN_MS` for a body being read). It decides nothing.
 */
export function createExchangeActor(io: ExchangeIo) {
  const advertisements = new AdvertisementCache();
  return fromCallback<IoEvent, Exchange>(({ input, sendBack }) => {
    const abort = new AbortController();
    const exchange: ExchangeState = { finished: false, stopped: false, reading: false, advertisements };
    void run(io, input, sendBack, abort.signal, exchange);
    return () => {
      exchange.stopped = true;
      // Most exchanges are stopped right after their last event: a finished one has nothing to abort, and an
      // abort without a reason builds a DOMException with a stack each time (~3 % of a busy client's CPU).
      if (exchange.finished) return;
      // Only a POST's body is drained: a GET stream (the standalone stream, a resume) may never end.
      if (!exchange.reading || input.method !== 'POST') {
        abort.abort(STOPPED);
        return;
      }
      const timer = setTimeout(() => abort.abort(STOPPED), DRAIN_MS);
      timer.unref?.();
      exchange.onFinished = () => clearTimeout(timer);
    };
  });
}

/**
 * A POST's body being read when its stream stops is read on (its events dropped) for this long before it
 * is aborted. A request stream stops as soon as its answer is in, often a moment before the end of the body
 * that follows it (a proxy, a real network); aborting then destroys a connection that could have gone
 * back to the pool. Short, because a server may also keep a finished stream open (the SDK server does,
 * after a replay), and that connection should not be held long.
 */
const DRAIN_MS = 200;

interface ExchangeState {
  /** The response was read to its end, or failed. */
  finished: boolean;
  /** The stream machine stopped this exchange: nothing more is sent to it. */
  stopped: boolean;
  /** An SSE body is being read. */
  reading: boolean;
  onFinished?: () => void;
  readonly advertisements: AdvertisementCache;
}

/** The abort reason when a stream machine stops its exchange; never reported (the signal says aborted). */
const STOPPED = new Error('exchange stopped by its stream');

function headersFor(io: ExchangeIo, ex: Exchange, authorization: string | undefined): Headers {
  const headers = new Headers(io.requestInit?.headers);
  if (authorization !== undefined) headers.set('Authorization', authorization);
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
  sendEvent: (e: IoEvent) => void,
  signal: AbortSignal,
  exchange: ExchangeState,
): Promise<void> {
  const limit = io.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const send = (e: IoEvent) => {
    // The last event of an exchange: the response has been read to its end (or failed) before it is sent.
    if (e.type === 'http.response' || e.type === 'net.ended' || e.type === 'net.failed') {
      exchange.finished = true;
      exchange.onFinished?.();
    }
    if (!exchange.stopped) sendEvent(e);
  };
  let authorization: string | undefined;
  try {
    authorization = await io.authorization?.();
  } catch {
    // The provider could not give a token: nothing was sent, so this attempt is one that never left
    // (refused), not a reset after which the request may have run.
    if (!signal.aborted) send({ type: 'net.failed', fault: 'refused' });
    return;
  }
  if (signal.aborted) return;
  let response: Response;
  try {
    response = await io.fetch(io.url, {
      ...io.requestInit,
      method: ex.method,
      headers: headersFor(io, ex, authorization),
      body: ex.method === 'POST' ? JSON.stringify(ex.body) : undefined,
      signal,
      // Never followed (unless the application chose `redirectPolicy: 'follow'`): a redirect to another
      // origin would carry the session id, the application's headers (its credentials) and the call itself
      // there. The 3xx reaches the machine as a status.
      redirect: io.followRedirects ? 'follow' : 'manual',
    });
  } catch (error) {
    if (!signal.aborted) send({ type: 'net.failed', fault: faultOf(error) });
    return;
  }
  const sessionId = response.headers.get('mcp-session-id') ?? undefined;
  const wwwAuthenticate = response.headers.get('www-authenticate') ?? undefined;
  const advertisement = exchange.advertisements.parse(response.headers.get(ADVERTISEMENT_HEADER));
  const isStream =
    response.status === 200 && response.headers.get('content-type')?.startsWith('text/event-stream');
  if (!isStream) {
    // The headers are proof of life: the stall timer starts over for the body.
    send({ type: 'sse.activity' });
    let body: unknown;
    try {
      // Every STALL_PROGRESS_BYTES are reported: a large body arriving steadily is not stalled, a trickle is.
      let partial = 0;
      const text = await readCappedText(response, limit, (bytes) => {
        partial += bytes;
        if (partial < STALL_PROGRESS_BYTES || signal.aborted) return;
        partial = 0;
        send({ type: 'sse.activity' });
      });
      if (text === undefined) {
        if (signal.aborted || exchange.stopped) return;
        io.onMalformed(
          new Error(`a response body exceeded maxMessageBytes (${limit}); the exchange was cut`),
        );
        send({ type: 'net.failed', fault: 'reset' });
        return;
      }
      body = text === '' ? undefined : tryJson(text);
    } catch (error) {
      if (!signal.aborted) send({ type: 'net.failed', fault: faultOf(error) });
      return;
    }
    if (!signal.aborted)
      send({
        type: 'http.response',
        status: response.status,
        sessionId,
        body,
        advertisement,
        wwwAuthenticate,
      });
    return;
  }
  send({ type: 'http.stream', sessionId, advertisement });
  // What one chunk held, handed over as one event after the chunk is parsed (see `sse.events`).
  let events: SseEvent[] = [];
  let retryMs: number | undefined;
  let activity = false;
  let overflow = false;
  const parser = createParser({
    maxBufferSize: limit,
    onError: (error) => {
      if (error.type === 'max-buffer-size-exceeded') overflow = true;
    },
    onEvent: (e) => {
      let message: JsonRpcMessage | undefined;
      let invalid: SseEvent['invalid'];
      if (!acceptableEventId(e.id) && e.id !== undefined)
        io.onMalformed(new Error(`an SSE event id longer than ${MAX_EVENT_ID_LENGTH} characters; not kept`));
      if (e.data !== '') {
        const parsed = tryJson(e.data);
        message = asJsonRpcMessage(parsed);
        if (!message) {
          invalid = { id: claimedId(parsed) };
          io.onMalformed(
            new Error(`an SSE event carries data that is not JSON-RPC: ${e.data.slice(0, 200)}`),
          );
        }
      }
      events.push({ type: 'sse.event', id: e.id, event: e.event, message, data: e.data, invalid });
    },
    onRetry: (ms) => {
      retryMs = ms;
    },
    onComment: () => {
      activity = true;
    },
  });
  const flush = () => {
    if (events.length > 0) send({ type: 'sse.events', events, retryMs });
    else if (retryMs !== undefined) send({ type: 'sse.retry', ms: retryMs });
    else if (activity) send({ type: 'sse.activity' });
    events = [];
    retryMs = undefined;
    activity = false;
  };
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  // Bytes since the last complete unit: enough of them are proof of life too (see STALL_PROGRESS_BYTES).
  let partial = 0;
  exchange.reading = true;
  try {
    for (;;) {
      const chunk = await reader?.read();
      if (!chunk || chunk.done) break;
      if (signal.aborted) return;
      // Stopped: the body is only drained (see DRAIN_MS); nobody hears its events.
      if (exchange.stopped) continue;
      const before = events.length;
      parser.feed(decoder.decode(chunk.value, { stream: true }));
      // A large event arriving steadily is alive although no event completes; a trickle is not.
      partial =
        events.length > before || activity || retryMs !== undefined ? 0 : partial + chunk.value.byteLength;
      if (partial >= STALL_PROGRESS_BYTES) {
        activity = true;
        partial = 0;
      }
      if (overflow) {
        io.onMalformed(new Error(`an SSE event exceeded maxMessageBytes (${limit}); the stream was cut`));
        send({ type: 'net.failed', fault: 'reset' });
        await reader?.cancel().catch(() => undefined);
        return;
      }
      flush();
    }
  } catch (error) {
    if (!signal.aborted) send({ type: 'net.failed', fault: faultOf(error) });
    return;
  }
  if (!signal.aborted) send({ type: 'net.ended' });
}

/** A server sends the same advertisement header on every response: parse it once, not once per call. */
class AdvertisementCache {
  private header: string | null | undefined;
  private parsed: ReturnType<typeof parseAdvertisement>;
  parse(header: string | null): ReturnType<typeof parseAdvertisement> {
    if (header !== this.header) {
      this.header = header;
      this.parsed = parseAdvertisement(header);
    }
    return this.parsed;
  }
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
