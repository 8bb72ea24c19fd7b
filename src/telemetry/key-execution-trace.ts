import { type Context, context, type Span } from '@opentelemetry/api';
import { isResponse, type JsonRpcMessage, type JsonRpcRequest } from '../../machines/jsonrpc.js';
import { operationOutcome } from '../../machines/operation-outcome.js';
import { ContinuityAttr, ContinuityEvent, McpAttr } from './names.js';
import { startServerSpan } from './server-span.js';
import { type ContinuityTelemetry, endOperation, withoutUndefined } from './telemetry.js';

/**
 * One SERVER span per execution of a key (the continuity extension runs a key's body once, whichever
 * attempt starts it): its parent is the trace context in the starting attempt's `params._meta` (the
 * client's call span, which every attempt carries), so the client's span, its attempts and this one
 * execution are one trace. Attempts that attach to the running execution are span events.
 */
export class KeyExecutionTrace {
  private readonly span: Span;
  private readonly startedAt = performance.now();
  private readonly attributes: Record<string, string | undefined>;
  private done = false;
  /** The context the body runs in: this span under the client's. */
  readonly context: Context;

  constructor(
    private readonly telemetry: ContinuityTelemetry,
    message: JsonRpcRequest,
  ) {
    ({
      span: this.span,
      attributes: this.attributes,
      context: this.context,
    } = startServerSpan(telemetry, message));
  }

  /** Runs `work` (the body on the SDK) inside this span's context: the tool's own spans are its children. */
  within<T>(work: () => T): T {
    return context.with(this.context, work);
  }

  /** Another attempt of the key (a re-issue) attached to this running execution. */
  attached(message: JsonRpcRequest, lastEventId: string | undefined): void {
    if (!this.span.isRecording()) return;
    this.span.addEvent(
      ContinuityEvent.attach,
      withoutUndefined({
        [McpAttr.requestId]: String(message.id),
        [ContinuityAttr.lastEventId]: lastEventId,
      }),
    );
  }

  /** The execution ended with `final` (`undefined`: it ended without an answer). Only the first call counts. */
  ended(final: JsonRpcMessage | undefined): void {
    if (this.done) return;
    this.done = true;
    const outcome = operationOutcome(final && isResponse(final) ? final : undefined);
    endOperation(this.telemetry.serverDuration, this.span, this.startedAt, this.attributes, outcome);
  }
}
