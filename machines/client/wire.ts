import { JsonRpcCode } from '../codes.js';
import type { JsonRpcError, JsonRpcMessage, RequestId } from '../jsonrpc.js';

/**
 * What the client accepts from the network as a JSON-RPC message. A server decides nothing by sending
 * something else: what is not a message is reported, never handed to the application. Pure.
 */
export function asJsonRpcMessage(value: unknown): JsonRpcMessage | undefined {
  if (!isPlainObject(value) || value.jsonrpc !== '2.0') return undefined;
  if ('method' in value) {
    if (typeof value.method !== 'string') return undefined;
    if (value.params !== undefined && !isPlainObject(value.params)) return undefined;
    if ('result' in value || 'error' in value) return undefined;
    if ('id' in value && !isRequestId(value.id)) return undefined;
    return value as unknown as JsonRpcMessage;
  }
  if (!('id' in value) || (value.id !== null && !isRequestId(value.id))) return undefined;
  const hasResult = 'result' in value;
  const hasError = 'error' in value;
  if (hasResult === hasError) return undefined;
  if (hasResult) return isPlainObject(value.result) ? (value as unknown as JsonRpcMessage) : undefined;
  const error = value.error;
  if (!isPlainObject(error) || !Number.isInteger(error.code) || typeof error.message !== 'string')
    return undefined;
  return value as unknown as JsonRpcMessage;
}

/** The request id a value that is not a valid message claims to answer, if it names one. */
export function claimedId(value: unknown): RequestId | undefined {
  if (!isPlainObject(value) || 'method' in value) return undefined;
  return isRequestId(value.id) ? value.id : undefined;
}

/**
 * What the application gets for a call whose answer came but is not valid JSON-RPC: the call ends at once
 * with this error, not after the SDK's own request timeout.
 */
export function malformedAnswer(id: RequestId): JsonRpcError {
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: JsonRpcCode.MALFORMED_ANSWER,
      message: 'The server answered this call with something that is not a JSON-RPC response',
    },
  };
}

function isRequestId(id: unknown): id is RequestId {
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
