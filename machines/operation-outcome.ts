import type { JsonRpcResponse } from './jsonrpc.js';

/**
 * How an MCP operation ended, in the words of OpenTelemetry's MCP conventions: `error.type` is the
 * JSON-RPC error code (as a string) when the answer is an error, `tool_error` when a `tools/call` result
 * says `isError: true` (a normal JSON-RPC result), and absent on success. `statusCode` is the conventions'
 * `rpc.response.status_code`: the error code, when there is one.
 */
export interface OperationOutcome {
  readonly errorType?: string;
  readonly statusCode?: string;
}

export function operationOutcome(response: JsonRpcResponse | undefined): OperationOutcome {
  if (!response) return { errorType: 'no_response' };
  if ('error' in response) {
    const code = String(response.error.code);
    return { errorType: code, statusCode: code };
  }
  const result = response.result as { isError?: unknown } | undefined;
  return result?.isError === true ? { errorType: 'tool_error' } : {};
}
