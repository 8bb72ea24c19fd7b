import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import { context, type Span, SpanKind, trace } from '@opentelemetry/api';
import { isRequest, isResponse, type JsonRpcMessage, requestKey } from '../../machines/jsonrpc.js';
import { operationOutcome } from '../../machines/operation-outcome.js';
import { EXECUTE_TOOL, McpAttr, spanName } from './names.js';
import { type ContinuityTelemetry, endOperation, withoutUndefined } from './telemetry.js';

/** An SDK `McpServer` or `Server`, as the 2025 session runtime connects it (`McpServerLike`). */
export interface ConnectableServer {
  connect(transport: Transport): Promise<void>;
  close(): Promise<void>;
}

/** Cancellations kept for requests not handed over yet. */
const MAX_EARLY_CANCELS = 64;

interface OpenRequest {
  readonly span: Span;
  readonly startedAt: number;
  readonly attributes: Record<string, string | undefined>;
}

/**
 * The 2025-era server's SERVER spans: one per request a session's SDK server is handed, under the trace
 * context of its `params._meta` (the client's span), from the hand-over to the response the SDK server
 * sends, with `mcp.session.id`. The tool runs inside the span's context (its own spans are children).
 * Built by wrapping the transport the session runtime connects the SDK server to, so nothing of the
 * session changes. A message no client sent over HTTP here (a restore's replayed initialize) has no span.
 */
export function tracingSessionServer(
  server: ConnectableServer,
  telemetry: ContinuityTelemetry,
  sessionId: string,
): ConnectableServer {
  return new TracedServer(server, telemetry, sessionId);
}

/**
 * One per session, idle or not: a class, so its methods are shared rather than two closures per session
 * (docs/benchmarks.md, row 4).
 */
class TracedServer implements ConnectableServer {
  constructor(
    private readonly server: ConnectableServer,
    private readonly telemetry: ContinuityTelemetry,
    private readonly sessionId: string,
  ) {}
  connect(transport: Transport): Promise<void> {
    return this.server.connect(new TracingTransport(transport, this.telemetry, this.sessionId));
  }
  close(): Promise<void> {
    return this.server.close();
  }
}

/** Open requests and early cancellations exist only while there are some: an idle session holds neither. */
class TracingTransport implements Transport {
  private open: Map<string, OpenRequest> | undefined;
  /** Cancellations handed over before their request (`cancelled`). */
  private early: Set<string> | undefined;

  constructor(
    private readonly inner: Transport,
    private readonly telemetry: ContinuityTelemetry,
    readonly sessionId: string,
  ) {}

  set onmessage(handler: Transport['onmessage']) {
    this.inner.onmessage = handler && ((message, extra) => this.received(handler, message, extra));
  }
  get onmessage(): Transport['onmessage'] {
    return this.inner.onmessage;
  }
  set onclose(handler: Transport['onclose']) {
    this.inner.onclose = () => {
      for (const r of this.open?.values() ?? []) this.end(r, { errorType: 'transport_closed' });
      this.open = undefined;
      handler?.();
    };
  }
  get onclose(): Transport['onclose'] {
    return this.inner.onclose;
  }
  set onerror(handler: Transport['onerror']) {
    this.inner.onerror = handler;
  }
  get onerror(): Transport['onerror'] {
    return this.inner.onerror;
  }

  start(): Promise<void> {
    return this.inner.start();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const m = message as JsonRpcMessage;
    if (this.open !== undefined && isResponse(m) && m.id !== null)
      this.ended(requestKey(m.id), operationOutcome(m));
    return this.inner.send(message, options);
  }

  private received(
    handler: NonNullable<Transport['onmessage']>,
    message: JSONRPCMessage,
    extra: MessageExtraInfo | undefined,
  ): void {
    // Nothing to record or propagate: the request is handed over as is, with no span (none is open either).
    if (this.open === undefined && !this.telemetry.observing()) {
      handler(message, extra);
      return;
    }
    const m = message as JsonRpcMessage;
    if ('method' in m && m.method === 'notifications/cancelled') {
      const id = (m.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof id === 'string' || typeof id === 'number') this.cancelled(requestKey(id));
    }
    const headers = extra?.requestInfo?.headers;
    // The session hands each request id to the SDK server once; a repeat is not timed again.
    if (!isRequest(m) || headers === undefined || this.open?.has(requestKey(m.id))) {
      handler(message, extra);
      return;
    }
    const params = m.params ?? {};
    const tool = m.method === 'tools/call' && typeof params.name === 'string' ? params.name : undefined;
    const version = headers['mcp-protocol-version'];
    const attributes = {
      [McpAttr.methodName]: m.method,
      [McpAttr.toolName]: tool,
      [McpAttr.operationName]: tool === undefined ? undefined : EXECUTE_TOOL,
      [McpAttr.sessionId]: this.sessionId,
      [McpAttr.protocolVersion]: typeof version === 'string' ? version : undefined,
      [McpAttr.networkProtocolName]: 'http',
      [McpAttr.networkTransport]: 'tcp',
    };
    const parent = this.telemetry.contextOf(params._meta);
    const span = this.telemetry.tracer.startSpan(
      spanName(m.method, tool),
      {
        kind: SpanKind.SERVER,
        attributes: withoutUndefined({ ...attributes, [McpAttr.requestId]: String(m.id) }),
      },
      parent,
    );
    const key = requestKey(m.id);
    this.open ??= new Map();
    this.open.set(key, { span, startedAt: performance.now(), attributes });
    // The SDK server starts the handler from here: its promises keep this context.
    context.with(trace.setSpan(parent, span), () => handler(message, extra));
    if (this.early?.delete(key)) this.ended(key, { errorType: 'cancelled' });
  }

  /**
   * A request's POST and its cancellation's are served concurrently: the cancellation may be handed over
   * first. Its id is kept (a few, the oldest forgotten) so the request's span ends as cancelled on arrival.
   */
  private cancelled(key: string): void {
    if (this.open?.has(key)) {
      this.ended(key, { errorType: 'cancelled' });
      return;
    }
    this.early ??= new Set();
    this.early.add(key);
    if (this.early.size > MAX_EARLY_CANCELS) this.early.delete(this.early.values().next().value as string);
  }

  private ended(key: string, outcome: { errorType?: string; statusCode?: string }): void {
    const r = this.open?.get(key);
    if (!r) return;
    this.open?.delete(key);
    if (this.open?.size === 0) this.open = undefined;
    this.end(r, outcome);
  }

  private end(r: OpenRequest, outcome: { errorType?: string; statusCode?: string }): void {
    endOperation(this.telemetry.serverDuration, r.span, r.startedAt, r.attributes, outcome);
  }
}
