import type {
  AuthInfo,
  McpHttpHandler,
  McpRequestContext,
  McpServer,
  PerRequestResponseMode,
  Server,
} from '@modelcontextprotocol/server';
import { continuityCapability } from '../../../machines/continuity-extension.js';
import type { JsonRpcRequest } from '../../../machines/jsonrpc.js';
import { isListenRequest } from '../../../machines/listen-wire.js';
import {
  handsToKeyed,
  listsVersions,
  streamsUnkeyedCall,
  withLegacyVersions,
} from '../../../machines/server/era.js';
import {
  holderOf,
  type LimitRefusal,
  type ServerLimits,
  sdkListenBound,
} from '../../../machines/server/limits.js';
import {
  maxResourceSubscriptions,
  refuseOversizeFilter,
} from '../../../machines/server/listen-filter-bound.js';
import {
  type ListenLogLimits,
  listenAttemptOf,
  listenLogLimits,
  positionedAck,
} from '../../../machines/server/listen-log.js';
import { limitReached } from '../../../machines/server/replies.js';
import type { InspectOption } from '../../inspect/keyed-mirror.js';
import { loadOptional } from '../../optional-peer.js';
import { requestServerTrace } from '../../telemetry/request-server-trace.js';
import { type ContinuityTelemetry, globalTelemetry } from '../../telemetry/telemetry.js';
import { serveTasks } from '../tasks/endpoint-hook.js';
import type { Tasks } from '../tasks/runtime.js';
import type { WakePort } from '../wake-port.js';
import { rewritingFirstEvent } from './first-event.js';
import type { KeyedRequests, RunOnSdk } from './keyed-hook.js';
import { OpenListens, releasingOnEnd } from './open-listens.js';
import { PositionedEventBus } from './positioned-bus.js';

/** Builds the application's v2 SDK server for one 2026-07-28 request (`createMcpHandler`'s factory). */
export type ModernServerFactory = (
  ctx: McpRequestContext,
) => McpServer | Server | Promise<McpServer | Server>;

/** How `createContinuityServer` serves 2026-07-28 requests (docs/eras.md, "Two eras on one endpoint"). */
export interface ModernOptions {
  /** A fresh v2 `McpServer` (or `Server`) from `@modelcontextprotocol/server` for each modern request. */
  readonly createServer: ModernServerFactory;
  /**
   * The continuity extension (docs/continuity-extension.md): advertised in `server/discover`, and given
   * every modern `tools/call` and `notifications/cancelled` first. Omitted: the spec's behaviour only
   * (closing a response stream cancels its request).
   */
  readonly keyed?: KeyedRequests;
  /** The tasks extension (`createTasks`): advertised, and given task-capable `tools/call` and `tasks/*` first. */
  readonly tasks?: Tasks;
  /** The SDK's response shaping for unkeyed requests. Default `auto` (JSON unless something streams). */
  readonly responseMode?: PerRequestResponseMode;
  /** SSE keep-alive comments on modern streams. Default: the server's `heartbeatMs`. */
  readonly keepAliveMs?: number;
  /**
   * The change log behind the extension's listen part (docs/continuity-extension.md §12), used when
   * `keyed` is set: a re-opened `subscriptions/listen` is told exactly how many changes it missed when the
   * log still holds every change since its last position. Defaults: 10 minutes, 10,000 changes
   * (`DEFAULT_LISTEN_LOG_LIMITS`). The log is this process's: a re-open that lands on another instance, or
   * after a restart, is reported as a gap of unknown size.
   */
  readonly listenLog?: Partial<ListenLogLimits>;
  /**
   * Resource URIs one `subscriptions/listen` filter may name; a larger filter is answered 400 with
   * -32602 before the SDK sees it (every published change is looked up in every stream's filter).
   * Default 10,000 (`DEFAULT_MAX_RESOURCE_SUBSCRIPTIONS`).
   */
  readonly maxResourceSubscriptions?: number;
  /**
   * An XState inspector (`createInspectorFeed(…).inspect`, any `@statelyai/inspect` inspector) for the
   * listen log, used when `keyed` is set: the page shows it as a `listenLog` actor (its head, what it holds
   * against its retention, each re-open told an exact count or a gap of unknown size). The log is data, not
   * an actor: a mirror is told what it does (src/inspect/listen-log-mirror.ts).
   */
  readonly inspect?: InspectOption;
}

/** One admitted modern request, as the handler read it. */
export interface ModernInput {
  /** The endpoint URL as the client addressed it. */
  readonly url: string;
  readonly headers: Headers;
  /** The body as sent (already within the size and depth limits) and parsed. */
  readonly text: string;
  readonly body: unknown;
  readonly principal: string | undefined;
  /** The caller's address: what the per-principal bounds count by when there is no `authenticate`. */
  readonly remoteAddress?: string;
  /** Fires when the client goes away before its response ended. */
  readonly gone: AbortSignal;
  readonly authInfo: AuthInfo | undefined;
}

export interface ModernEndpoint {
  serve(input: ModernInput): Promise<Response>;
  /** Open `subscriptions/listen` streams, and how many holders have one (tests, metrics). */
  listens(): { readonly open: number; readonly holders: number };
  /** Publishes a change to every open `subscriptions/listen` stream that opted in. */
  readonly notify: {
    toolsChanged(): void;
    promptsChanged(): void;
    resourcesChanged(): void;
    resourceUpdated(uri: string): void;
  };
  close(): Promise<void>;
}

/**
 * The 2026-07-28 side of the endpoint: the official v2 `createMcpHandler` (strict, `legacy: 'reject'`:
 * 2025 traffic never reaches it) does `server/discover`, the `_meta` envelope, the header checks,
 * `subscriptions/listen` and `resultType`. `@modelcontextprotocol/server` is loaded here, on the first
 * modern request, so a server without `modern` never needs it.
 */
export async function createModernEndpoint(
  options: ModernOptions,
  settings: {
    /** The 2025 versions the endpoint also serves: `server/discover` lists them after 2026-07-28. */
    readonly legacyVersions: readonly string[];
    readonly maxBodyBytes: number;
    readonly heartbeatMs: number;
    readonly onError: (e: unknown) => void;
    /** The bounds on open listens (`ServerLimits`). */
    readonly limits: Pick<ServerLimits, 'maxListens' | 'maxListensPerPrincipal' | 'retryAfterSeconds'>;
    /** Counts a request refused at a bound (`server.limited_requests`). */
    readonly limited: (reason: string, status: number) => void;
    /** Where unkeyed requests' SERVER spans go (`ContinuityServerOptions.telemetry`). Default: the globals. */
    readonly telemetry?: () => ContinuityTelemetry;
    /** The server's timer port: the keyed runtime's deadlines become wake-ups asked of it. */
    readonly wakes?: WakePort;
  },
): Promise<ModernEndpoint> {
  const sdk = await loadOptional(() => import('@modelcontextprotocol/server'));
  const keyed = options.keyed;
  if (settings.wakes) keyed?.useWakes?.(settings.wakes);
  const factory = async (ctx: McpRequestContext) => {
    const server = await options.createServer(ctx);
    if (keyed) {
      const low = 'server' in server ? server.server : server;
      // The settings are JSON numbers; the SDK types extension values as JSON objects.
      low.registerCapabilities(
        continuityCapability(keyed.settings) as Parameters<typeof low.registerCapabilities>[0],
      );
    }
    if (options.tasks)
      ('server' in server ? server.server : server).registerCapabilities(options.tasks.capability);
    return server;
  };
  const common = {
    legacy: 'reject' as const,
    maxRequestBodySize: settings.maxBodyBytes,
    keepAliveMs: options.keepAliveMs ?? settings.heartbeatMs,
    // Our bounds on listens answer first (429/503 with Retry-After); the SDK's is a backstop above them.
    maxSubscriptions: sdkListenBound(settings.limits),
    // The SDK also reports every request it refused (header mismatch, bad envelope, unknown version):
    // those are the client's doing and were answered 4xx, not errors of this server.
    onerror: (e: Error) => {
      // Its own bound on listens (a backstop above ours) is such a refusal too.
      if (
        e.name === 'ProtocolError' ||
        e.message.startsWith('Rejected inbound request') ||
        e.message.startsWith('subscriptions/listen refused')
      )
        return;
      settings.onError(e);
    },
  };
  // With the extension, change events go through the listen log, which numbers them for the listen part.
  const now = () => Date.now();
  const listens = new OpenListens(settings.limits);
  const bus = keyed
    ? new PositionedEventBus(
        listenLogLimits(options.listenLog),
        now,
        settings.onError,
        undefined,
        options.inspect,
      )
    : undefined;
  const handler: McpHttpHandler = sdk.createMcpHandler(factory, {
    ...common,
    responseMode: options.responseMode ?? 'auto',
    ...(bus ? { bus } : {}),
  });
  // Keyed runs are detached from any client connection and always stream, so progress is recorded as it
  // happens; they share the subscription bus so a list change reaches every listener once.
  const detached: McpHttpHandler | undefined = keyed
    ? sdk.createMcpHandler(factory, { ...common, responseMode: 'sse', bus: handler.bus })
    : undefined;

  /** Calls an SDK handler, never throwing: its failure is a 500 with a JSON-RPC error. */
  const call = async (h: McpHttpHandler, request: Request, input: ModernInput, parsed?: unknown) => {
    try {
      return await h.fetch(request, {
        ...(input.authInfo ? { authInfo: input.authInfo } : {}),
        ...(parsed !== undefined ? { parsedBody: parsed } : {}),
      });
    } catch (error) {
      settings.onError(error);
      return Response.json(
        { jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal error' } },
        { status: 500 },
      );
    }
  };

  const maxUris = maxResourceSubscriptions(options.maxResourceSubscriptions);

  /** A `subscriptions/listen` stream, admitted: positioned through the listen log with the extension. */
  const listen = async (request: Request, input: ModernInput, gone: AbortController): Promise<Response> => {
    const attempt = bus ? listenAttemptOf(input.body) : undefined;
    if (!bus || !attempt) {
      const response = await call(handler, request, input, input.body);
      if (listsVersions(input.body, response.status))
        return listLegacyVersions(response, settings.legacyVersions);
      return cancelOnClose(response, gone);
    }
    // The SDK subscribes the stream inside its handler; `within` lets the bus note the head then.
    const live = { ...attempt };
    const response = await bus.within(live, () => call(handler, request, input, input.body));
    return cancelOnClose(
      rewritingFirstEvent(response, (m) => {
        const sent = positionedAck(m, live, bus.log, now(), bus.limits);
        bus.inspection?.acknowledged(live, bus.log, sent);
        return sent;
      }),
      gone,
    );
  };

  return {
    async serve(input) {
      const oversize = refuseOversizeFilter(input.body, maxUris);
      if (oversize) return Response.json(oversize.message, { status: oversize.status });
      // The exchange's signal: the SDK cancels the request when it fires (spec: close = cancel). It fires
      // when the client goes away, before the response exists (`input.gone`) or while its body streams
      // (the body is cancelled).
      const gone = new AbortController();
      if (input.gone.aborted) gone.abort();
      else input.gone.addEventListener('abort', () => gone.abort(), { once: true });
      // Built when first needed: a keyed call never needs it (its run on the SDK gets a request of its own),
      // and a Request with a body costs a web stream.
      let built: Request | undefined;
      const requestOf = () => {
        built ??= new Request(input.url, {
          method: 'POST',
          headers: input.headers,
          body: input.text,
          signal: gone.signal,
        });
        return built;
      };
      if (isListenRequest(input.body)) {
        const slot = listens.open(holderOf(input.principal, input.remoteAddress));
        if (!slot.ok) return limitedResponse(slot, input.body, settings.limited);
        try {
          // A listen for task notifications alone is the tasks runtime's (docs/tasks.md).
          const tasked = options.tasks?.listen(input.body, input.principal, gone.signal);
          return releasingOnEnd(tasked ?? (await listen(requestOf(), input, gone)), slot.release);
        } catch (error) {
          slot.release();
          throw error;
        }
      }
      const tasked = serveTasks(options.tasks, input, (r) => call(detached ?? handler, r, input));
      if (tasked) return cancelOnClose(await tasked, gone);
      if (keyed && detached && handsToKeyed(input.body, input.headers)) {
        const run: RunOnSdk = (message: JsonRpcRequest, signal: AbortSignal) =>
          call(
            detached,
            new Request(input.url, {
              method: 'POST',
              headers: input.headers,
              body: JSON.stringify(message),
              signal,
            }),
            input,
          );
        try {
          const served = keyed.serve(
            {
              message: input.body as JsonRpcRequest,
              principal: input.principal,
              get request() {
                return requestOf();
              },
              ...(input.remoteAddress !== undefined ? { address: input.remoteAddress } : {}),
              limited: settings.limited,
            },
            run,
          );
          // Not relayed through `cancelOnClose`: a keyed response is the keyed runtime's own stream, whose
          // cancel already tells it the client went away (the run is detached from the client).
          if (served) return await served;
        } catch (error) {
          settings.onError(error);
          return Response.json(
            { jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal error' } },
            { status: 500 },
          );
        }
      }
      // With the extension, unkeyed calls stream too (keep-alives through idle balancers): the streaming
      // handler, on the client's own connection (closing it cancels the call, as the spec says).
      const serving = detached && streamsUnkeyedCall(input.body, common.keepAliveMs) ? detached : handler;
      // Its SERVER span (src/telemetry/request-server-trace.ts) ends with the body the client is sent.
      const traced = requestServerTrace(settings.telemetry?.() ?? globalTelemetry(), input.body);
      const run = () => call(serving, requestOf(), input, input.body);
      const answered = await (traced ? traced.within(run) : run());
      const response = traced ? traced.watch(answered, gone.signal) : answered;
      if (listsVersions(input.body, response.status))
        return listLegacyVersions(response, settings.legacyVersions);
      return cancelOnClose(response, gone);
    },
    listens: () => listens.stats(),
    notify: handler.notify,
    close: async () => {
      await Promise.all([handler.close(), detached?.close(), keyed?.close(), options.tasks?.close()]);
    },
  };
}

/** A request refused at a bound: 429/503, `Retry-After`, a JSON-RPC error under the request's id; counted. */
function limitedResponse(
  refusal: LimitRefusal,
  body: unknown,
  limited: (reason: string, status: number) => void,
): Response {
  limited(refusal.reason, refusal.status);
  const reply = limitReached(refusal);
  const id = (body as { id?: unknown }).id;
  return Response.json(
    {
      jsonrpc: '2.0',
      id: typeof id === 'string' || typeof id === 'number' ? id : null,
      error: { code: reply.code, message: reply.message },
    },
    { status: reply.status, headers: { 'retry-after': String(reply.retryAfterSeconds) } },
  );
}

/** A JSON `server/discover` answer or -32022 error with our 2025 versions added (machines/server/era.ts). */
async function listLegacyVersions(response: Response, legacy: readonly string[]): Promise<Response> {
  if (!response.headers.get('content-type')?.includes('application/json')) return response;
  const text = await response.text();
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return new Response(text, { status: response.status, headers: response.headers });
  }
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  return new Response(JSON.stringify(withLegacyVersions(message, legacy)), {
    status: response.status,
    headers,
  });
}

/**
 * The same response, whose body's cancellation (the client went away: `writeNodeResponse` cancels the
 * reader) aborts `gone`. A body that ends normally aborts nothing.
 */
function cancelOnClose(response: Response, gone: AbortController): Response {
  const body = response.body;
  if (body === null) return response;
  const reader = body.getReader();
  const relayed = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        controller.error(error);
      }
    },
    async cancel(reason) {
      gone.abort(reason);
      await reader.cancel(reason).catch(() => undefined);
    },
  });
  return new Response(relayed, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
