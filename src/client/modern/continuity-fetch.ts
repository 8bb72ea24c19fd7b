import { randomInt, randomUUID } from 'node:crypto';
import { createActor, type InspectionEvent, type Observer } from 'xstate';
import { callEnding, callInput, callIsKeyed } from '../../../machines/client/call-core.js';
import { CANCEL_DEADLINE_MS } from '../../../machines/client/limits.js';
import { DEFAULT_MAX_LISTING_BYTES, endsListing } from '../../../machines/client/listing-answer.js';
import type { ModernCallOutput, ToolHints } from '../../../machines/client/modern-call.machine.js';
import {
  DEFAULT_MODERN_CALL_POLICY,
  type ModernCallDecision,
  type ModernCallPolicy,
} from '../../../machines/client/modern-call-decide.js';
import {
  hintsFromToolsList,
  PROTOCOL_VERSION_META,
  rawAnswerAs,
  routeOutgoing,
  settingsFromDiscover,
} from '../../../machines/client/modern-call-wire.js';
import type { ContinuitySettings } from '../../../machines/continuity-extension.js';
import { ContinuityMeta } from '../../../machines/continuity-extension.js';
import type { GapDetails } from '../../../machines/decide.js';
import { isResponse, type JsonRpcMessage, type JsonRpcRequest } from '../../../machines/jsonrpc.js';
import { settleCall } from '../../../machines/tasks/journal-settle.js';
import { type FollowOutcome, followAnswer } from '../../../machines/tasks/task-follow.js';
import { DEFAULT_JOURNAL_POLICY } from '../../../machines/tasks/task-journal.js';
import type { ContinuityMetrics } from '../../metrics/continuity-metrics.js';
import { ClientCallTrace } from '../../telemetry/client-call-trace.js';
import { type ContinuityTelemetry, globalTelemetry } from '../../telemetry/telemetry.js';
import type { AttemptIo } from './attempt-exchange.js';
import { bindCallIo, type CallIo, ioCallMachine } from './call-machine-io.js';
import { type CallJournal, journaledCall } from './journaled-call.js';
import { type ListenGap, type ReconnectPolicy, reopeningListen } from './listen.js';
import { passListing } from './pass-listing.js';
import { SdkResponse } from './sdk-response.js';
import { journalBookOf } from './task-journal.js';
import {
  declaringTasks,
  followCall,
  followTaskWith,
  type TaskFollowOptions,
  taskHandleIn,
  tasksMetaOf,
} from './tasks-follow.js';

export interface ContinuityFetchOptions {
  /** The fetch every request really goes through (auth wrappers, an undici agent…). Default: global fetch. */
  readonly fetch?: typeof fetch;
  /** Re-issue budget, backoff, memo margin, whether tool annotations are trusted. */
  readonly policy?: Partial<ModernCallPolicy>;
  /** No byte for this long on a call's stream counts as a cut. Default 30 s; 0 turns it off. */
  readonly stallTimeoutMs?: number;
  /**
   * Send the continuity extension's idempotency key when the server advertises it, and ask for exact
   * listen gaps (the extension's listen part). Default true.
   */
  readonly useExtension?: boolean;
  /** Events of a keyed call were evicted on the server (exact count): the application may re-read state. */
  readonly onGap?: (gap: GapDetails, call: { readonly toolName: string }) => void;
  /** Every 2026-07-28 call's ending, for logs and metrics (the SDK sees only the answer or the error). */
  readonly onCallEnded?: (ending: ModernCallOutput & { readonly toolName: string }) => void;
  /** A `subscriptions/listen` stream broke and was re-opened: what may have been missed (listen.ts). */
  readonly onListenGap?: (gap: ListenGap) => void;
  /** What to re-list after a listen stream's gap (`tools`, `prompts`, `resources`, `resource:<uri>`). */
  readonly onRelist?: (what: readonly string[]) => void;
  /** How a broken listen stream is re-opened: backoff with full jitter. Default `DEFAULT_RECONNECT_POLICY`. */
  readonly listenPolicy?: ReconnectPolicy;
  /**
   * No byte (not even a keep-alive) for this long on a listen stream, or before its headers, counts as a
   * break (the first attempt: the listen fails). Default 5 min (`DEFAULT_STALL_TIMEOUT_MS`); 0 turns it off.
   */
  readonly listenStallTimeoutMs?: number;
  /**
   * No `server/discover` or `tools/list` answer is read beyond this many bytes: the application gets a
   * JSON-RPC error (-32055, `data.reason: 'answer_too_large'`) instead. Default 16 MiB.
   */
  readonly maxListingBytes?: number;
  /** Makes idempotency keys. Default: a random UUID (122 random bits). */
  readonly newKey?: () => string;
  /**
   * Spans and duration metrics on OpenTelemetry's MCP conventions (docs/operations.md, "Traces"). Default: the OTel
   * API's global tracer, meter and propagator (no-ops without an SDK).
   */
  readonly telemetry?: ContinuityTelemetry;
  /** Records re-issues, attempts per call, outcome unknown by reason, listen gaps (docs/operations.md, "Metrics"). */
  readonly metrics?: ContinuityMetrics;
  /**
   * Follow task handles (the tasks extension, docs/tasks.md "The client"): each 2026-07-28 `tools/call`
   * declares `io.modelcontextprotocol/tasks`, and a `resultType: "task"` answer is polled with `tasks/get`
   * (retried after a cut, never reported failed for a network fault) until the task ends; the SDK gets
   * the task's result or error as the call's answer. Default: off (a handle reaches the SDK as it came).
   */
  readonly tasks?: TaskFollowOptions;
  /** An XState inspector for every call's and listen stream's machine (`createInspectorFeed`'s `inspect`). */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
}

/** What one endpoint (URL) told us: the extension's settings, and tool hints from `tools/list`. */
interface EndpointFacts {
  extension?: ContinuitySettings;
  readonly hints: Map<string, ToolHints>;
}

/**
 * A `fetch` for the official v2 client transport that gives a `tools/call` on MCP 2026-07-28 the
 * continuity guarantees, the ONE line an application changes:
 *
 * ```ts
 * new StreamableHTTPClientTransport(url, { fetch: continuityFetch() })
 * ```
 *
 * - 2025-era traffic (no 2026 `_meta` envelope) and every other request pass through untouched.
 * - `server/discover` and `tools/list` results are read as they pass: the extension's settings, the tools'
 *   `readOnlyHint` / `idempotentHint`. They reach the SDK as they arrive (an event stream ends with the
 *   request's own response, however long the server keeps it open) and are capped (`maxListingBytes`).
 * - A 2026-07-28 `tools/call` runs `modernCallMachine`: re-issued with a new id only when that cannot
 *   duplicate a side effect (through the extension: the same key and the last event id), and otherwise
 *   ended AT ONCE as outcome unknown: the SDK gets a JSON-RPC error `OUTCOME_UNKNOWN` (-32050) with
 *   `data: { reason, idempotencyKey? }`, so `client.callTool` rejects now (`isOutcomeUnknown(err)`), never
 *   after its 60 s request timeout. The SDK sees ONE response: every message of every attempt in order,
 *   none twice, the answer with its own id and its own progress token.
 * - The SDK's cancel (its abort signal) is the call's cancellation; with the extension the explicit
 *   cancel request is sent as well (docs/continuity-extension.md §13).
 */
export function continuityFetch(options: ContinuityFetchOptions = {}): typeof fetch {
  const inner = options.fetch ?? globalThis.fetch;
  const endpoints = new Map<string, EndpointFacts>();
  const factsFor = (url: string): EndpointFacts => {
    let facts = endpoints.get(url);
    if (!facts) {
      facts = { hints: new Map() };
      endpoints.set(url, facts);
    }
    return facts;
  };
  const policy: ModernCallPolicy = { ...DEFAULT_MODERN_CALL_POLICY, ...options.policy };
  const telemetry = options.telemetry ?? globalTelemetry();
  const newKey = options.newKey ?? randomUUID;
  const journal = options.tasks?.journal
    ? journalBookOf(options.tasks.journal, { ...DEFAULT_JOURNAL_POLICY, ...options.tasks.journalPolicy })
    : undefined;

  const continuity = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const body = init?.body;
    if (
      input instanceof Request ||
      (init?.method ?? 'GET').toUpperCase() !== 'POST' ||
      typeof body !== 'string'
    )
      return inner(input, init);
    const route = routeOutgoing(parse(body));
    const facts = factsFor(String(input));
    switch (route.kind) {
      case 'pass':
        return inner(input, init);
      case 'listen': {
        return reopeningListen({
          input,
          init,
          fetch: inner,
          useExtension: options.useExtension !== false,
          ...(options.listenPolicy ? { policy: options.listenPolicy } : {}),
          ...(options.listenStallTimeoutMs !== undefined
            ? { stallTimeoutMs: options.listenStallTimeoutMs }
            : {}),
          ...(options.onListenGap || options.metrics
            ? {
                onGap: (gap: ListenGap) => {
                  options.metrics?.client.listenGap(gap);
                  options.onListenGap?.(gap);
                },
              }
            : {}),
          ...(options.onRelist ? { onRelist: options.onRelist } : {}),
          inspect: options.inspect,
        });
      }
      case 'discover':
      case 'tools-list': {
        const kind = route.kind;
        const request = route.request;
        // Passed on as it arrives, read on the way; it ends with the request's own response.
        return passListing(await inner(input, init), {
          request,
          maxBytes: options.maxListingBytes ?? DEFAULT_MAX_LISTING_BYTES,
          onMessage: (m) => {
            if (endsListing(m, request.id)) learn(facts, kind, m);
          },
        });
      }
      case 'call': {
        const request = options.tasks ? declaringTasks(route.request) : route.request;
        if (!journal) return runCall(input, init ?? {}, request, route.toolName, facts);
        // The journal's entry is stored before the first send (docs/tasks.md, "The journal").
        const keyed = callIsKeyed({
          request,
          tool: facts.hints.get(route.toolName),
          extension: facts.extension,
          useExtension: options.useExtension !== false,
          policy,
          newKey,
          stallTimeoutMs: 0,
          startedAt: 0,
          jitterSeed: 0,
        });
        const call = { url: String(input), toolName: route.toolName, args: request.params?.arguments, keyed };
        return journaledCall(
          journal,
          call,
          newKey(),
          (entry) => runCall(input, init ?? {}, request, route.toolName, facts, entry),
          (taskId, ended, release) =>
            resumeTask(input, init ?? {}, request, route.toolName, taskId, ended, release),
        );
      }
    }
  };

  function runCall(
    url: string | URL,
    init: RequestInit,
    request: JsonRpcRequest,
    toolName: string,
    facts: EndpointFacts,
    journal?: CallJournal,
  ): Promise<Response> {
    const signal = init.signal ?? undefined;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const now = () => performance.now();
    const sdk = new SdkResponse();
    const last: AttemptIo['last'] = {};
    const baseInit: RequestInit = { ...init, signal: undefined };
    const traced = new ClientCallTrace(telemetry, request, toolName, protocolVersionOf(request));
    const io: CallIo = {
      attempt: {
        url,
        init: baseInit,
        fetch: inner,
        now,
        last,
        onAttempt: ({ attempt, request: sent }) =>
          traced.attempt(attempt, sent, metaOf(sent)?.[ContinuityMeta.lastEventId]),
      },
      // The answer itself is written when the call ends (below): it decides how the SDK gets it.
      deliver: (message) => {
        if (!isResponse(message)) sdk.write(message);
      },
      sendCancel: (cancel) => {
        void postCancel(url, baseInit, cancel);
      },
      reportGap: (gap) => options.onGap?.(gap, { toolName }),
    };
    const actor = createActor(ioCallMachine, {
      input: callInput({
        // Every attempt copies the request's `_meta`: each carries the call span's trace context.
        request: withMeta(request, traced.meta),
        tool: facts.hints.get(toolName),
        extension: facts.extension,
        useExtension: options.useExtension !== false,
        policy,
        newKey: journal ? () => journal.key : newKey,
        stallTimeoutMs: options.stallTimeoutMs ?? 30_000,
        startedAt: now(),
        jitterSeed: randomInt(2 ** 31),
      }),
      inspect: options.inspect,
    });
    const onAbort = () => actor.send({ type: 'app.cancel', at: now() });
    let seen: ModernCallDecision | undefined;
    actor.subscribe({
      next: ({ context }) => {
        // Each decision is a new object: told once, as the machine leaves the attempt it ended.
        if (context.decision === undefined || context.decision === seen) return;
        seen = context.decision;
        traced.decided(context.end, context.decision);
        const action = context.decision.action;
        if (action === 'reissue' || action === 'backoff-reissue')
          options.metrics?.client.reissued(context.decision.reason);
      },
      complete: () => {
        signal?.removeEventListener('abort', onAbort);
        const out = actor.getSnapshot().output;
        traced.ended(out, signal?.aborted === true);
        if (!out) return;
        options.metrics?.client.modernCallEnded(out);
        options.onCallEnded?.({ ...out, toolName });
        const ending = callEnding(out, {
          aborted: signal?.aborted === true,
          streamOpen: sdk.isOpen,
          rawAnswer: last.answer !== undefined,
          fetchError: last.error !== undefined,
        });
        // When the journal settles and what the SDK is given: machines/tasks/journal-settle.ts.
        const plan = settleCall(ending, {
          journaled: journal !== undefined,
          handle: options.tasks ? taskHandleIn(out.response) : undefined,
          response: out.response,
        });
        if (journal && plan.journal.kind === 'settle-first')
          return void journal.ended(plan.journal.ending).then(deliver, (e: unknown) => sdk.fail(e));
        deliver();
        function deliver() {
          const delivery = plan.delivery;
          switch (delivery.kind) {
            case 'abort':
              return sdk.fail(signal?.reason);
            case 'raw-answer':
              // The server's answer as it came, under the application's id (a re-issue's answer names the
              // re-issue's id): the SDK reacts to it as to its own request's (a -32020 → its own refresh).
              if (last.answer)
                return sdk.endWith({ ...last.answer, text: rawAnswerAs(last.answer.text, request.id) });
              return sdk.end(out?.response as JsonRpcMessage);
            case 'fetch-error':
              return sdk.fail(last.error);
            case 'follow':
              return void followCall(
                { url, headers: baseInit.headers, fetch: inner, meta: tasksMetaOf(request), signal },
                { request, toolName, handle: delivery.handle },
                options.tasks ?? {},
                journal && {
                  handle: (taskId) => journal.handle(taskId, actor.getSnapshot().context.lastEventId),
                  ended: (outcome) => journal.ended({ kind: 'task', outcome }),
                },
              ).then(
                (answer) => sdk.end(answer),
                (error: unknown) => {
                  journal?.release();
                  sdk.fail(error);
                },
              );
            case 'answer':
              return sdk.end(out?.response as JsonRpcMessage);
          }
        }
      },
      error: (error) => {
        traced.ended(undefined, false);
        sdk.fail(error);
      },
    });
    signal?.addEventListener('abort', onAbort, { once: true });
    bindCallIo(actor, io);
    actor.start();
    return sdk.promise;
  }

  /**
   * A journaled task of a call made again after a restart: followed by its id (the call is not sent
   * again), its end the call's answer under the application's id.
   */
  function resumeTask(
    url: string | URL,
    init: RequestInit,
    request: JsonRpcRequest,
    toolName: string,
    taskId: string,
    ended: (outcome: FollowOutcome) => Promise<void>,
    release: () => void,
  ): Promise<Response> {
    const sdk = new SdkResponse();
    const tasks = options.tasks ?? {};
    tasks.onTask?.({ taskId, url: String(url), toolName });
    const signal = init.signal ?? undefined;
    const io = { url, headers: init.headers, fetch: inner, meta: tasksMetaOf(request), signal };
    followTaskWith(io, taskId, tasks)
      .then(async (outcome) => {
        await ended(outcome);
        sdk.end(followAnswer(request.id, taskId, outcome) as unknown as JsonRpcMessage);
      })
      .catch((error: unknown) => {
        release();
        sdk.fail(error);
      });
    return sdk.promise;
  }

  /** POSTs the explicit cancel (§13) with the call's headers, `Mcp-Method` its own and no `Mcp-Name`. */
  async function postCancel(url: string | URL, init: RequestInit, cancel: JsonRpcRequest): Promise<void> {
    const headers = new Headers(init.headers);
    headers.delete('mcp-name');
    headers.set('mcp-method', cancel.method);
    try {
      const response = await inner(url, {
        ...init,
        headers,
        body: JSON.stringify(cancel),
        signal: AbortSignal.timeout(CANCEL_DEADLINE_MS),
      });
      await response.body?.cancel();
    } catch {
      // Best effort (docs/continuity-extension.md §13): the server's memo window ends the key regardless.
    }
  }

  return continuity as typeof fetch;
}

function learn(facts: EndpointFacts, kind: 'discover' | 'tools-list', m: JsonRpcMessage): void {
  if (!isResponse(m)) return;
  if (kind === 'discover') {
    facts.extension = settingsFromDiscover(m);
    return;
  }
  for (const [name, hints] of hintsFromToolsList(m)) facts.hints.set(name, hints);
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function metaOf(request: JsonRpcRequest): Record<string, unknown> | undefined {
  const meta = request.params?._meta;
  return typeof meta === 'object' && meta !== null ? (meta as Record<string, unknown>) : undefined;
}

function protocolVersionOf(request: JsonRpcRequest): string | undefined {
  const v = metaOf(request)?.[PROTOCOL_VERSION_META];
  return typeof v === 'string' ? v : undefined;
}

/** `request` with `entries` added to its `params._meta` (the same request when there are none). */
function withMeta(
  request: JsonRpcRequest,
  entries: Readonly<Record<string, string>> | undefined,
): JsonRpcRequest {
  if (!entries) return request;
  const params = request.params ?? {};
  return { ...request, params: { ...params, _meta: { ...(metaOf(request) ?? {}), ...entries } } };
}
