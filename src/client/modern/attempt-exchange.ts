import { type ActorSystem, fromCallback } from 'xstate';
import {
  ATTEMPT_START,
  type AttemptFact,
  type AttemptStep,
  attemptStep,
  parseBody,
  readsAsEvents,
} from '../../../machines/client/call-core.js';
import { faultOf } from '../../../machines/client/faults.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../../../machines/client/limits.js';
import type { AttemptInput, ModernCallEvent } from '../../../machines/client/modern-call.machine.js';
import { cappedEventParser, readCappedText } from '../read-capped.js';

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

/** Any actor's system (xstate exports no `AnyActorSystem`). */
// biome-ignore lint/suspicious/noExplicitAny: xstate's own `AnyActorSystem` is `ActorSystem<any>`.
export type System = ActorSystem<any>;

/**
 * Why a stopped attempt's fetch is aborted. One reason for all: `abort()` without one builds a
 * `DOMException` (its stack included) for every call, and a finished call's attempt is stopped too.
 */
const STOPPED = new Error('attempt stopped');

/**
 * The call machine's `exchange`: POSTs one attempt and tells the call core (machines/client/call-core.ts)
 * what it observes: headers, bytes, events, the answer, the end or the failure. The core turns each fact
 * into the machine's events; this decides nothing. Stopping it aborts the POST. Its I/O is looked up by
 * the call's actor system, so one provided machine serves every call (src/client/modern/call-machine-io.ts).
 */
export function attemptExchange(ioOf: (system: System) => AttemptIo) {
  return fromCallback<ModernCallEvent, AttemptInput>(({ input, sendBack, system }) => {
    const io = ioOf(system);
    const abort = new AbortController();
    let state = ATTEMPT_START;
    const tell: Tell = (fact, before) => {
      if (abort.signal.aborted) return;
      const step = attemptStep(state, fact, io.now());
      state = step.state;
      // Before the events: the last of them may end the call, which reads what `before` keeps.
      before?.(step);
      for (const e of step.events) sendBack(e);
    };
    void run(io, input, tell, abort.signal).catch((error: unknown) => {
      // Nothing from the network may escape: whatever went wrong is a failure of this attempt.
      tell({ kind: 'failed', fault: faultOf(error) });
    });
    return () => abort.abort(STOPPED);
  });
}

/** Tells the core one fact; `before` sees the core's step before its events reach the machine. */
type Tell = (fact: AttemptFact, before?: (step: AttemptStep) => void) => void;

async function run(io: AttemptIo, attempt: AttemptInput, tell: Tell, signal: AbortSignal): Promise<void> {
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
    tell({ kind: 'failed', fault: faultOf(error) });
    return;
  }
  tell({ kind: 'headers' });
  const contentType = response.headers.get('content-type');
  if (readsAsEvents(response.status, contentType)) return readEvents(response, tell, signal, limit);
  let text: string | undefined;
  try {
    text = await readCappedText(response, limit, (bytes) => tell({ kind: 'bytes', bytes, completed: false }));
  } catch (error) {
    tell({ kind: 'failed', fault: faultOf(error) });
    return;
  }
  if (text === undefined) {
    tell({ kind: 'over-cap' });
    return;
  }
  tell(
    {
      kind: 'answer',
      status: response.status,
      contentType,
      body: parseBody(text),
      retryAfter: response.headers.get('retry-after'),
      wallMs: Date.now(),
    },
    (step) => {
      if (step.keepRaw)
        io.last.answer = {
          status: response.status,
          statusText: response.statusText,
          headers: response.headers,
          text,
        };
    },
  );
}

async function readEvents(response: Response, tell: Tell, signal: AbortSignal, limit: number): Promise<void> {
  let completed = false;
  const parser = cappedEventParser(limit, {
    onEvent: (e) => {
      completed = true;
      tell({ kind: 'event', data: parseBody(e.data), event: e.event, eventId: e.id });
    },
    onComment: () => {
      completed = true;
      tell({ kind: 'keep-alive' });
    },
    onRetry: () => {
      completed = true;
      tell({ kind: 'keep-alive' });
    },
  });
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const chunk = reader ? await reader.read() : { done: true as const, value: undefined };
      if (chunk.done) break;
      if (signal.aborted) return;
      completed = false;
      if (parser.feed(decoder.decode(chunk.value, { stream: true })) === 'over-cap') {
        await reader?.cancel().catch(() => undefined);
        tell({ kind: 'over-cap' });
        return;
      }
      tell({ kind: 'bytes', bytes: chunk.value.byteLength, completed });
    }
  } catch (error) {
    tell({ kind: 'failed', fault: faultOf(error) });
    return;
  }
  tell({ kind: 'ended' });
}
