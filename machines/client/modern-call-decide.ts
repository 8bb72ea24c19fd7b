import { DEFAULT_RECONNECT_POLICY, type ReconnectPolicy, reconnectDelay } from '../backoff.js';
import { ContinuityErrorCode } from '../continuity-extension.js';
import { type GapDetails, gapFromBody } from '../decide.js';

/**
 * The client's decision table for MCP 2026-07-28 (stateless: no session, no GET stream, no Last-Event-ID).
 * A request's response stream ended; what happens to the call? Pure and total: every end gets exactly one
 * decision, at once, so no call ever waits for a generic request timeout because its stream died.
 *
 * The one rule behind every row: re-issue automatically only when it cannot duplicate a side effect —
 *  - the request never reached the server (connection refused), or the server said it did not run it
 *    (400 header mismatch, 429, 503);
 *  - the tool is read-only or idempotent by its annotations (`readOnlyHint`, `idempotentHint`);
 *  - or the server advertises the continuity extension (docs/continuity-extension.md): the re-issue carries
 *    the same idempotency key and the last event id seen, and the server never runs a key twice.
 * Otherwise the call ends, now, as outcome unknown, with the reason and the key so the application can
 * reconcile. Every re-issue is a new JSON-RPC request with a new id (2026-07-28 changelog, major change 9).
 *
 * @spec 2026-07-28 streamable-http#cancellation, #request-metadata, #backward-compatibility; changelog 8, 9, 12
 */

/** How a request's response stream ended, as the transport observed it. */
export type ModernCallStreamEnd =
  /** The connection was never made (ECONNREFUSED, DNS failure, TLS failure): no byte of the request left. */
  | { readonly kind: 'refused' }
  /** The connection reset or was cut before any response byte: the request may have been received. */
  | { readonly kind: 'cut-before-response' }
  /** The connection was cut after some response bytes (headers or events), before the response. */
  | { readonly kind: 'cut-mid-stream' }
  /** The SSE stream ended cleanly without a JSON-RPC response for this request. */
  | { readonly kind: 'ended-without-answer' }
  /** No byte for the stall timeout; the client closed the stream itself. */
  | { readonly kind: 'stalled' }
  /** The application cancelled the call (abort signal). */
  | { readonly kind: 'cancelled-by-application' }
  /** A JSON-RPC response arrived. `resultType` absent: an older server (treated as complete, changelog 8). */
  | { readonly kind: 'result'; readonly resultType?: string }
  /** A JSON-RPC error response arrived (HTTP 200 or inside the SSE stream). */
  | { readonly kind: 'error-response'; readonly code: number; readonly data?: unknown }
  /** A 200 whose body could not be read as JSON-RPC (wrong content type, malformed JSON). */
  | { readonly kind: 'malformed-response' }
  /** Any other HTTP status. `body` is the parsed JSON body, if any; `retryAfterMs` from `Retry-After`. */
  | {
      readonly kind: 'http-status';
      readonly status: number;
      readonly body?: unknown;
      readonly retryAfterMs?: number;
    };

/** Why a call was delivered, re-issued or ended. Stable strings: applications match on them. */
export const ModernCallReason = {
  answered: 'answered',
  inputRequired: 'input_required',
  errorAnswered: 'error_answered',
  refused: 'connection_refused',
  cutBeforeResponse: 'cut_before_response',
  cutMidStream: 'cut_mid_stream',
  endedWithoutAnswer: 'ended_without_answer',
  stalled: 'stalled',
  malformedResponse: 'malformed_response',
  cancelledByApplication: 'cancelled_by_application',
  headerMismatch: 'header_mismatch',
  unsupportedVersion: 'unsupported_protocol_version',
  missingCapability: 'missing_required_client_capability',
  badRequest: 'bad_request',
  unauthorized: 'unauthorized',
  forbidden: 'forbidden',
  methodNotFound: 'method_not_found',
  endpointNotFound: 'endpoint_not_found',
  methodNotAllowed: 'method_not_allowed',
  notAcceptable: 'not_acceptable',
  tooLarge: 'payload_too_large',
  unsupportedMediaType: 'unsupported_media_type',
  throttled: 'throttled',
  unavailable: 'unavailable',
  serverError: 'server_error',
  gatewayError: 'gateway_error',
  clientError: 'client_error',
  unexpectedStatus: 'unexpected_status',
  eventsEvicted: 'events_evicted',
  keyReused: 'idempotency_key_reused',
  serverOutcomeUnknown: 'server_outcome_unknown',
  cancelledOnServer: 'cancelled_on_server',
  /** The re-issue budget ran out while the outcome was still open. */
  reissueGivenUp: 'reissue_given_up',
  /** The request never reached a server and the budget ran out: a definite failure. */
  unreachable: 'unreachable',
  /** A re-issue now might reach the server after it has forgotten the key: not safe any more. */
  memoWindowPassed: 'memo_window_passed',
} as const;
export type ModernCallReason = (typeof ModernCallReason)[keyof typeof ModernCallReason];

/** 2026-07-28 error codes the table recognises (streamable-http#server-validation; changelog 12). */
export const ModernErrorCode = {
  HEADER_MISMATCH: -32020,
  MISSING_REQUIRED_CLIENT_CAPABILITY: -32021,
  UNSUPPORTED_PROTOCOL_VERSION: -32022,
  METHOD_NOT_FOUND: -32601,
} as const;

/**
 * What a row says to do:
 * - `deliver`: the server answered; hand the answer to the caller.
 * - `resume-after-gap`: the extension's 410; nothing new ran. Report the exact gap, then re-issue at once
 *   from the oldest retained event.
 * - `backoff-reissue`: the request did not run (never reached, or refused for load): wait, then re-issue.
 * - `reissue-if-safe`: it may have run. Re-issue only when that cannot duplicate a side effect.
 * - `unknown`: it may have run and re-issuing cannot tell: outcome unknown.
 * - `fail`: it did not run (or its failure is definite): end with that error.
 */
export type RowAction =
  | 'deliver'
  | 'resume-after-gap'
  | 'backoff-reissue'
  | 'reissue-if-safe'
  | 'unknown'
  | 'fail';

export interface ModernCallRow {
  readonly action: RowAction;
  readonly reason: ModernCallReason;
}

/** Every case a stream end is classified into (see `caseOf`), one row each. */
export type ModernCallCase =
  | 'refused'
  | 'cut-before-response'
  | 'cut-mid-stream'
  | 'ended-without-answer'
  | 'stalled'
  | 'cancelled-by-application'
  | 'result-complete'
  | 'result-input-required'
  | 'error-response'
  | 'malformed-response'
  | 'ext-key-reused'
  | 'ext-events-evicted'
  | 'ext-outcome-unknown'
  | 'ext-cancelled'
  | '400-header-mismatch'
  | '400-unsupported-version'
  | '400-missing-capability'
  | '400-other'
  | '401'
  | '403'
  | '404-method-not-found'
  | '404-other'
  | '405'
  | '406'
  | '413'
  | '415'
  | '429'
  | '503'
  | '503-no-retry-after'
  | '500'
  | '502-504'
  | 'other-4xx'
  | 'other-5xx'
  | 'unexpected-status';

const R = ModernCallReason;

/** The table. One row per case; the comment is why. */
export const MODERN_CALL_DECISION_TABLE: Readonly<Record<ModernCallCase, ModernCallRow>> = {
  // The connection never opened, so no byte of the request left: sending it again cannot duplicate.
  refused: { action: 'backoff-reissue', reason: R.refused },
  // A reset before any response byte looks like "refused" to fetch ("fetch failed"), but the request
  // may have been received and run. This is the incident's first trap.
  'cut-before-response': { action: 'reissue-if-safe', reason: R.cutBeforeResponse },
  // Response bytes arrived: the server certainly received the request and may have run it.
  'cut-mid-stream': { action: 'reissue-if-safe', reason: R.cutMidStream },
  // The final response SHOULD terminate the stream; an end without it is a cut that happened politely.
  'ended-without-answer': { action: 'reissue-if-safe', reason: R.endedWithoutAnswer },
  // We closed a silent stream. Without the extension that close is a cancellation (spec), which may come
  // after the side effect; with it, the work goes on and a re-issue attaches to it.
  stalled: { action: 'reissue-if-safe', reason: R.stalled },
  // The application asked. Never re-issued; whether the server got as far as the side effect is unknown.
  'cancelled-by-application': { action: 'unknown', reason: R.cancelledByApplication },
  // The answer. `resultType` absent means an earlier-revision server: complete (changelog 8).
  'result-complete': { action: 'deliver', reason: R.answered },
  // MRTR interim result: the caller gathers the input and sends the next round (a new request, new key).
  'result-input-required': { action: 'deliver', reason: R.inputRequired },
  // The server answered with an error: that is its definite answer for this request.
  'error-response': { action: 'deliver', reason: R.errorAnswered },
  // Something answered 200 but not with JSON-RPC (a captive proxy?): the request may have run.
  'malformed-response': { action: 'reissue-if-safe', reason: R.malformedResponse },
  // Extension: the key was used with other arguments. A bug in the caller; re-issuing cannot fix it.
  'ext-key-reused': { action: 'fail', reason: R.keyReused },
  // Extension: events after our last id were evicted. The server ran nothing new; re-issue at once from
  // `resumeAfter` and report the exact gap to the application.
  'ext-events-evicted': { action: 'resume-after-gap', reason: R.eventsEvicted },
  // Extension: the instance running the key died; the server itself cannot know. Re-issuing cannot either.
  'ext-outcome-unknown': { action: 'unknown', reason: R.serverOutcomeUnknown },
  // Extension: an explicit notifications/cancelled for this key was honoured. The key will never run again.
  'ext-cancelled': { action: 'unknown', reason: R.cancelledOnServer },
  // The server rejected the headers before running anything. The spec's recovery (refresh tools/list, send
  // again with the `Mcp-Param-*` headers the new schemas declare) is the SDK's: it builds those headers,
  // and the official v2 client's `callTool` does exactly that on this answer. Re-sending our copy would
  // carry the same stale headers, so the SDK gets the answer at once, under its own id.
  '400-header-mismatch': { action: 'fail', reason: R.headerMismatch },
  // Version negotiation (the era fallback) is the transport's job, not this call's: end definitely.
  '400-unsupported-version': { action: 'fail', reason: R.unsupportedVersion },
  '400-missing-capability': { action: 'fail', reason: R.missingCapability },
  // A 400 is a refusal to run; an unrecognised body may mean a legacy server (era detection decides).
  '400-other': { action: 'fail', reason: R.badRequest },
  // Authentication refused the request before it ran; the auth layer refreshes and the caller retries.
  '401': { action: 'fail', reason: R.unauthorized },
  '403': { action: 'fail', reason: R.forbidden },
  // -32601 with 404: the server does not implement the method (streamable-http#protocol-version-header).
  '404-method-not-found': { action: 'fail', reason: R.methodNotFound },
  // A 404 without a modern body: no MCP endpoint here (maybe a legacy HTTP+SSE server).
  '404-other': { action: 'fail', reason: R.endpointNotFound },
  // 405: not a modern MCP endpoint; nothing ran.
  '405': { action: 'fail', reason: R.methodNotAllowed },
  // 406: our Accept header was refused; nothing ran, and re-sending the same headers cannot help.
  '406': { action: 'fail', reason: R.notAcceptable },
  '413': { action: 'fail', reason: R.tooLarge },
  '415': { action: 'fail', reason: R.unsupportedMediaType },
  // Throttled: the server did not process it (RFC 9110/6585); wait at least Retry-After, then re-issue.
  '429': { action: 'backoff-reissue', reason: R.throttled },
  // Unavailable with Retry-After: a server shedding load, which did not process it (RFC 9110 15.6.4; ours
  // sends Retry-After with every 503); wait at least Retry-After, then re-issue.
  '503': { action: 'backoff-reissue', reason: R.unavailable },
  // Unavailable WITHOUT Retry-After: what a proxy answers when its upstream failed, which may be after it
  // forwarded the request (Envoy answers 503 "upstream connect error or disconnect/reset before headers"
  // when the upstream reset the connection after receiving it). It may have run: as a gateway error.
  '503-no-retry-after': { action: 'reissue-if-safe', reason: R.gatewayError },
  // The server failed while handling it, possibly after the side effect.
  '500': { action: 'reissue-if-safe', reason: R.serverError },
  // A gateway lost or timed out on the upstream, which may have run the request (504 most of all).
  '502-504': { action: 'reissue-if-safe', reason: R.gatewayError },
  // Any other 4xx is a refusal before running: definite.
  'other-4xx': { action: 'fail', reason: R.clientError },
  // Any other 5xx: we cannot say how far the server got.
  'other-5xx': { action: 'reissue-if-safe', reason: R.serverError },
  // A request answered with a redirect, 202 or 204 breaks the transport's rules; 303 even says "done, look
  // elsewhere". It may have run, and sending it to the same endpoint again cannot tell: outcome unknown.
  'unexpected-status': { action: 'unknown', reason: R.unexpectedStatus },
};

/** Maps an observed end to its row. Reads the JSON-RPC error code where the status alone is ambiguous. */
export function caseOf(end: ModernCallStreamEnd): ModernCallCase {
  switch (end.kind) {
    case 'refused':
    case 'cut-before-response':
    case 'cut-mid-stream':
    case 'ended-without-answer':
    case 'stalled':
    case 'cancelled-by-application':
    case 'malformed-response':
      return end.kind;
    case 'result':
      return end.resultType === 'input_required' ? 'result-input-required' : 'result-complete';
    case 'error-response':
      return extensionCase(end.code) ?? 'error-response';
    case 'http-status':
      return statusCase(end.status, errorCode(end.body), end.retryAfterMs !== undefined);
  }
}

function extensionCase(code: number | undefined): ModernCallCase | undefined {
  switch (code) {
    case ContinuityErrorCode.KEY_REUSED:
      return 'ext-key-reused';
    case ContinuityErrorCode.EVENTS_EVICTED:
      return 'ext-events-evicted';
    case ContinuityErrorCode.OUTCOME_UNKNOWN:
      return 'ext-outcome-unknown';
    case ContinuityErrorCode.CANCELLED:
      return 'ext-cancelled';
    default:
      return undefined;
  }
}

/** Statuses with a row of their own (400 and 404 are read with their body). */
const STATUS_CASES: Readonly<Record<number, ModernCallCase>> = {
  401: '401',
  403: '403',
  405: '405',
  406: '406',
  413: '413',
  415: '415',
  429: '429',
  500: '500',
  503: '503',
};

function statusCase(status: number, code: number | undefined, retryAfter: boolean): ModernCallCase {
  const ext = extensionCase(code);
  if (ext) return ext;
  if (status === 400) {
    if (code === ModernErrorCode.HEADER_MISMATCH) return '400-header-mismatch';
    if (code === ModernErrorCode.UNSUPPORTED_PROTOCOL_VERSION) return '400-unsupported-version';
    if (code === ModernErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY) return '400-missing-capability';
    return '400-other';
  }
  if (status === 404) return code === ModernErrorCode.METHOD_NOT_FOUND ? '404-method-not-found' : '404-other';
  if (status === 503 && !retryAfter) return '503-no-retry-after';
  const exact = STATUS_CASES[status];
  if (exact) return exact;
  if (status === 502 || status === 504) return '502-504';
  if (status >= 500) return 'other-5xx';
  if (status >= 400) return 'other-4xx';
  return 'unexpected-status';
}

/** What the client knows about this call when its stream ends. */
export interface ModernCallContext {
  /** The tool's annotations, when the call is a `tools/call` of a listed tool. Hints default to false. */
  readonly tool?: { readonly readOnlyHint?: boolean; readonly idempotentHint?: boolean };
  /** The server advertised the continuity extension in `server/discover` (with a readable memo window). */
  readonly extension?: { readonly memoWindowMs: number };
  /** The call's idempotency key (sent only when the extension is advertised). */
  readonly idempotencyKey?: string;
  /** SSE id of the last event received for this key, across all attempts. */
  readonly lastEventId?: string;
  /** Re-issues already made for this call. */
  readonly attempts: number;
  /**
   * An earlier attempt of this call ended in a way after which it may have run (`mayHaveRun`). Then no
   * later refusal makes the call a definite failure: the earlier attempt may have done the side effect.
   */
  readonly mayHaveRunBefore: boolean;
  /** Time since the call's first attempt was sent (the client's own monotonic clock). */
  readonly elapsedMs: number;
  /** Seed for the jitter of the backoff (replayable). */
  readonly jitterSeed: number;
}

export interface ModernCallPolicy {
  /** Re-issues per call before giving up. */
  readonly maxReissues: number;
  readonly backoff: ReconnectPolicy;
  /**
   * Re-issue through the extension only while `elapsedMs + memoMarginMs` is inside the advertised memo
   * window: the re-issue must arrive while the server still remembers the key.
   */
  readonly memoMarginMs: number;
  /** Tool annotations are hints; trust them only from servers the application trusts (MCP tools spec). */
  readonly trustToolAnnotations: boolean;
}

/**
 * The re-issue budget is the 2025 resume budget (`DEFAULT_RECONNECT_POLICY.maxRetries`, 8): a keyed call
 * behind a balancer that cuts idle connections is cut again on each re-issue until it answers, and with
 * full-jitter backoff 3 re-issues ran out before a 1.5 s charge finished in about 5% of runs (an honest
 * outcome unknown, but not the result the extension can give).
 */
export const DEFAULT_MODERN_CALL_POLICY: ModernCallPolicy = {
  maxReissues: DEFAULT_RECONNECT_POLICY.maxRetries,
  backoff: DEFAULT_RECONNECT_POLICY,
  memoMarginMs: 60_000,
  trustToolAnnotations: true,
};

/** Sent on a re-issue through the extension: same key, the last event id seen (`null`: none). */
export interface ContinuityCarry {
  readonly idempotencyKey: string;
  readonly lastEventId: string | null;
}

export type ModernCallDecision =
  | { readonly action: 'deliver'; readonly reason: ModernCallReason }
  | {
      readonly action: 'reissue' | 'backoff-reissue';
      readonly reason: ModernCallReason;
      /** Always: a re-issue is a new JSON-RPC request (changelog 9). */
      readonly newRequestId: true;
      readonly delayMs: number;
      /** Present when the re-issue goes through the extension. */
      readonly carry?: ContinuityCarry;
      /** Events were evicted: report this gap to the application before resuming. */
      readonly gap?: GapDetails;
    }
  | {
      readonly action: 'outcome-unknown';
      readonly reason: ModernCallReason;
      /** For reconciliation: re-issuing later with this key (within the memo window) gets the outcome. */
      readonly idempotencyKey?: string;
      /** Extension: closing is not cancellation there, so an application cancel is sent explicitly (§13). */
      readonly sendExplicitCancel?: true;
    }
  | {
      readonly action: 'fail';
      readonly reason: ModernCallReason;
      readonly status?: number;
      readonly code?: number;
    };

/**
 * How a re-issue of a call that may have run could be made safe, if at all: through the extension (same
 * key, while the server still remembers it), else by the tool's trusted annotations. Read-only tools stay
 * safe past the memo window; a charge does not.
 */
export function safeReissueBasis(
  ctx: ModernCallContext,
  policy: ModernCallPolicy,
): 'extension' | 'annotations' | undefined {
  if (ctx.extension && ctx.idempotencyKey !== undefined && insideMemoWindow(ctx, policy)) return 'extension';
  const t = ctx.tool;
  if (policy.trustToolAnnotations && t && (t.readOnlyHint === true || t.idempotentHint === true)) {
    return 'annotations';
  }
  return undefined;
}

/**
 * Whether a call goes through the continuity extension (carries an idempotency key). Only when the server
 * advertises it and the call is not already safe to re-issue by the tool's trusted annotations: a read-only
 * or idempotent tool gains nothing from a key and would lose by it (a memo entry per call, and after a
 * server restart with a young memo the key's re-issue is answered outcome unknown, where a fresh re-issue
 * simply succeeds).
 */
export function keysCall(
  tool: ModernCallContext['tool'],
  extension: ModernCallContext['extension'],
  policy: ModernCallPolicy = DEFAULT_MODERN_CALL_POLICY,
): boolean {
  if (extension === undefined) return false;
  const safeByHints = tool !== undefined && (tool.readOnlyHint === true || tool.idempotentHint === true);
  return !(policy.trustToolAnnotations && safeByHints);
}

/** The decision for one stream end. `table` is a parameter only so tests can show a wrong table is caught. */
export function decideModernCallEnd(
  end: ModernCallStreamEnd,
  ctx: ModernCallContext,
  policy: ModernCallPolicy = DEFAULT_MODERN_CALL_POLICY,
  table: Readonly<Record<ModernCallCase, ModernCallRow>> = MODERN_CALL_DECISION_TABLE,
): ModernCallDecision {
  const d = decideThisAttempt(end, ctx, policy, table);
  // "This attempt did not run" says nothing of the earlier ones: a cut charge, then a refused re-issue, is
  // a charge of unknown outcome, not a failure. Except a header refusal of a keyed re-issue through the
  // extension: the server answers a key that ran (or runs) from its memo, never through the SDK's checks,
  // so the SDK refusing it proves no attempt under the key ran; the SDK must get the -32020 to recover.
  if (d.action !== 'fail' || !ctx.mayHaveRunBefore || keyedHeaderRefusal(end, ctx)) return d;
  return {
    action: 'outcome-unknown',
    reason: d.reason,
    ...(ctx.idempotencyKey !== undefined && ctx.extension ? { idempotencyKey: ctx.idempotencyKey } : {}),
  };
}

/** A -32020 to a call keyed through the extension (nothing ran under its key: the key is `refused`). */
function keyedHeaderRefusal(end: ModernCallStreamEnd, ctx: ModernCallContext): boolean {
  return (
    ctx.extension !== undefined && ctx.idempotencyKey !== undefined && caseOf(end) === '400-header-mismatch'
  );
}

function decideThisAttempt(
  end: ModernCallStreamEnd,
  ctx: ModernCallContext,
  policy: ModernCallPolicy,
  table: Readonly<Record<ModernCallCase, ModernCallRow>>,
): ModernCallDecision {
  const row = table[caseOf(end)];
  const { reason } = row;
  const failure = (): ModernCallDecision => ({ action: 'fail', reason, ...statusAndCode(end) });
  const unknown = (why: ModernCallReason = reason): ModernCallDecision => ({
    action: 'outcome-unknown',
    reason: why,
    ...(ctx.idempotencyKey !== undefined && ctx.extension ? { idempotencyKey: ctx.idempotencyKey } : {}),
    ...(end.kind === 'cancelled-by-application' && ctx.extension ? { sendExplicitCancel: true } : {}),
  });
  const delay = () => reconnectDelay(ctx.attempts, policy.backoff, retryAfter(end), ctx.jitterSeed);
  const carry = (lastEventId: string | undefined): { carry?: ContinuityCarry } =>
    ctx.extension && ctx.idempotencyKey !== undefined
      ? { carry: { idempotencyKey: ctx.idempotencyKey, lastEventId: lastEventId ?? null } }
      : {};

  switch (row.action) {
    case 'deliver':
      return { action: 'deliver', reason };
    case 'fail':
      return failure();
    case 'unknown':
      return unknown();
    case 'backoff-reissue':
      // Nothing ran, so running out of budget is a definite failure, not an unknown outcome. A server that
      // asks for a longer wait than our longest backoff (a full memo answers Retry-After until its oldest
      // entry expires, possibly hours) is not waited for either: the caller hears it now, not minutes later.
      if (ctx.attempts >= policy.maxReissues || (retryAfter(end) ?? 0) > policy.backoff.maxDelayMs) {
        return { ...failure(), reason: end.kind === 'refused' ? R.unreachable : reason };
      }
      return {
        action: 'backoff-reissue',
        reason,
        newRequestId: true,
        delayMs: delay(),
        ...carry(ctx.lastEventId),
      };
    case 'resume-after-gap':
      return resumeAfterGap(end, ctx, policy, reason, unknown);
    case 'reissue-if-safe': {
      const basis = safeReissueBasis(ctx, policy);
      if (basis === undefined) {
        const keyed = ctx.extension !== undefined && ctx.idempotencyKey !== undefined;
        return unknown(keyed ? R.memoWindowPassed : reason);
      }
      if (ctx.attempts >= policy.maxReissues) return unknown(R.reissueGivenUp);
      // A balancer's cut is a path fact, not a server in trouble: the first re-issue goes at once.
      const transportCut = end.kind !== 'http-status' && ctx.attempts === 0;
      return {
        action: transportCut ? 'reissue' : 'backoff-reissue',
        reason,
        newRequestId: true,
        delayMs: transportCut ? 0 : delay(),
        ...(basis === 'extension' ? carry(ctx.lastEventId) : {}),
      };
    }
  }
}

/** 410 through the extension: resume after the oldest retained event, reporting exactly what was lost. */
function resumeAfterGap(
  end: ModernCallStreamEnd,
  ctx: ModernCallContext,
  policy: ModernCallPolicy,
  reason: ModernCallReason,
  unknown: (why?: ModernCallReason) => ModernCallDecision,
): ModernCallDecision {
  // Without the extension no key was sent, so nothing of ours was evicted: the server refused; end there.
  if (!ctx.extension || ctx.idempotencyKey === undefined) {
    return { action: 'fail', reason, ...statusAndCode(end) };
  }
  if (ctx.attempts >= policy.maxReissues) return unknown(R.reissueGivenUp);
  if (!insideMemoWindow(ctx, policy)) return unknown(R.memoWindowPassed);
  const gap = gapFromBody(bodyOf(end));
  return {
    action: 'reissue',
    reason,
    newRequestId: true,
    delayMs: 0,
    carry: { idempotencyKey: ctx.idempotencyKey, lastEventId: gap.resumeAfter ?? ctx.lastEventId ?? null },
    gap,
  };
}

function insideMemoWindow(ctx: ModernCallContext, policy: ModernCallPolicy): boolean {
  return ctx.extension !== undefined && ctx.elapsedMs + policy.memoMarginMs < ctx.extension.memoWindowMs;
}

function retryAfter(end: ModernCallStreamEnd): number | undefined {
  return end.kind === 'http-status' ? end.retryAfterMs : undefined;
}

function bodyOf(end: ModernCallStreamEnd): unknown {
  if (end.kind === 'http-status') return end.body;
  if (end.kind === 'error-response') return { error: { code: end.code, data: end.data } };
  return undefined;
}

function statusAndCode(end: ModernCallStreamEnd): { status?: number; code?: number } {
  if (end.kind === 'http-status') {
    const code = errorCode(end.body);
    return code === undefined ? { status: end.status } : { status: end.status, code };
  }
  if (end.kind === 'error-response') return { code: end.code };
  return {};
}

function errorCode(body: unknown): number | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}

/**
 * Could the request have been run by the server, as far as this end shows? Only a refused connection and
 * the answers by which the server states it did not process the request say no: a 2026-07-28 server MUST
 * validate headers, version and method before running anything (400, 404); by HTTP semantics a 4xx is a
 * refusal and 503 a deferral without processing. Every other end after the first byte left may have run
 * it. The safety property is stated over this predicate, written from those facts, not read from the
 * table it checks.
 */
export function mayHaveRun(end: ModernCallStreamEnd): boolean {
  switch (end.kind) {
    case 'refused':
      return false;
    case 'http-status': {
      const code = errorCode(end.body);
      // The extension's refusals run nothing new: a reused key or an evicted resume is answered before any work.
      if (code === ContinuityErrorCode.KEY_REUSED || code === ContinuityErrorCode.EVENTS_EVICTED)
        return false;
      return (
        !(end.status >= 400 && end.status < 500) && !(end.status === 503 && end.retryAfterMs !== undefined)
      );
    }
    case 'error-response':
      return !(
        end.code === ContinuityErrorCode.KEY_REUSED || end.code === ContinuityErrorCode.EVENTS_EVICTED
      );
    default:
      return true;
  }
}
