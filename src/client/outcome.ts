import { JsonRpcCode } from '../../machines/codes.js';

/** The JSON-RPC error code of a call whose outcome is unknown (it may or may not have run). */
export const OUTCOME_UNKNOWN = JsonRpcCode.OUTCOME_UNKNOWN;

/**
 * True for an error meaning "this call may or may not have run on the server": what `client.callTool`
 * throws for it — the v1 SDK's `McpError`, or the v2 SDK's `ProtocolError` (on 2026-07-28 through
 * `continuityFetch`) — or a raw JSON-RPC error object. Do not blindly retry such a call: its `data` holds
 * the `reason` and, with the continuity extension, the `idempotencyKey` to reconcile with.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code ?? (error as { error?: { code?: unknown } }).error?.code;
  return code === OUTCOME_UNKNOWN;
}
