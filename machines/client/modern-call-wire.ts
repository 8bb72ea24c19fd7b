import { type ContinuitySettings, parseContinuitySettings } from '../continuity-extension.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../jsonrpc.js';
import type { ToolHints } from './modern-call.machine.js';
import type { ModernCallStreamEnd } from './modern-call-decide.js';

/**
 * What the 2026-07-28 client runtime (`src/client/modern/continuity-fetch.ts`) reads off the wire, as pure
 * functions: which outgoing POSTs it handles, what a `server/discover` or `tools/list` result tells it,
 * and how an HTTP answer or a failed fetch is named as a `ModernCallStreamEnd` for the call machine.
 */

/** The `_meta` key of a 2026-era request's protocol version claim (changelog, major change 2). */
export const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion';

/** Revisions that are stateless (per-request metadata, no sessions). */
export const MODERN_REVISIONS: ReadonlySet<string> = new Set(['2026-07-28']);

/**
 * What the runtime does with one outgoing POST body:
 * - `pass`: 2025-era traffic (no modern envelope), notifications, batches, anything unrecognised: untouched.
 * - `discover` / `tools-list`: passed through; the result is read (extension settings, tool hints).
 * - `call`: a 2026-07-28 `tools/call`: run by the call machine.
 * - `listen`: a 2026-07-28 `subscriptions/listen`: the re-opening listen stream.
 */
export type OutgoingRoute =
  | { readonly kind: 'pass' }
  | { readonly kind: 'discover' | 'tools-list' | 'listen'; readonly request: JsonRpcRequest }
  | { readonly kind: 'call'; readonly request: JsonRpcRequest; readonly toolName: string };

export function routeOutgoing(body: unknown): OutgoingRoute {
  const request = modernRequest(body);
  if (!request) return { kind: 'pass' };
  switch (request.method) {
    case 'server/discover':
      return { kind: 'discover', request };
    case 'tools/list':
      return { kind: 'tools-list', request };
    case 'subscriptions/listen':
      return { kind: 'listen', request };
    case 'tools/call': {
      const name = request.params?.name;
      return typeof name === 'string' ? { kind: 'call', request, toolName: name } : { kind: 'pass' };
    }
    default:
      return { kind: 'pass' };
  }
}

/** A single JSON-RPC request claiming a modern revision in its `_meta`; else undefined. */
function modernRequest(body: unknown): JsonRpcRequest | undefined {
  const m = record(body);
  if (m?.jsonrpc !== '2.0' || typeof m.method !== 'string') return undefined;
  if (typeof m.id !== 'string' && typeof m.id !== 'number') return undefined;
  const params = record(m.params);
  const version = record(params?._meta)?.[PROTOCOL_VERSION_META];
  if (typeof version !== 'string' || !MODERN_REVISIONS.has(version)) return undefined;
  return m as unknown as JsonRpcRequest;
}

/** The extension's settings from a `server/discover` response, or undefined (not advertised, unreadable). */
export function settingsFromDiscover(response: unknown): ContinuitySettings | undefined {
  const result = record(record(response)?.result);
  return result ? parseContinuitySettings(result.capabilities) : undefined;
}

/** Tool hints by name from a `tools/list` response (only the two the decision table reads). */
export function hintsFromToolsList(response: unknown): ReadonlyMap<string, ToolHints> {
  const tools = record(record(response)?.result)?.tools;
  const hints = new Map<string, ToolHints>();
  if (!Array.isArray(tools)) return hints;
  for (const t of tools) {
    const tool = record(t);
    if (!tool || typeof tool.name !== 'string') continue;
    const a = record(tool.annotations);
    hints.set(tool.name, {
      readOnlyHint: a?.readOnlyHint === true,
      idempotentHint: a?.idempotentHint === true,
    });
  }
  return hints;
}

/** How the runtime reads an HTTP answer's body. */
export type AnswerShape = 'event-stream' | 'json' | 'status';

/** A 200 is read as an event stream or a JSON body; any other status (or a 200 of another type) is not. */
export function answerShape(status: number, contentType: string | null): AnswerShape {
  if (status !== 200) return 'status';
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
  if (type === 'text/event-stream') return 'event-stream';
  if (type === 'application/json') return 'json';
  return 'status';
}

/**
 * The end of an answer that is not the call's own JSON-RPC response: a status (with its body and
 * `Retry-After`), or a 200 whose body was not a JSON-RPC message.
 */
export function endOfAnswer(
  status: number,
  body: unknown,
  retryAfter: string | null,
  nowMs: number,
): ModernCallStreamEnd {
  if (status === 200) return { kind: 'malformed-response' };
  const retryAfterMs = parseRetryAfter(retryAfter, nowMs);
  return {
    kind: 'http-status',
    status,
    ...(body !== undefined ? { body } : {}),
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
  };
}

/** `Retry-After` (seconds, or an HTTP date against `nowMs`, the wall clock) in ms. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/** A parsed body or event data as a JSON-RPC message, if it is one. */
export function asMessage(value: unknown): JsonRpcMessage | undefined {
  const m = record(value);
  if (m?.jsonrpc !== '2.0') return undefined;
  if (typeof m.method === 'string') return m as unknown as JsonRpcMessage;
  if (('result' in m || 'error' in m) && 'id' in m) return m as unknown as JsonRpcMessage;
  return undefined;
}

function record(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

/**
 * How a finished call is handed to an HTTP client library (the SDK's transport) that sent it as one POST:
 * - `final`: as its final JSON-RPC message (the last event of the stream already open, or the whole body);
 * - `raw-answer`: a definite failure on an HTTP status, before any message: the status and body as they
 *   came, so the library reacts as it would have without us (401 → its auth flow, 400 → its ProtocolError);
 * - `fetch-error`: a definite failure because no connection could be made: the fetch error itself.
 * An answer or an unknown outcome is always `final`: the library must settle the call now.
 */
export function libraryEnding(
  outcome: 'answered' | 'outcome-unknown' | 'failed',
  end: ModernCallStreamEnd | undefined,
  streamOpen: boolean,
): 'final' | 'raw-answer' | 'fetch-error' {
  if (outcome !== 'failed' || streamOpen || !end) return 'final';
  if (end.kind === 'http-status') return 'raw-answer';
  if (end.kind === 'refused') return 'fetch-error';
  return 'final';
}

/**
 * A `raw-answer` body as the library gets it: a JSON-RPC error response is put under the application's
 * request id (a re-issue's answer names the re-issue's id, which the library never sent, and it would
 * take the answer for a transport failure instead of the server's error); any other body as it came.
 */
export function rawAnswerAs(text: string, applicationId: JsonRpcRequest['id']): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return text;
  }
  const message = record(body);
  if (message?.jsonrpc !== '2.0' || !('error' in message) || 'result' in message) return text;
  if (message.id === applicationId) return text;
  return JSON.stringify({ ...message, id: applicationId });
}
