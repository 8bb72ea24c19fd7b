import { assign, enqueueActions, fromCallback, setup } from 'xstate';
import { JsonRpcCode } from '../codes.js';
import {
  CANCEL_METHOD,
  CLIENT_CAPABILITIES_META_KEY,
  ContinuityMeta,
  withContinuityDeclared,
} from '../continuity-extension.js';
import type { GapDetails } from '../decide.js';
import type { JsonRpcError, JsonRpcMessage, JsonRpcRequest, JsonRpcResponse, RequestId } from '../jsonrpc.js';
import { acceptableEventId, rememberCallId } from './limits.js';
import {
  DEFAULT_MODERN_CALL_POLICY,
  decideModernCallEnd,
  type ModernCallDecision,
  type ModernCallPolicy,
  type ModernCallReason,
  type ModernCallStreamEnd,
  mayHaveRun,
} from './modern-call-decide.js';

/**
 * One `tools/call` on MCP 2026-07-28, from the first attempt to its one ending:
 *
 *   attempting ─(stream end, decided by `decideModernCallEnd`)─► answered | outcomeUnknown | failed
 *        ▲                                         │
 *        └──── waiting (the decision's delay) ◄────┘ re-issue: a new JSON-RPC id; through the extension
 *                                                         the same idempotency key and the last event id
 *
 * It owns what must survive across attempts: the idempotency key, the last SSE event id seen (over all
 * attempts), the SSE ids already delivered (a re-issue's replay never delivers a message twice), the
 * attempt count, whether an earlier attempt may have run (`mayHaveRunBefore`), and the call's elapsed time.
 *
 * Pure: no I/O, no clock reads. Time comes in on the events (`at`, the runtime's monotonic clock in ms) and
 * from the machine's own named delays (`stall`, `reissueDelay`), which run on the actor's clock (a
 * `SimulatedClock` in a simulated world).
 *
 * ## The `provide` seam
 * Everything that touches the world is a named placeholder, supplied with `modernCallMachine.provide`:
 * - actor `exchange` (input `AttemptInput`): sends ONE attempt's request and reports what happens with
 *   `attempt.activity`, `attempt.message`, `attempt.ended` (see `ModernCallEvent`). It decides nothing:
 *   it reports a JSON-RPC response as an `attempt.message` like any other message, and the machine tells
 *   the call's own answer from the rest. Stopping it aborts the attempt (the machine stops it when the
 *   attempt ends, on a stall, and on cancel).
 * - action `deliver` (params `{ message }`): hand one message to the application, in order. Every
 *   notification, then the final response (id rewritten to the application's id), goes through here
 *   exactly once.
 * - action `sendCancel` (params `{ request }`): POST this explicit cancel request (extension only, §13).
 * - action `reportGap` (params `{ gap }`): events were evicted on the server (extension 410): tell the app.
 *
 * The final state's output (`ModernCallOutput`) says how the call ended; its `response` is also the
 * last message `deliver`ed.
 *
 * @spec 2026-07-28 streamable-http#cancellation, #receiving-messages; changelog 9; docs/continuity-extension.md §7
 */

/** What the runtime (or a simulated world) knows when the call starts. */
export interface ModernCallInput {
  /** The application's request, as it sent it: its `id` is the one every answer is delivered with. */
  readonly request: JsonRpcRequest;
  /** The tool's annotations from `tools/list`, if listed. Hints default to false. */
  readonly tool?: ToolHints;
  /** The server advertised the continuity extension (settings readable). */
  readonly extension?: { readonly memoWindowMs: number };
  /** The call's idempotency key; sent only with `extension`. One per logical call (a UUID). */
  readonly idempotencyKey?: string;
  readonly policy?: ModernCallPolicy;
  /** No byte for this long ends the attempt as `stalled`. 0: off. */
  readonly stallTimeoutMs: number;
  /** When the first attempt is sent, on the clock of the events' `at`. */
  readonly startedAt: number;
  /** Seed of the backoff jitter (replayable). */
  readonly jitterSeed: number;
}

/** A tool's annotations that the table reads (`tools/list`). */
export interface ToolHints {
  readonly readOnlyHint?: boolean;
  readonly idempotentHint?: boolean;
}

/** The exchange actor's input: one attempt's request, ready to POST. */
export interface AttemptInput {
  /** 0 for the first attempt, n for the n-th re-issue. */
  readonly attempt: number;
  readonly request: JsonRpcRequest;
}

/** Events the machine takes. `at` is the runtime's monotonic clock in ms. */
export type ModernCallEvent =
  /** Bytes arrived (any: headers, a comment, part of an event): the attempt is alive. */
  | { readonly type: 'attempt.activity'; readonly at: number }
  /** One JSON-RPC message of the attempt's response (an SSE event, or the JSON body). */
  | {
      readonly type: 'attempt.message';
      readonly at: number;
      readonly message: JsonRpcMessage;
      /** The SSE `id:` of the event that carried it (the extension numbers a key's events). */
      readonly eventId?: string;
    }
  /** The attempt ended without the call's answer (reports every `ModernCallStreamEnd` but `result`/`error-response`/`stalled`/`cancelled-by-application`). */
  | { readonly type: 'attempt.ended'; readonly at: number; readonly end: ModernCallStreamEnd }
  /** The application gave up on the call (its abort signal). */
  | { readonly type: 'app.cancel'; readonly at: number };

export type ModernCallOutput =
  | {
      readonly outcome: 'answered';
      readonly reason: ModernCallReason;
      readonly attempts: number;
      readonly response: JsonRpcResponse;
    }
  | {
      readonly outcome: 'outcome-unknown';
      readonly reason: ModernCallReason;
      readonly attempts: number;
      readonly idempotencyKey?: string;
      readonly response: JsonRpcError;
    }
  | {
      readonly outcome: 'failed';
      readonly reason: ModernCallReason;
      readonly attempts: number;
      readonly status?: number;
      readonly code?: number;
      /** The end of the last attempt: a runtime may hand the application the original HTTP answer. */
      readonly end: ModernCallStreamEnd;
      readonly response: JsonRpcError;
    };

export interface ModernCallContext {
  readonly request: JsonRpcRequest;
  readonly tool?: ModernCallInput['tool'];
  readonly extension?: ModernCallInput['extension'];
  readonly idempotencyKey?: string;
  readonly policy: ModernCallPolicy;
  readonly stallTimeoutMs: number;
  readonly startedAt: number;
  readonly jitterSeed: number;
  /** Re-issues made so far (the current attempt's number). */
  readonly attempts: number;
  /** The request of the attempt in flight. */
  readonly current: JsonRpcRequest;
  /** SSE id of the last event received for this call, across attempts (the extension's `lastEventId`). */
  readonly lastEventId?: string;
  /**
   * SSE ids already delivered (the newest `MAX_REMEMBERED_CALL_IDS`): a replayed event with one of them is
   * dropped. Grown in place (one call owns it): copying it per message made a call of n events cost n²
   * (100,000 progress events did not finish in 2 minutes in the bench).
   */
  readonly seenEventIds: Set<string>;
  /** Messages delivered to the application so far. */
  readonly deliveredCount: number;
  readonly mayHaveRunBefore: boolean;
  /** The latest time known (the largest `at` seen, advanced by the machine's own timers). */
  readonly now: number;
  /** The last attempt's end and its decision, while deciding and after. */
  readonly end?: ModernCallStreamEnd;
  readonly decision?: ModernCallDecision;
  /** The call's own answer, once it came (delivered with the application's id). */
  readonly answer?: JsonRpcResponse;
}

/** The JSON-RPC id of re-issue `attempt` of the call `id`: a string, so never one of the SDK's numeric ids. */
export function reissueId(id: RequestId, attempt: number): string {
  return `${typeof id === 'number' ? 'n' : 's'}${id}~reissue-${attempt}`;
}

/**
 * The request of attempt `attempt`. The first keeps the application's id; a re-issue gets a new id (and,
 * when the application asked for progress, a new progress token: the re-issue's own id). Through the
 * extension every attempt carries the key and declares the extension in its client capabilities; a
 * re-issue also carries `lastEventId` (null: none seen).
 */
export function attemptRequest(
  original: JsonRpcRequest,
  attempt: number,
  carry: { readonly idempotencyKey?: string; readonly lastEventId?: string | null } | undefined,
  /**
   * Some earlier attempt may have reached a server (`mayHaveRun`). When none can have (refused, 429, 503),
   * the re-issue goes as a first attempt: the key without `lastEventId`. A re-issue marker would make a
   * memo younger than its window answer -32012 for a call no server ever saw (found by the 2026 model).
   */
  mayHaveRunBefore = true,
): JsonRpcRequest {
  const id = attempt === 0 ? original.id : reissueId(original.id, attempt);
  const params = original.params ?? {};
  const meta: Record<string, unknown> = { ...(asRecord(params._meta) ?? {}) };
  if (attempt > 0 && meta.progressToken !== undefined) meta.progressToken = id;
  if (carry?.idempotencyKey !== undefined) {
    meta[ContinuityMeta.idempotencyKey] = carry.idempotencyKey;
    if (attempt > 0 && mayHaveRunBefore) meta[ContinuityMeta.lastEventId] = carry.lastEventId ?? null;
    meta[CLIENT_CAPABILITIES_META_KEY] = withContinuityDeclared(meta[CLIENT_CAPABILITIES_META_KEY]);
  }
  return { ...original, id, params: { ...params, _meta: meta } };
}

/** The error response an unknown outcome is delivered as: the application's id, `OUTCOME_UNKNOWN`. */
export function outcomeUnknownResponse(
  id: RequestId,
  reason: ModernCallReason,
  idempotencyKey: string | undefined,
): JsonRpcError {
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: JsonRpcCode.OUTCOME_UNKNOWN,
      message: `Outcome unknown (${reason}): the call may or may not have run on the server`,
      data: idempotencyKey === undefined ? { reason } : { reason, idempotencyKey },
    },
  };
}

/** A definite failure as an error response: the server's own JSON-RPC error when it sent one. */
export function failureResponse(
  id: RequestId,
  decision: Extract<ModernCallDecision, { action: 'fail' }>,
  end: ModernCallStreamEnd,
): JsonRpcError {
  const server = end.kind === 'http-status' ? serverError(end.body) : undefined;
  if (server) return { jsonrpc: '2.0', id, error: server };
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: JsonRpcCode.REQUEST_FAILED,
      message: `Request failed (${decision.reason})${decision.status ? `: HTTP ${decision.status}` : ''}`,
      data: {
        reason: decision.reason,
        ...(decision.status !== undefined ? { status: decision.status } : {}),
        ...(decision.code !== undefined ? { code: decision.code } : {}),
      },
    },
  };
}

function serverError(body: unknown): JsonRpcError['error'] | undefined {
  const error = asRecord(asRecord(body)?.error);
  if (!error || typeof error.code !== 'number') return undefined;
  const message = typeof error.message === 'string' ? error.message : 'Request failed';
  return error.data === undefined
    ? { code: error.code, message }
    : { code: error.code, message, data: error.data };
}

/** The stream end a JSON-RPC response is (the table reads `resultType` and error codes). */
export function endOfResponse(response: JsonRpcResponse): ModernCallStreamEnd {
  if ('error' in response) {
    const e = asRecord(response.error);
    return { kind: 'error-response', code: typeof e?.code === 'number' ? e.code : 0, data: e?.data };
  }
  const resultType = asRecord(response.result)?.resultType;
  return typeof resultType === 'string' ? { kind: 'result', resultType } : { kind: 'result' };
}

/**
 * A message as the application must see it: the answer carries the application's id; a progress
 * notification of a re-issue carries the application's progress token.
 */
export function forApplication(message: JsonRpcMessage, original: JsonRpcRequest): JsonRpcMessage {
  if (!('method' in message)) return { ...message, id: original.id } as JsonRpcResponse;
  if (message.method !== 'notifications/progress' || 'id' in message) return message;
  const token = asRecord(asRecord(original.params)?._meta)?.progressToken;
  if (token === undefined || message.params?.progressToken === token) return message;
  return { ...message, params: { ...message.params, progressToken: token } };
}

function asRecord(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

const isResponseMessage = (m: JsonRpcMessage): m is JsonRpcResponse =>
  !('method' in m) && ('result' in m || 'error' in m);

/** The table's view of the call, at time `at`. */
function tableContext(c: ModernCallContext, at: number) {
  return {
    tool: c.tool,
    extension: c.extension,
    idempotencyKey: c.extension ? c.idempotencyKey : undefined,
    lastEventId: c.lastEventId,
    attempts: c.attempts,
    mayHaveRunBefore: c.mayHaveRunBefore,
    elapsedMs: Math.max(0, at - c.startedAt),
    jitterSeed: c.jitterSeed,
  };
}

/** Records an attempt's end and the table's decision for it. */
function decided(c: ModernCallContext, end: ModernCallStreamEnd, at: number): Partial<ModernCallContext> {
  const now = Math.max(c.now, at);
  return { end, now, decision: decideModernCallEnd(end, tableContext(c, now), c.policy) };
}

type Reissue = Extract<ModernCallDecision, { action: 'reissue' | 'backoff-reissue' }>;

export const modernCallMachine = setup({
  types: {
    input: {} as ModernCallInput,
    context: {} as ModernCallContext,
    events: {} as ModernCallEvent,
    output: {} as ModernCallOutput,
  },
  actors: {
    /** Placeholder: the runtime's fetch, or a simulated server. See the header. */
    exchange: fromCallback<ModernCallEvent, AttemptInput>(() => undefined),
  },
  actions: {
    deliver: (_, _params: { message: JsonRpcMessage }) => undefined,
    sendCancel: (_, _params: { request: JsonRpcRequest }) => undefined,
    reportGap: (_, _params: { gap: GapDetails }) => undefined,
  },
  delays: {
    stall: ({ context }) => context.stallTimeoutMs,
    reissueDelay: ({ context }) => (context.decision as Reissue | undefined)?.delayMs ?? 0,
  },
  guards: {
    stallDetection: ({ context }) => context.stallTimeoutMs > 0,
    isReissue: ({ context }) =>
      context.decision?.action === 'reissue' || context.decision?.action === 'backoff-reissue',
    isDeliver: ({ context }) => context.decision?.action === 'deliver',
    isUnknown: ({ context }) => context.decision?.action === 'outcome-unknown',
  },
}).createMachine({
  id: 'modernCall',
  context: ({ input }) => {
    const key = input.extension ? input.idempotencyKey : undefined;
    return {
      request: input.request,
      tool: input.tool,
      extension: input.extension,
      idempotencyKey: key,
      policy: input.policy ?? DEFAULT_MODERN_CALL_POLICY,
      stallTimeoutMs: input.stallTimeoutMs,
      startedAt: input.startedAt,
      jitterSeed: input.jitterSeed,
      attempts: 0,
      current: attemptRequest(input.request, 0, key === undefined ? undefined : { idempotencyKey: key }),
      seenEventIds: new Set<string>(),
      deliveredCount: 0,
      mayHaveRunBefore: false,
      now: input.startedAt,
    };
  },
  initial: 'attempting',
  states: {
    attempting: {
      invoke: {
        src: 'exchange',
        input: ({ context }) => ({ attempt: context.attempts, request: context.current }),
      },
      initial: 'live',
      states: {
        live: {
          // Re-entered on every sign of life, which restarts the stall timer.
          after: {
            stall: {
              guard: 'stallDetection',
              target: '#modernCall.deciding',
              actions: assign(({ context }) =>
                decided(context, { kind: 'stalled' }, context.now + context.stallTimeoutMs),
              ),
            },
          },
          on: {
            'attempt.activity': {
              target: 'live',
              reenter: true,
              actions: assign({ now: ({ context, event }) => Math.max(context.now, event.at) }),
            },
            'attempt.message': [
              {
                // The call's own answer (this attempt's id) ends the attempt.
                guard: ({ context, event }) =>
                  isResponseMessage(event.message) && event.message.id === context.current.id,
                target: '#modernCall.deciding',
                actions: assign(({ context, event }) => ({
                  ...decided(context, endOfResponse(event.message as JsonRpcResponse), event.at),
                  answer: event.message as JsonRpcResponse,
                  ...(acceptableEventId(event.eventId) ? { lastEventId: event.eventId } : {}),
                })),
              },
              {
                target: 'live',
                reenter: true,
                actions: enqueueActions(({ context, event, enqueue }) => {
                  const { update, deliver } = absorbed(context, event);
                  enqueue.assign(update);
                  if (deliver) enqueue({ type: 'deliver', params: { message: deliver } });
                }),
              },
            ],
          },
        },
      },
      on: {
        'attempt.ended': {
          target: 'deciding',
          actions: assign(({ context, event }) => decided(context, event.end, event.at)),
        },
        'app.cancel': {
          target: 'deciding',
          actions: assign(({ context, event }) =>
            decided(context, { kind: 'cancelled-by-application' }, event.at),
          ),
        },
      },
    },
    deciding: {
      always: [
        { guard: 'isDeliver', target: 'answered' },
        { guard: 'isUnknown', target: 'outcomeUnknown' },
        { guard: 'isReissue', target: 'reissuing' },
        { target: 'failed' },
      ],
    },
    reissuing: {
      entry: enqueueActions(({ context, enqueue }) => {
        const d = context.decision as Reissue;
        if (d.gap) enqueue({ type: 'reportGap', params: { gap: d.gap } });
      }),
      always: { target: 'waiting' },
    },
    waiting: {
      after: {
        reissueDelay: { target: 'attempting', actions: assign(({ context }) => nextAttempt(context)) },
      },
      on: {
        'app.cancel': {
          target: 'deciding',
          actions: assign(({ context, event }) =>
            decided(context, { kind: 'cancelled-by-application' }, event.at),
          ),
        },
      },
    },
    answered: {
      type: 'final',
      entry: enqueueActions(({ context, enqueue }) => {
        enqueue({ type: 'deliver', params: { message: finalResponse(context) } });
      }),
    },
    outcomeUnknown: {
      type: 'final',
      entry: enqueueActions(({ context, enqueue }) => {
        const d = context.decision as Extract<ModernCallDecision, { action: 'outcome-unknown' }>;
        if (d.sendExplicitCancel && context.idempotencyKey !== undefined) {
          enqueue({ type: 'sendCancel', params: { request: cancelRequest(context) } });
        }
        enqueue({ type: 'deliver', params: { message: finalResponse(context) } });
      }),
    },
    failed: {
      type: 'final',
      entry: enqueueActions(({ context, enqueue }) => {
        enqueue({ type: 'deliver', params: { message: finalResponse(context) } });
      }),
    },
  },
  output: ({ context }) => outputOf(context),
});

function finalResponse(c: ModernCallContext): JsonRpcResponse {
  return outputOf(c).response;
}

function outputOf(c: ModernCallContext): ModernCallOutput {
  const d = c.decision;
  const end = c.end ?? { kind: 'ended-without-answer' };
  const id = c.request.id;
  if (d?.action === 'deliver') {
    return { outcome: 'answered', reason: d.reason, attempts: c.attempts, response: answerOf(c, end) };
  }
  if (d?.action === 'fail') {
    return {
      outcome: 'failed',
      reason: d.reason,
      attempts: c.attempts,
      ...(d.status !== undefined ? { status: d.status } : {}),
      ...(d.code !== undefined ? { code: d.code } : {}),
      end,
      response: failureResponse(id, d, end),
    };
  }
  const reason = d?.reason ?? 'ended_without_answer';
  const key = d?.action === 'outcome-unknown' ? d.idempotencyKey : undefined;
  return {
    outcome: 'outcome-unknown',
    reason,
    attempts: c.attempts,
    ...(key !== undefined ? { idempotencyKey: key } : {}),
    response: outcomeUnknownResponse(id, reason, key),
  };
}

/** The delivered answer: kept as the attempt's message, with the application's id. */
function answerOf(c: ModernCallContext, end: ModernCallStreamEnd): JsonRpcResponse {
  const answer = c.answer;
  if (answer) return { ...answer, id: c.request.id } as JsonRpcResponse;
  // Unreachable in practice: `deliver` follows only a response message.
  return outcomeUnknownResponse(c.request.id, end.kind as ModernCallReason, c.idempotencyKey);
}

/** The `io.modelcontextprotocol/*` keys of a request's `_meta` (its per-request envelope). */
export function envelopeOf(request: JsonRpcRequest): Record<string, unknown> {
  const meta = asRecord(request.params?._meta) ?? {};
  return Object.fromEntries(Object.entries(meta).filter(([k]) => k.startsWith('io.modelcontextprotocol/')));
}

/**
 * The extension's explicit cancel (docs/continuity-extension.md §13): a request naming the key, under an
 * id of its own (the current attempt's, suffixed: unique among this call's requests).
 */
export function cancelRequest(c: ModernCallContext): JsonRpcRequest {
  return {
    jsonrpc: '2.0',
    id: `${c.current.id}~cancel`,
    method: CANCEL_METHOD,
    params: {
      idempotencyKey: c.idempotencyKey,
      // The request's 2026-07-28 envelope (version, client info, capabilities) makes it a modern message.
      _meta: envelopeOf(c.current),
    },
  };
}

/** One non-answer message of an attempt: what the context becomes and what (if anything) is delivered. */
function absorbed(
  c: ModernCallContext,
  event: Extract<ModernCallEvent, { type: 'attempt.message' }>,
): { update: Partial<ModernCallContext>; deliver?: JsonRpcMessage } {
  const now = Math.max(c.now, event.at);
  // An over-long id (as on 2025 streams, `MAX_EVENT_ID_LENGTH`) is a protocol error: the message counts,
  // its id is never kept nor sent back as `lastEventId` (800 ids of 256 KiB held 230 MiB, issue 22 item 7).
  const id = acceptableEventId(event.eventId) ? event.eventId : undefined;
  // A replayed event (the extension keeps its original SSE id) was delivered by an earlier attempt.
  if (id !== undefined && c.seenEventIds.has(id)) return { update: { now } };
  // The server must not send requests on a response stream (2026-07-28), and another id's answer is not
  // ours: only notifications reach the application.
  const deliverable = 'method' in event.message && !('id' in event.message);
  const update: Partial<ModernCallContext> = {
    now,
    ...(id !== undefined ? { lastEventId: id, seenEventIds: rememberCallId(c.seenEventIds, id) } : {}),
    deliveredCount: c.deliveredCount + (deliverable ? 1 : 0),
  };
  return deliverable ? { update, deliver: forApplication(event.message, c.request) } : { update };
}

/** The context of the next attempt, after the decision's delay. */
function nextAttempt(c: ModernCallContext): Partial<ModernCallContext> {
  const d = c.decision as Reissue;
  const attempts = c.attempts + 1;
  const mayHaveRunBefore = c.mayHaveRunBefore || (c.end ? mayHaveRun(c.end) : true);
  return {
    attempts,
    lastEventId: d.carry ? (d.carry.lastEventId ?? undefined) : c.lastEventId,
    now: c.now + d.delayMs,
    mayHaveRunBefore,
    current: attemptRequest(c.request, attempts, d.carry, mayHaveRunBefore),
    end: undefined,
    decision: undefined,
    answer: undefined,
  };
}
