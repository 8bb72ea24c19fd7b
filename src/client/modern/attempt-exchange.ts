import { createParser } from 'eventsource-parser';
import { fromCallback } from 'xstate';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../../../machines/client/limits.js';
import type { AttemptInput, StatelessCallEvent } from '../../../machines/client/stateless-call.machine.js';
import {
  answerShape,
  asMessage,
  endOfAnswer,
  endOfFetchError,
} from '../../../machines/client/stateless-wire.js';
import { readCappedText } from '../read-capped.js';

/** The last HTTP answer of a call that was not a stream: a runtime may hand it to the SDK as it came. */
export interface RawAnswer {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  readonly text: string;
}

export interface AttemptIo {
  readonly url: string | URL;
  /** The application's (the SDK's) request init: its headers are every attempt's headers. */
  readonly init: RequestInit;
  readonly fetch: typeof fetch;
  /** Monotonic ms, the clock of every event's `at`. */
  readonly now: () => number;
  /** The last non-stream answer, or the last fetch error, of this call (for the SDK, on a failure). */
  readonly last: { answer?: RawAnswer; error?: unknown };
  readonly maxMessageBytes?: number;
  /** Told as each attempt is sent (telemetry: an attempt event on the call's span). */
  readonly onAttempt?: (attempt: AttemptInput) => void;
}

/**
 * The call machine's `exchange`: POSTs one attempt and reports its bytes, messages and end. It decides
 * nothing (the names of ends come from `machines/client/stateless-wire.ts`). Stopping it aborts the POST.
 */
export function attemptExchange(io: AttemptIo) {
  return fromCallback<StatelessCallEvent, AttemptInput>(({ input, sendBack }) => {
    const abort = new AbortController();
    let stopped = false;
    const send = (e: StatelessCallEvent) => {
      if (!stopped) sendBack(e);
    };
    void run(io, input, send, abort.signal).catch((error: unknown) => {
      // Nothing from the network may escape: whatever went wrong is a cut of this attempt.
      if (!abort.signal.aborted) send({ type: 'attempt.ended', at: io.now(), end: endOfFetchError(error) });
    });
    return () => {
      stopped = true;
      abort.abort();
    };
  });
}

async function run(
  io: AttemptIo,
  attempt: AttemptInput,
  send: (e: StatelessCallEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  const limit = io.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  io.onAttempt?.(attempt);
  let response: Response;
  try {
    response = await io.fetch(io.url, {
      ...io.init,
      headers: new Headers(io.init.headers),
      body: JSON.stringify(attempt.request),
      signal,
    });
  } catch (error) {
    if (signal.aborted) return;
    io.last.error = error;
    send({ type: 'attempt.ended', at: io.now(), end: endOfFetchError(error) });
    return;
  }
  send({ type: 'attempt.activity', at: io.now() });
  const shape = answerShape(response.status, response.headers.get('content-type'));
  if (shape === 'event-stream') return readEvents(io, response, send, signal, limit);
  let text: string | undefined;
  try {
    text = await readCappedText(response, limit, () => send({ type: 'attempt.activity', at: io.now() }));
  } catch {
    text = undefined;
  }
  // A body that broke off, or passed the cap (whose reading stopped there): read as a cut.
  if (text === undefined) {
    if (!signal.aborted) send({ type: 'attempt.ended', at: io.now(), end: { kind: 'cut-mid-stream' } });
    return;
  }
  if (signal.aborted) return;
  const body = parseJson(text);
  const message = shape === 'json' ? asMessage(body) : undefined;
  if (message) {
    send({ type: 'attempt.message', at: io.now(), message });
    send({ type: 'attempt.ended', at: io.now(), end: { kind: 'ended-without-answer' } });
    return;
  }
  io.last.answer = {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
    text,
  };
  send({
    type: 'attempt.ended',
    at: io.now(),
    end: endOfAnswer(response.status, body, response.headers.get('retry-after'), Date.now()),
  });
}

async function readEvents(
  io: AttemptIo,
  response: Response,
  send: (e: StatelessCallEvent) => void,
  signal: AbortSignal,
  limit: number,
): Promise<void> {
  let overflow = false;
  const parser = createParser({
    maxBufferSize: limit,
    onError: (error) => {
      if (error.type === 'max-buffer-size-exceeded') overflow = true;
    },
    onEvent: (e) => {
      if (e.event !== undefined && e.event !== 'message') return;
      const message = asMessage(parseJson(e.data));
      // Data that is not JSON-RPC is dropped: it is neither a message for the application nor an answer.
      if (message) send({ type: 'attempt.message', at: io.now(), message, eventId: e.id || undefined });
    },
  });
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const chunk = reader ? await reader.read() : { done: true as const, value: undefined };
      if (chunk.done) break;
      if (signal.aborted) return;
      send({ type: 'attempt.activity', at: io.now() });
      parser.feed(decoder.decode(chunk.value, { stream: true }));
      if (overflow) {
        await reader?.cancel().catch(() => undefined);
        send({ type: 'attempt.ended', at: io.now(), end: { kind: 'cut-mid-stream' } });
        return;
      }
    }
  } catch {
    if (!signal.aborted) send({ type: 'attempt.ended', at: io.now(), end: { kind: 'cut-mid-stream' } });
    return;
  }
  if (!signal.aborted) send({ type: 'attempt.ended', at: io.now(), end: { kind: 'ended-without-answer' } });
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
