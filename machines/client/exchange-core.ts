import type { ServerAdvertisement } from '../validity.js';
import type { IoEvent, NetworkFault, SseEvent } from './io.js';
import { STALL_PROGRESS_BYTES } from './limits.js';
import { answerShape } from './modern-call-wire.js';
import { progressStep } from './progress.js';

/**
 * The sans-I/O core of one MCP 2025-11-25 HTTP exchange on the client: what the host observed of a
 * request (headers, body chunks, complete SSE units, the end, a failure) → the `IoEvent`s the stream
 * machine hears, and when a stopped exchange is aborted. Both hosts call it: the runtime
 * (`src/client/exchange.ts`: real fetch, real SSE parser) and the simulated world
 * (`properties/world/client.ts`: the simulated network). The host decides nothing: not which answers are
 * event streams, not when bytes prove life, not how a failure or an oversized message is named, not how
 * long a stopped body is drained.
 *
 * `ExchangeRules` are the decisions it reads, a parameter so the world can run a deliberately wrong one
 * (properties/mutants-client2025.ts); the runtime always runs `EXCHANGE_RULES`.
 */
export interface ExchangeRules {
  /** Whether a response of this status and `Content-Type` is read as an event stream (else as one body). */
  readonly readsAsStream: (status: number, contentType: string | null) => boolean;
  /** Bytes that complete no unit prove life once this many have arrived (`progressStep`). */
  readonly progressBytes: number;
  /** How a failure the host saw is named to the machine (`noToken`: the credentials provider threw). */
  readonly faultOf: (failure: ExchangeFailure) => NetworkFault;
  /** How long a stopped POST's body is read on before it is aborted (`stopPlan`). */
  readonly drainMs: number;
}

/**
 * - `network`: fetch or the body failed (the fault as `machines/client/faults.ts` named it);
 * - `no-token`: the provider could not give a token, so nothing was sent;
 * - `over-cap`: a message passed `maxMessageBytes` and the host stopped reading.
 */
export type ExchangeFailure =
  | { readonly kind: 'network'; readonly fault: NetworkFault }
  | { readonly kind: 'no-token' }
  | { readonly kind: 'over-cap' };

/**
 * A body being drained is aborted after this long. A request stream stops as soon as its answer is in,
 * often a moment before the end of the body that follows it (a proxy, a real network); aborting then
 * destroys a connection that could have gone back to the pool. Short, because a server may also keep a
 * finished stream open (the SDK server does, after a replay), and that connection should not be held long.
 */
export const DRAIN_MS = 200;

/** The rules the runtime runs. */
export const EXCHANGE_RULES: ExchangeRules = {
  readsAsStream: (status, contentType) => answerShape(status, contentType) === 'event-stream',
  progressBytes: STALL_PROGRESS_BYTES,
  // Nothing was sent when there was no token: an attempt that never left. A message past the cap is cut
  // mid-answer, as a reset is.
  faultOf: (failure) =>
    failure.kind === 'network' ? failure.fault : failure.kind === 'no-token' ? 'refused' : 'reset',
  drainMs: DRAIN_MS,
};

/** The response's status line and the headers the machine reads. */
export interface ExchangeHead {
  readonly status: number;
  readonly contentType: string | null;
  readonly sessionId?: string;
  readonly wwwAuthenticate?: string;
  readonly advertisement?: ServerAdvertisement;
}

/** What the host observed of one exchange, in the order it observed it. */
export type ExchangeFact =
  | ({ readonly kind: 'headers' } & ExchangeHead)
  /**
   * One chunk of the body: its size, and the complete units it finished (SSE events, the last `retry:`,
   * whether a comment came); a JSON body's chunks finish none.
   */
  | {
      readonly kind: 'chunk';
      readonly bytes: number;
      readonly events?: readonly SseEvent[];
      readonly retryMs?: number;
      readonly comment?: boolean;
    }
  /** A body that is not an event stream, read to its end (parsed JSON, or its text). */
  | { readonly kind: 'body'; readonly body: unknown }
  /** The event stream ended cleanly. */
  | { readonly kind: 'ended' }
  | { readonly kind: 'failed'; readonly failure: ExchangeFailure };

/** What the core remembers of one exchange. */
export interface ExchangeState {
  /** The headers, kept for the answer of a body (`http.response` carries them). */
  readonly head?: ExchangeHead;
  /** How the body is read, once the headers are in. */
  readonly reading?: 'stream' | 'body';
  /** Bytes since the last complete unit (the progress rule). */
  readonly partial: number;
  /** The last event of the exchange was produced: it has nothing left to abort. */
  readonly finished: boolean;
}

export const EXCHANGE_START: ExchangeState = { partial: 0, finished: false };

export interface ExchangeStep {
  readonly state: ExchangeState;
  /** The stream machine's events, in order. */
  readonly events: readonly IoEvent[];
}

/** One fact of an exchange → the stream machine's events. Pure. */
export function exchangeStep(
  state: ExchangeState,
  fact: ExchangeFact,
  rules: ExchangeRules = EXCHANGE_RULES,
): ExchangeStep {
  switch (fact.kind) {
    case 'headers': {
      const { kind: _, ...head } = fact;
      if (rules.readsAsStream(fact.status, fact.contentType))
        return {
          state: { ...state, head, reading: 'stream', partial: 0 },
          events: [{ type: 'http.stream', sessionId: fact.sessionId, advertisement: fact.advertisement }],
        };
      // The headers are proof of life: the stall timer starts over for the body.
      return { state: { ...state, head, reading: 'body', partial: 0 }, events: [{ type: 'sse.activity' }] };
    }
    case 'chunk': {
      // A body's chunks complete no unit, whatever they hold: only an event stream has units.
      const stream = state.reading === 'stream';
      const events = stream ? (fact.events ?? []) : [];
      const retryMs = stream ? fact.retryMs : undefined;
      const comment = stream && fact.comment === true;
      const completed = events.length > 0 || retryMs !== undefined || comment;
      const { partial, alive } = progressStep(state.partial, fact.bytes, completed, rules.progressBytes);
      const next = { ...state, partial };
      // What one chunk held is handed over as one event: its messages (with its `retry:`), else its
      // `retry:`, else proof of life (a comment, or enough bytes).
      if (events.length > 0) return { state: next, events: [{ type: 'sse.events', events, retryMs }] };
      if (retryMs !== undefined) return { state: next, events: [{ type: 'sse.retry', ms: retryMs }] };
      return { state: next, events: comment || alive ? [{ type: 'sse.activity' }] : [] };
    }
    case 'body': {
      const head = state.head;
      return {
        state: { ...state, finished: true },
        events: [
          {
            type: 'http.response',
            status: head?.status ?? 0,
            sessionId: head?.sessionId,
            body: fact.body,
            advertisement: head?.advertisement,
            wwwAuthenticate: head?.wwwAuthenticate,
          },
        ],
      };
    }
    case 'ended':
      return { state: { ...state, finished: true }, events: [{ type: 'net.ended' }] };
    case 'failed':
      return {
        state: { ...state, finished: true },
        events: [{ type: 'net.failed', fault: rules.faultOf(fact.failure) }],
      };
  }
}

/**
 * What stopping an exchange does, decided when the stream machine stops it:
 * - `none`: it finished already (an abort without a reason costs a DOMException with a stack: ~3 % of a
 *   busy client's CPU);
 * - `abort`: at once, for anything but a POST's event stream being read (a GET stream, the standalone
 *   stream or a resume, may never end);
 * - `drain`: a POST's event stream is read on, its events dropped, and aborted `wakeInMs` later unless it
 *   ended first.
 */
export type StopPlan =
  | { readonly kind: 'none' }
  | { readonly kind: 'abort' }
  | { readonly kind: 'drain'; readonly wakeInMs: number };

export function stopPlan(
  state: ExchangeState,
  method: 'POST' | 'GET',
  rules: ExchangeRules = EXCHANGE_RULES,
): StopPlan {
  if (state.finished) return { kind: 'none' };
  if (state.reading !== 'stream' || method !== 'POST') return { kind: 'abort' };
  return { kind: 'drain', wakeInMs: rules.drainMs };
}
