/**
 * The names of OpenTelemetry's semantic conventions for MCP (GenAI conventions, `docs/gen-ai/mcp.md`)
 * that this package emits, tabled once, and the names of our own continuity facts (`mcp_continuity.*`),
 * which the conventions have no word for: a re-issue, a cut, a gap, an attach, an outcome unknown.
 */

/** Span and metric attributes defined by the conventions. */
export const McpAttr = {
  methodName: 'mcp.method.name',
  sessionId: 'mcp.session.id',
  protocolVersion: 'mcp.protocol.version',
  requestId: 'jsonrpc.request.id',
  errorType: 'error.type',
  /** The JSON-RPC error code, as a string, when the answer was an error. */
  responseStatusCode: 'rpc.response.status_code',
  toolName: 'gen_ai.tool.name',
  operationName: 'gen_ai.operation.name',
  networkTransport: 'network.transport',
  networkProtocolName: 'network.protocol.name',
} as const;

/** The conventions' duration histograms (seconds). */
export const McpMetric = {
  clientOperationDuration: 'mcp.client.operation.duration',
  serverOperationDuration: 'mcp.server.operation.duration',
} as const;

/** The conventions' `error.type` for a tool result with `isError: true` (a normal JSON-RPC result). */
export const TOOL_ERROR = 'tool_error';

/** `gen_ai.operation.name` of a `tools/call`. */
export const EXECUTE_TOOL = 'execute_tool';

/** Span events of continuity facts, with our prefix. */
export const ContinuityEvent = {
  /** One attempt of a call was sent (the first, or a re-issue). */
  attempt: 'mcp_continuity.attempt',
  /** An attempt ended without the call's answer (its stream was cut, stalled, refused…). */
  cut: 'mcp_continuity.cut',
  /** Events of the call were evicted on the server before a re-issue could replay them. */
  gap: 'mcp_continuity.gap',
  /** The call ended as outcome unknown: it may or may not have run. */
  outcomeUnknown: 'mcp_continuity.outcome_unknown',
  /** A re-issue of a key reached the server while the key's one execution was running: it attached. */
  attach: 'mcp_continuity.attach',
} as const;

/** Attributes of continuity facts, with our prefix. */
export const ContinuityAttr = {
  attempt: 'mcp_continuity.attempt',
  attempts: 'mcp_continuity.attempts',
  lastEventId: 'mcp_continuity.last_event_id',
  end: 'mcp_continuity.end',
  decision: 'mcp_continuity.decision',
  reason: 'mcp_continuity.reason',
  delayMs: 'mcp_continuity.delay_ms',
  gapCount: 'mcp_continuity.gap.count',
  idempotencyKey: 'mcp_continuity.idempotency_key',
  outcome: 'mcp_continuity.outcome',
} as const;

/** The conventions' span name: `{mcp.method.name} {target}`, the target being the tool's name if any. */
export function spanName(method: string, target?: string): string {
  return target ? `${method} ${target}` : method;
}

/** The instrumentation scope name of every tracer and meter of this package. */
export const INSTRUMENTATION_SCOPE = 'mcp-continuity';
