import type { JsonRpcMessage } from './jsonrpc.js';
import type { ServerAdvertisement } from './validity.js';

/**
 * How a server tells clients what it retains, so a client can check the design note's condition 2.
 * Sent as the `MCP-Continuity` response header on every session response, and as the experimental
 * capability `mcp-continuity` in the initialize result. Example header:
 *
 *   MCP-Continuity: retention-ms=600000, max-events=1000, idle-ttl-ms=1800000, heartbeat-ms=15000, gaps=410, dedupe=1
 */
export const ADVERTISEMENT_HEADER = 'MCP-Continuity';
export const ADVERTISEMENT_CAPABILITY = 'mcp-continuity';

export function formatAdvertisement(a: ServerAdvertisement): string {
  const parts: string[] = [];
  if (a.retentionMs !== undefined) parts.push(`retention-ms=${a.retentionMs}`);
  if (a.maxEventsPerStream !== undefined) parts.push(`max-events=${a.maxEventsPerStream}`);
  if (a.idleTtlMs !== undefined) parts.push(`idle-ttl-ms=${a.idleTtlMs}`);
  if (a.heartbeatMs !== undefined) parts.push(`heartbeat-ms=${a.heartbeatMs}`);
  if (a.gapSignalling) parts.push('gaps=410');
  if (a.duplicateRequestProtection) parts.push('dedupe=1');
  return parts.join(', ');
}

/** Reads the header; an absent or unreadable one advertises nothing (best-effort). */
export function parseAdvertisement(header: string | null | undefined): ServerAdvertisement | undefined {
  if (!header) return undefined;
  const fields = new Map<string, string>();
  for (const part of header.split(',')) {
    const [k, v] = part.split('=').map((s) => s.trim());
    if (k && v !== undefined) fields.set(k.toLowerCase(), v);
  }
  const num = (k: string) => {
    const v = Number(fields.get(k));
    return fields.has(k) && Number.isFinite(v) && v >= 0 ? v : undefined;
  };
  return {
    retentionMs: num('retention-ms'),
    maxEventsPerStream: num('max-events'),
    idleTtlMs: num('idle-ttl-ms'),
    heartbeatMs: num('heartbeat-ms'),
    gapSignalling: fields.get('gaps') === '410',
    duplicateRequestProtection: fields.get('dedupe') === '1',
  };
}

/** The initialize result also carries the retention promise, as an experimental capability. */
export function withAdvertisement(m: JsonRpcMessage, advertisement: ServerAdvertisement): JsonRpcMessage {
  if (!('result' in m)) return m;
  const capabilities = (m.result.capabilities ?? {}) as Record<string, unknown>;
  const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
  return {
    ...m,
    result: {
      ...m.result,
      capabilities: {
        ...capabilities,
        experimental: { ...experimental, [ADVERTISEMENT_CAPABILITY]: advertisement },
      },
    },
  };
}
