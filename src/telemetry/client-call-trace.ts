import { type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ModernCallOutput } from '../../machines/client/modern-call.machine.js';
import type { ModernCallDecision, ModernCallStreamEnd } from '../../machines/client/modern-call-decide.js';
import type { GapDetails } from '../../machines/decide.js';
import type { JsonRpcRequest } from '../../machines/jsonrpc.js';
import { operationOutcome } from '../../machines/operation-outcome.js';
import { ContinuityAttr, ContinuityEvent, EXECUTE_TOOL, McpAttr, spanName } from './names.js';
import { activeContext, type ContinuityTelemetry, withoutUndefined } from './telemetry.js';

/**
 * One CLIENT span per application `tools/call` on 2026-07-28, however many attempts it takes: each attempt
 * (the first and every re-issue), each cut and its decision, a gap, an outcome unknown are span events.
 * Its trace context goes in every attempt's `params._meta` (`meta`), so the server's execution, which
 * any attempt may start or attach to, is a child of this span. With no SDK the span does not record and
 * no event is built.
 */
export class ClientCallTrace {
  private readonly span: Span;
  private readonly startedAt = performance.now();
  private readonly attributes: Record<string, string | undefined>;
  /** The `_meta` entries carrying this span's context, or `undefined` when nothing is propagated. */
  readonly meta: Readonly<Record<string, string>> | undefined;

  constructor(
    private readonly telemetry: ContinuityTelemetry,
    request: JsonRpcRequest,
    toolName: string,
    protocolVersion: string | undefined,
  ) {
    this.attributes = {
      [McpAttr.methodName]: request.method,
      [McpAttr.toolName]: toolName,
      [McpAttr.operationName]: EXECUTE_TOOL,
      [McpAttr.protocolVersion]: protocolVersion,
      [McpAttr.networkProtocolName]: 'http',
      [McpAttr.networkTransport]: 'tcp',
    };
    const parent = activeContext();
    this.span = telemetry.tracer.startSpan(
      spanName(request.method, toolName),
      {
        kind: SpanKind.CLIENT,
        attributes: withoutUndefined({ ...this.attributes, [McpAttr.requestId]: String(request.id) }),
      },
      parent,
    );
    this.meta = telemetry.metaFor(trace.setSpan(parent, this.span));
  }

  /** Attempt `n` (0: the first; n: the n-th re-issue) was sent as `request`. */
  attempt(n: number, request: JsonRpcRequest, lastEventId: unknown): void {
    if (!this.span.isRecording()) return;
    this.span.addEvent(
      ContinuityEvent.attempt,
      withoutUndefined({
        [ContinuityAttr.attempt]: n,
        [McpAttr.requestId]: String(request.id),
        [ContinuityAttr.lastEventId]: typeof lastEventId === 'string' ? lastEventId : undefined,
      }),
    );
  }

  /** An attempt ended (`end`) and the call machine decided (`decision`). */
  decided(end: ModernCallStreamEnd | undefined, decision: ModernCallDecision): void {
    if (!this.span.isRecording()) return;
    if (decision.action === 'reissue' || decision.action === 'backoff-reissue') {
      this.span.addEvent(ContinuityEvent.cut, {
        [ContinuityAttr.end]: end?.kind ?? 'unknown',
        [ContinuityAttr.decision]: decision.action,
        [ContinuityAttr.reason]: decision.reason,
        [ContinuityAttr.delayMs]: decision.delayMs,
      });
      if (decision.gap) this.gap(decision.gap);
    } else if (decision.action === 'outcome-unknown') {
      this.span.addEvent(
        ContinuityEvent.outcomeUnknown,
        withoutUndefined({
          [ContinuityAttr.end]: end?.kind,
          [ContinuityAttr.reason]: decision.reason,
          [ContinuityAttr.idempotencyKey]: decision.idempotencyKey,
        }),
      );
    }
  }

  private gap(gap: GapDetails): void {
    this.span.addEvent(
      ContinuityEvent.gap,
      withoutUndefined({
        [ContinuityAttr.reason]: gap.reason,
        [ContinuityAttr.gapCount]: gap.lostCount ?? undefined,
      }),
    );
  }

  /** The call's one ending (`undefined`: it failed inside the runtime). Ends the span, records the duration. */
  ended(out: ModernCallOutput | undefined, cancelled: boolean): void {
    const outcome = cancelled ? { errorType: 'cancelled' } : operationOutcome(out?.response);
    const attributes = withoutUndefined({ ...this.attributes, [McpAttr.errorType]: outcome.errorType });
    this.telemetry.clientDuration.record((performance.now() - this.startedAt) / 1000, attributes);
    if (this.span.isRecording()) {
      this.span.setAttributes(
        withoutUndefined({
          [McpAttr.errorType]: outcome.errorType,
          [McpAttr.responseStatusCode]: outcome.statusCode,
          [ContinuityAttr.outcome]: out?.outcome,
          [ContinuityAttr.reason]: out?.reason,
          [ContinuityAttr.attempts]: out ? out.attempts + 1 : undefined,
        }),
      );
      if (outcome.errorType !== undefined) this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}
