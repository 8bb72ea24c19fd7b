import { type Span, SpanKind, trace } from '@opentelemetry/api';
import type { GapReport } from '../../machines/client/session-context.js';
import { isRequest, isResponse, type JsonRpcMessage, requestKey } from '../../machines/jsonrpc.js';
import { operationOutcome } from '../../machines/operation-outcome.js';
import { ContinuityAttr, ContinuityEvent, McpAttr, spanName } from './names.js';
import { activeContext, type ContinuityTelemetry, endOperation, withoutUndefined } from './telemetry.js';

interface OpenCall {
  readonly span: Span;
  readonly startedAt: number;
  readonly attributes: Record<string, string | undefined>;
}

/**
 * The 2025-era transport's CLIENT spans: one per request the application sends, from the send to the one
 * answer the transport delivers (resumed streams included), with the trace context in the request's
 * `params._meta`. A gap on the request's stream is a `mcp_continuity.gap` event. Keyed by the request's
 * wire id (the transport tags ids before they leave).
 */
export class SessionCallTraces {
  private readonly open = new Map<string, OpenCall>();

  constructor(private readonly telemetry: ContinuityTelemetry) {}

  /** `message` as it will be sent: a request gets a span and carries its context in `_meta`. */
  sent(
    message: JsonRpcMessage,
    sessionId: string | undefined,
    protocolVersion: string | undefined,
  ): JsonRpcMessage {
    // The application gave up on a request (the SDK's timeout, an abort): no answer will be delivered,
    // so its span ends now rather than living as long as the transport.
    if (!isRequest(message)) {
      if (this.open.size === 0) return message;
      if ('method' in message && message.method === 'notifications/cancelled')
        this.cancelled((message.params as { requestId?: unknown } | undefined)?.requestId);
      return message;
    }
    // Nothing to record or propagate: no span, and the request goes unchanged.
    if (!this.telemetry.observing()) return message;
    const params = message.params ?? {};
    const target =
      message.method === 'tools/call' && typeof params.name === 'string' ? params.name : undefined;
    const attributes = {
      [McpAttr.methodName]: message.method,
      [McpAttr.toolName]: target,
      [McpAttr.sessionId]: sessionId,
      [McpAttr.protocolVersion]: protocolVersion,
      [McpAttr.networkProtocolName]: 'http',
      [McpAttr.networkTransport]: 'tcp',
    };
    const parent = activeContext();
    const span = this.telemetry.tracer.startSpan(
      spanName(message.method, target),
      {
        kind: SpanKind.CLIENT,
        attributes: withoutUndefined({ ...attributes, [McpAttr.requestId]: String(message.id) }),
      },
      parent,
    );
    this.open.set(requestKey(message.id), { span, startedAt: performance.now(), attributes });
    const meta = this.telemetry.metaFor(trace.setSpan(parent, span));
    if (!meta) return message;
    const old = params._meta;
    const base = typeof old === 'object' && old !== null ? (old as Record<string, unknown>) : {};
    return { ...message, params: { ...params, _meta: { ...base, ...meta } } };
  }

  /** A message is delivered to the application: a response ends its request's span. */
  delivered(message: JsonRpcMessage): void {
    if (this.open.size === 0 || !isResponse(message) || message.id === null) return;
    const key = requestKey(message.id);
    const call = this.open.get(key);
    if (!call) return;
    this.open.delete(key);
    this.end(call, operationOutcome(message));
  }

  private cancelled(requestId: unknown): void {
    if (typeof requestId !== 'string' && typeof requestId !== 'number') return;
    const key = requestKey(requestId);
    const call = this.open.get(key);
    if (!call) return;
    this.open.delete(key);
    this.end(call, { errorType: 'cancelled' });
  }

  /** Events of a stream were lost: an event on its request's span (a standalone stream has none). */
  gap(gap: GapReport): void {
    const span = this.open.get(gap.streamKey)?.span;
    if (!span?.isRecording()) return;
    span.addEvent(
      ContinuityEvent.gap,
      withoutUndefined({
        [ContinuityAttr.reason]: gap.reason,
        [ContinuityAttr.gapCount]: gap.lostCount ?? undefined,
      }),
    );
  }

  /** The transport closed: every open span ends (its request never got an answer here). */
  closed(): void {
    for (const call of this.open.values()) this.end(call, { errorType: 'transport_closed' });
    this.open.clear();
  }

  private end(call: OpenCall, outcome: { errorType?: string; statusCode?: string }): void {
    endOperation(this.telemetry.clientDuration, call.span, call.startedAt, call.attributes, outcome);
  }
}
