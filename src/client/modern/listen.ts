import { createActor, type InspectionEvent, type Observer } from 'xstate';
import type { ReconnectPolicy } from '../../../machines/backoff.js';
import { DEFAULT_STALL_TIMEOUT_MS } from '../../../machines/client/limits.js';
import {
  asListenRequest,
  isListenStream,
  type ListenGapFacts,
  listenMachine,
} from '../../../machines/client/listen.machine.js';
import type { JsonRpcMessage } from '../../../machines/jsonrpc.js';
import { createExchangeActor, type FetchLike } from '../exchange.js';

export type { ReconnectPolicy } from '../../../machines/backoff.js';

/** What may have been missed while a listen stream was down, reported once it is open again. */
export interface ListenGap extends ListenGapFacts {
  /** When the stream was seen broken (`Date.now()`). */
  readonly brokenAt: number;
  /** When the re-opened stream was acknowledged. */
  readonly reopenedAt: number;
}

export interface ReopeningListenArgs {
  /** What the application passed to `fetch`. */
  readonly input: string | URL | Request;
  readonly init: RequestInit | undefined;
  /** The fetch every attempt goes through. */
  readonly fetch: typeof fetch;
  /** Re-open backoff; `DEFAULT_RECONNECT_POLICY` when absent. */
  readonly policy?: ReconnectPolicy;
  /** Called once per re-open after a break of an acknowledged stream. */
  readonly onGap?: (gap: ListenGap) => void;
  /** Called with what to re-list (`tools`, `prompts`, `resources`, `resource:<uri>`), with `onGap`. */
  readonly onRelist?: (what: readonly string[]) => void;
  /**
   * Silence (not even a keep-alive) that counts as a dead connection, then re-opened; 0 turns it off.
   * Default `DEFAULT_STALL_TIMEOUT_MS` (5 min); the official server sends a keep-alive every 15 s.
   */
  readonly stallTimeoutMs?: number;
  /** Seeds the jitter (replayable runs); random when absent. */
  readonly jitterSeed?: number;
  /**
   * Declare the continuity extension and send the last position on a re-open, so a server with its listen
   * part (docs/continuity-extension.md §12) reports exact gaps. Default true; other servers ignore both.
   */
  readonly useExtension?: boolean;
  /** An XState inspector for the stream's machine (`createInspectorFeed`'s `inspect`). */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
}

const encoder = new TextEncoder();
const frame = (message: JsonRpcMessage) =>
  encoder.encode(`event: message\ndata: ${JSON.stringify(message)}\n\n`);

/**
 * `fetch` for a 2026-07-28 `subscriptions/listen` POST whose response body survives breaks: it
 * resolves with ONE event-stream `Response` and, when the connection breaks, re-POSTs the same
 * request (a new JSON-RPC id) after backoff with full jitter, writing into the same body. The
 * application (the official v2 `Client`) sees the break only through what is delivered after the
 * re-open: messages stamped with its own subscription id, a synthesized change notification per
 * subscribed type (so its list-changed handlers re-list), and `onGap` / `onRelist`.
 *
 * The first attempt's answer, when it is not an event stream (a refused connection, an HTTP error,
 * a JSON answer), is returned (or thrown) unchanged. Aborting `init.signal` ends the body and
 * re-opens nothing. A request that is not a `subscriptions/listen` is simply fetched. Every decision
 * is `listenMachine`'s (machines/client/listen.machine.ts); this is its I/O.
 */
export async function reopeningListen(args: ReopeningListenArgs): Promise<Response> {
  const base = args.input instanceof Request ? args.input : undefined;
  const bodyText =
    typeof args.init?.body === 'string'
      ? args.init.body
      : base !== undefined
        ? await base.clone().text()
        : undefined;
  const request = asListenRequest(parseJson(bodyText));
  if (request === undefined) return args.fetch(args.input, args.init);

  const url = new URL(base !== undefined ? base.url : String(args.input));
  const headers = new Headers(base?.headers);
  for (const [name, value] of new Headers(args.init?.headers)) headers.set(name, value);
  const signal = args.init?.signal ?? base?.signal ?? undefined;
  const requestInit: RequestInit = { ...args.init, headers, body: undefined, signal: undefined };

  return new Promise<Response>((resolve, reject) => {
    let settled = false;
    const settle = (outcome: { response: Response } | { error: unknown }) => {
      if (settled) return;
      settled = true;
      if ('response' in outcome) resolve(outcome.response);
      else reject(outcome.error);
    };
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    let bodyEnded = false;
    const endBody = (error?: Error) => {
      if (bodyEnded || controller === undefined) return;
      bodyEnded = true;
      try {
        if (error !== undefined) controller.error(error);
        else controller.close();
      } catch {
        // The reader already cancelled it.
      }
    };

    // Until the application holds a stream, an answer that is not one is the server's, passed through
    // unchanged (headers included: a 401's WWW-Authenticate); the exchange actor reads a copy.
    const attemptFetch: FetchLike = async (target, init) => {
      if (settled) return args.fetch(target, init);
      try {
        const response = await args.fetch(target, init);
        if (isListenStream(response.status, response.headers.get('content-type'))) return response;
        const copy = response.clone();
        settle({ response });
        return copy;
      } catch (error) {
        settle({ error });
        throw error;
      }
    };

    const actor = createActor(
      listenMachine.provide({
        actors: {
          exchange: createExchangeActor({
            url,
            fetch: attemptFetch,
            requestInit,
            onMalformed: () => undefined,
          }),
        },
      }),
      {
        input: {
          request,
          policy: args.policy,
          jitterSeed: args.jitterSeed ?? randomSeed(),
          stallTimeoutMs: args.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS,
          useExtension: args.useExtension ?? true,
        },
        inspect: args.inspect,
      },
    );

    const body = new ReadableStream<Uint8Array>({
      start: (c) => {
        controller = c;
      },
      // The reader gave up on the body (the application closed it): nothing more is re-opened.
      cancel: () => actor.send({ type: 'app.close' }),
    });

    let brokenAt: number | undefined;
    actor.on('listen.handover', () =>
      settle({
        response: new Response(body, {
          status: 200,
          headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
        }),
      }),
    );
    actor.on('listen.deliver', ({ messages }) => {
      if (bodyEnded || controller === undefined) return;
      for (const message of messages) controller.enqueue(frame(message));
    });
    actor.on('listen.broken', () => {
      brokenAt ??= Date.now();
    });
    actor.on('listen.gap', ({ gap }) => {
      const at = Date.now();
      const report: ListenGap = { ...gap, brokenAt: brokenAt ?? at, reopenedAt: at };
      brokenAt = undefined;
      try {
        args.onGap?.(report);
      } catch {
        // An application callback never breaks the stream.
      }
    });
    actor.on('listen.relist', ({ what }) => {
      try {
        args.onRelist?.(what);
      } catch {
        // As above.
      }
    });

    const onAbort = () => actor.send({ type: 'app.close' });
    actor.subscribe({
      // A failure inside the machine (none is known) ends the body with it rather than escaping uncaught.
      error: (error) => {
        signal?.removeEventListener('abort', onAbort);
        const reason = error instanceof Error ? error : new Error(String(error));
        settle({ error: reason });
        endBody(reason);
      },
      next: (snapshot) => {
        if (snapshot.status !== 'done') return;
        signal?.removeEventListener('abort', onAbort);
        const state = snapshot.value;
        if (state === 'closed') {
          const reason =
            signal?.reason instanceof Error ? signal.reason : new DOMException('aborted', 'AbortError');
          settle({ error: reason });
          endBody(reason);
        } else if (state === 'givenUp') {
          endBody(
            new Error(`subscriptions/listen: the re-open was refused (HTTP ${snapshot.context.refusal})`),
          );
        } else if (state === 'notOpened') {
          // The first attempt's answer was passed through; if there was none, it stalled.
          settle({ error: new Error('subscriptions/listen: no response within the stall timeout') });
          endBody();
        } else {
          // endedByServer: its answer was delivered; notOpened: the answer was passed through.
          endBody();
        }
      },
    });
    if (signal?.aborted) {
      settle({ error: signal.reason });
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    actor.start();
  });
}

function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function randomSeed(): number {
  return Math.floor(Math.random() * 2 ** 32) >>> 0;
}
