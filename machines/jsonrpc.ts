/**
 * The few JSON-RPC shapes the machines look at. Kept local so `machines/` imports nothing but xstate:
 * the runtime hands in SDK messages, which are structurally compatible.
 */
export type RequestId = string | number;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: RequestId;
  method: string;
  params?: Record<string, unknown>;
}
export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown>;
}
export interface JsonRpcResult {
  jsonrpc: '2.0';
  id: RequestId;
  result: Record<string, unknown>;
}
export interface JsonRpcError {
  jsonrpc: '2.0';
  id: RequestId | null;
  error: { code: number; message: string; data?: unknown };
}
export type JsonRpcResponse = JsonRpcResult | JsonRpcError;
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

export const isRequest = (m: JsonRpcMessage): m is JsonRpcRequest => 'method' in m && 'id' in m;
export const isNotification = (m: JsonRpcMessage): m is JsonRpcNotification => 'method' in m && !('id' in m);
export const isResponse = (m: JsonRpcMessage): m is JsonRpcResponse =>
  !('method' in m) && ('result' in m || 'error' in m);

/** A map key that keeps `1` and `"1"` apart, as JSON-RPC does. */
export const requestKey = (id: RequestId): string => `${typeof id === 'number' ? 'n' : 's'}:${id}`;

/** True for a key made by `requestKey`. */
export const isRequestKey = (key: unknown): key is string =>
  typeof key === 'string' && (key.startsWith('n:') || key.startsWith('s:'));

/** The id a `requestKey` was made from. */
export const idFromKey = (key: string): RequestId =>
  key.startsWith('n:') ? Number(key.slice(2)) : key.slice(2);
