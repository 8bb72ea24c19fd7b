import { type Context, type Span, SpanKind, trace } from '@opentelemetry/api';
import type { JsonRpcRequest } from '../../machines/jsonrpc.js';
import { PROTOCOL_VERSION_META_KEY } from '../../machines/server/era.js';
import { EXECUTE_TOOL, McpAttr, spanName } from './names.js';
import { type ContinuityTelemetry, withoutUndefined } from './telemetry.js';

/** A SERVER span opened for one 2026-07-28 request, with the attributes its duration metric is recorded under. */
export interface ServerSpan {
  readonly span: Span;
  /** The OpenTelemetry MCP attributes of the request (the metric's attributes: no request id). */
  readonly attributes: Record<string, string | undefined>;
  /** This span under the caller's trace context (from `params._meta`): what the request's work runs in. */
  readonly context: Context;
}

/**
 * Opens the SERVER span of a 2026-07-28 request under the trace context its `params._meta` carries,
 * named and attributed by OpenTelemetry's MCP conventions. One place for it, so a keyed execution and an
 * unkeyed request are described alike in traces and in `mcp.server.operation.duration`.
 */
export function startServerSpan(telemetry: ContinuityTelemetry, message: JsonRpcRequest): ServerSpan {
  const params = message.params ?? {};
  const meta = params._meta as Record<string, unknown> | undefined;
  const tool = message.method === 'tools/call' && typeof params.name === 'string' ? params.name : undefined;
  const version = meta?.[PROTOCOL_VERSION_META_KEY];
  const attributes = {
    [McpAttr.methodName]: message.method,
    [McpAttr.toolName]: tool,
    [McpAttr.operationName]: tool === undefined ? undefined : EXECUTE_TOOL,
    [McpAttr.protocolVersion]: typeof version === 'string' ? version : undefined,
    [McpAttr.networkProtocolName]: 'http',
    [McpAttr.networkTransport]: 'tcp',
  };
  const parent = telemetry.contextOf(meta);
  const span = telemetry.tracer.startSpan(
    spanName(message.method, tool),
    {
      kind: SpanKind.SERVER,
      attributes: withoutUndefined({ ...attributes, [McpAttr.requestId]: String(message.id) }),
    },
    parent,
  );
  return { span, attributes, context: trace.setSpan(parent, span) };
}
