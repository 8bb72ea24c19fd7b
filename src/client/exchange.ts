import { fromCallback } from 'xstate';
import { ADVERTISEMENT_HEADER, parseAdvertisement } from '../../machines/advertisement.js';
import {
  EXCHANGE_START,
  type ExchangeFact,
  type ExchangeFailure,
  type ExchangeState,
  exchangeStep,
  stopPlan,
} from '../../machines/client/exchange-core.js';
import { faultOf } from '../../machines/client/faults.js';
import type { Exchange, IoEvent, SseEvent } from '../../machines/client/io.js';
import {
  acceptableEventId,
  DEFAULT_MAX_MESSAGE_BYTES,
  MAX_EVENT_ID_LENGTH,
} from '../../machines/client/limits.js';
import { asJsonRpcMessage, claimedId } from '../../machines/client/wire.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { cappedEventParser, readCappedText } from './read-capped.js';

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
 * The `exchange` actor the stream machine invokes: one HTTP request, its response read to the end, what
 * was read told to the exchange core (machines/client/exchange-core.ts), whose events go to the machine.
 * Stopping the actor ends its events at once and does what the core's `stopPlan` says (abort now, or
 * drain the body and abort at the time it gives). It decides nothing.
 */
export function createExchangeActor(io: ExchangeIo) {
  const advertisements = new AdvertisementCache();
  return fromCallback<IoEvent, Exchange>(({ input, sendBack }) => {
    const abort = new AbortController();
    const exchange: ExchangeHost = { core: EXCHANGE_START, stopped: false, advertisements };
    void run(io, input, sendBack, abort.signal, exchange);
    return () => {
      exchange.stopped = true;
      const plan = stopPlan(exchange.core, input.method);
      if (plan.kind === 'none') return;
      if (plan.kind === 'abort') {
        abort.abort(STOPPED);
        return;
      }
      const timer = setTimeout(() => abort.abort(STOPPED), plan.wakeInMs);
      timer.unref?.();
      exchange.onFinished = () => clearTimeout(timer);
    };
  });
}

interface ExchangeHost {
  /** The exchange core's state: what was read so far. */
  core: ExchangeState;
  /** The stream machine stopped this exchange: nothing more is sent to it. */
  stopped: boolean;
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
  exchange: ExchangeHost,
): Promise<void> {
  const limit = io.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  /** One fact to the core; its events to the machine (none once the machine stopped listening). */
  const tell = (fact: ExchangeFact) => {
    const step = exchangeStep(exchange.core, fact);
    exchange.core = step.state;
    if (step.state.finished) exchange.onFinished?.();
    if (!exchange.stopped) for (const e of step.events) sendEvent(e);
  };
  const failed = (failure: ExchangeFailure) => tell({ kind: 'failed', failure });
  let authorization: string | undefined;
  try {
    authorization = await io.authorization?.();
  } catch {
    if (!signal.aborted) failed({ kind: 'no-token' });
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
    if (!signal.aborted) failed({ kind: 'network', fault: faultOf(error) });
    return;
  }
  tell({
    kind: 'headers',
    status: response.status,
    contentType: response.headers.get('content-type'),
    sessionId: response.headers.get('mcp-session-id') ?? undefined,
    wwwAuthenticate: response.headers.get('www-authenticate') ?? undefined,
    advertisement: exchange.advertisements.parse(response.headers.get(ADVERTISEMENT_HEADER)),
  });
  if (exchange.core.reading === 'stream') return readStream(io, response, tell, signal, exchange, limit);
  let text: string | undefined;
  try {
    text = await readCappedText(response, limit, (bytes) => {
      if (!signal.aborted) tell({ kind: 'chunk', bytes });
    });
  } catch (error) {
    if (!signal.aborted) failed({ kind: 'network', fault: faultOf(error) });
    return;
  }
  if (text === undefined) {
    if (signal.aborted || exchange.stopped) return;
    io.onMalformed(new Error(`a response body exceeded maxMessageBytes (${limit}); the exchange was cut`));
    failed({ kind: 'over-cap' });
    return;
  }
  if (!signal.aborted) tell({ kind: 'body', body: text === '' ? undefined : tryJson(text) });
}

/** An event stream read chunk by chunk: what each chunk completed goes to the core as one fact. */
async function readStream(
  io: ExchangeIo,
  response: Response,
  tell: (fact: ExchangeFact) => void,
  signal: AbortSignal,
  exchange: ExchangeHost,
  limit: number,
): Promise<void> {
  let events: SseEvent[] = [];
  let retryMs: number | undefined;
  let comment = false;
  const parser = cappedEventParser(limit, {
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
      comment = true;
    },
  });
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const chunk = await reader?.read();
      if (!chunk || chunk.done) break;
      if (signal.aborted) return;
      // Stopped: the body is only drained (the core's `stopPlan`); nobody hears its events.
      if (exchange.stopped) continue;
      if (parser.feed(decoder.decode(chunk.value, { stream: true })) === 'over-cap') {
        io.onMalformed(new Error(`an SSE event exceeded maxMessageBytes (${limit}); the stream was cut`));
        tell({ kind: 'failed', failure: { kind: 'over-cap' } });
        await reader?.cancel().catch(() => undefined);
        return;
      }
      tell({ kind: 'chunk', bytes: chunk.value.byteLength, events, retryMs, comment });
      events = [];
      retryMs = undefined;
      comment = false;
    }
  } catch (error) {
    if (!signal.aborted) tell({ kind: 'failed', failure: { kind: 'network', fault: faultOf(error) } });
    return;
  }
  if (!signal.aborted) tell({ kind: 'ended' });
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
