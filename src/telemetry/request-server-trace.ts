import { type Context, context, type Span } from '@opentelemetry/api';
import { createParser } from 'eventsource-parser';
import {
  isRequest,
  isResponse,
  type JsonRpcMessage,
  type JsonRpcRequest,
  type JsonRpcResponse,
  requestKey,
} from '../../machines/jsonrpc.js';
import { type OperationOutcome, operationOutcome } from '../../machines/operation-outcome.js';
import { parseJson } from '../server/keyed/sdk-messages.js';
import { startServerSpan } from './server-span.js';
import { type ContinuityTelemetry, endOperation } from './telemetry.js';

/** A JSON body longer than this is relayed without being read for its outcome (a large result: no error). */
const MAX_JSON_READ = 1024 * 1024;

/**
 * One SERVER span for a 2026-07-28 request the endpoint serves on the SDK without the continuity
 * extension's keyed path (an unkeyed `tools/call`, a `tools/list`…), under the trace context of its
 * `params._meta`: from its arrival to the end of its response's body, which the span reads on its way
 * to the client for the request's answer (`error.type`). A client that goes away first ends it as
 * `cancelled` (closing the stream cancels an unkeyed call). `undefined` for a notification, and when
 * nothing observes (`ContinuityTelemetry.observing`): the response is then not read on its way.
 */
export function requestServerTrace(
  telemetry: ContinuityTelemetry,
  body: unknown,
): RequestServerTrace | undefined {
  const m = body as JsonRpcMessage;
  return typeof m === 'object' && m !== null && !Array.isArray(m) && isRequest(m) && telemetry.observing()
    ? new RequestServerTrace(telemetry, m)
    : undefined;
}

export class RequestServerTrace {
  private readonly span: Span;
  private readonly startedAt = performance.now();
  private readonly attributes: Record<string, string | undefined>;
  private readonly context: Context;
  private readonly key: string;
  private done = false;

  constructor(
    private readonly telemetry: ContinuityTelemetry,
    message: JsonRpcRequest,
  ) {
    ({
      span: this.span,
      attributes: this.attributes,
      context: this.context,
    } = startServerSpan(telemetry, message));
    this.key = requestKey(message.id);
  }

  /** Runs `work` (the SDK's handling) inside this span's context: the tool's own spans are its children. */
  within<T>(work: () => T): T {
    return context.with(this.context, work);
  }

  /**
   * The SDK's answer, relayed unchanged; its body is read on the way for the request's answer. `gone`:
   * the client went away (the SDK then ends the body without an answer: `cancelled`).
   */
  watch(response: Response, gone: AbortSignal): Response {
    const body = response.body;
    if (body === null) {
      // The SDK answers an aborted JSON-mode request with no body (499).
      this.end(gone.aborted ? { errorType: 'cancelled' } : operationOutcome(undefined));
      return response;
    }
    const sse = response.headers.get('content-type')?.includes('text/event-stream') === true;
    let answer: JsonRpcResponse | undefined;
    const look = (text: string) => {
      const found = parseJson(text);
      for (const m of Array.isArray(found) ? found : found === undefined ? [] : [found])
        if (isResponse(m) && m.id !== null && requestKey(m.id) === this.key) answer = m;
    };
    const parser = createParser({ onEvent: (event) => look(event.data) });
    const decoder = new TextDecoder();
    let json = '';
    const outcome = (): OperationOutcome => {
      if (!sse) {
        if (json.length > MAX_JSON_READ) return {};
        look(json);
      }
      return !answer && gone.aborted ? { errorType: 'cancelled' } : operationOutcome(answer);
    };
    const reader = body.getReader();
    const relayed = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        try {
          const { done, value } = await reader.read();
          if (done) {
            this.end(outcome());
            controller.close();
            return;
          }
          const text = decoder.decode(value, { stream: true });
          if (sse) parser.feed(text);
          else if (json.length <= MAX_JSON_READ) json += text;
          controller.enqueue(value);
        } catch (error) {
          this.end({ errorType: 'response_failed' });
          controller.error(error);
        }
      },
      cancel: async (reason) => {
        this.end(answer ? operationOutcome(answer) : { errorType: 'cancelled' });
        await reader.cancel(reason).catch(() => undefined);
      },
    });
    return new Response(relayed, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  }

  private end(outcome: OperationOutcome): void {
    if (this.done) return;
    this.done = true;
    endOperation(this.telemetry.serverDuration, this.span, this.startedAt, this.attributes, outcome);
  }
}
