import { JsonRpcCode } from '../../machines/codes.js';

/** The JSON-RPC error code of a call whose outcome is unknown (it may or may not have run). */
export const OUTCOME_UNKNOWN = JsonRpcCode.OUTCOME_UNKNOWN;

/**
 * True for an error meaning "this call may or may not have run on the server": the SDK's `McpError`
 * thrown by `client.callTool`, or a raw JSON-RPC error object. Do not blindly retry such a call.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code ?? (error as { error?: { code?: unknown } }).error?.code;
  return code === OUTCOME_UNKNOWN;
}
