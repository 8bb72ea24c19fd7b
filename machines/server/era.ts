import { CANCEL_METHOD } from '../continuity-extension.js';

/**
 * Which protocol era an HTTP request to the MCP endpoint belongs to: the 2026-07-28 ("modern") revision,
 * where every request carries its protocol version in `params._meta`, or the 2025 revisions (2025-11-25,
 * 2025-06-18, 2025-03-26) with sessions, `initialize`, GET, DELETE and `Last-Event-ID`. Pure.
 *
 * The rule is the spec's (2026-07-28 Streamable HTTP, "Backward Compatibility"; a request is modern when
 * it claims the per-request envelope) as the official v2 server draws it (`isLegacyRequest` in
 * `@modelcontextprotocol/server` 2.4.0, body-primary). test/modern/server-era.test.ts holds this rule
 * equal to that predicate over generated requests. In short:
 * - anything but POST (GET and DELETE are 2025 session operations), an empty body, a body that is not
 *   JSON, a posted JSON-RPC response, a batch of 2025 messages: legacy;
 * - a message whose `params._meta` has `io.modelcontextprotocol/protocolVersion` (the claim), or whose
 *   `MCP-Protocol-Version` header names 2026-07-28 or later: modern, even when the claim is malformed or
 *   names a version we do not serve (the modern path answers those with its own errors, never a session);
 * - `initialize` is legacy unless it carries a valid modern envelope; with a modern header but no valid
 *   envelope it is a modern error (-32020);
 * - valid JSON that is no JSON-RPC message, an empty batch, a batch with a claiming element: modern
 *   (`malformed`), which the modern path refuses with 400. Without a modern server we refuse them on the
 *   legacy path instead, as before.
 */

/** The first (and, for now, only) modern revision. Revisions are ISO dates: later compares greater. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

/** The `_meta` key of the per-request envelope claim. */
export const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';
const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities';
const CLIENT_INFO_META_KEY = 'io.modelcontextprotocol/clientInfo';
const LOG_LEVEL_META_KEY = 'io.modelcontextprotocol/logLevel';
const RELATED_TASK_META_KEY = 'io.modelcontextprotocol/related-task';
const LOG_LEVELS = new Set(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']);

/** Whether `version` belongs to the modern era (2026-07-28 or later). */
export const isModernVersion = (version: string): boolean => version >= MODERN_PROTOCOL_VERSION;

export interface EraFacts {
  /** The HTTP method. */
  readonly method: string;
  /** `MCP-Protocol-Version`, as the request has it (null when absent). */
  readonly protocolVersion: string | null;
  /** The POST body: `undefined` when it is empty or not JSON. */
  readonly body?: unknown;
}

export type Era =
  | { readonly era: 'legacy' }
  /**
   * `claim`: the body claims the envelope; `modern-header`: the header names a modern version;
   * `malformed`: not a message either era could serve (the modern path answers 400).
   */
  | { readonly era: 'modern'; readonly reason: 'claim' | 'modern-header' | 'malformed' };

const LEGACY: Era = { era: 'legacy' };
const modern = (reason: 'claim' | 'modern-header' | 'malformed'): Era => ({ era: 'modern', reason });

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const onlyKeys = (v: Json, allowed: readonly string[]) => Object.keys(v).every((k) => allowed.includes(k));
const isId = (v: unknown) => typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v));

/** `_meta` of a request or notification as JSON-RPC allows it (progress token, related task). */
const metaOk = (meta: unknown): boolean => {
  if (meta === undefined) return true;
  if (!isObject(meta)) return false;
  if ('progressToken' in meta && !isId(meta.progressToken)) return false;
  const task = meta[RELATED_TASK_META_KEY];
  return task === undefined || (isObject(task) && typeof task.taskId === 'string');
};
const paramsOk = (params: unknown): boolean =>
  params === undefined || (isObject(params) && metaOk(params._meta));

/** The strict JSON-RPC 2.0 shapes (extra top-level members make a message invalid). */
const isRequest = (v: Json) =>
  onlyKeys(v, ['jsonrpc', 'id', 'method', 'params']) &&
  v.jsonrpc === '2.0' &&
  isId(v.id) &&
  typeof v.method === 'string' &&
  paramsOk(v.params);
const isNotification = (v: Json) =>
  onlyKeys(v, ['jsonrpc', 'method', 'params']) &&
  v.jsonrpc === '2.0' &&
  typeof v.method === 'string' &&
  paramsOk(v.params);
const isResult = (v: Json) =>
  onlyKeys(v, ['jsonrpc', 'id', 'result']) && v.jsonrpc === '2.0' && isId(v.id) && isObject(v.result);
const isError = (v: Json) =>
  onlyKeys(v, ['jsonrpc', 'id', 'error']) &&
  v.jsonrpc === '2.0' &&
  (v.id === undefined || isId(v.id)) &&
  isObject(v.error) &&
  Number.isSafeInteger(v.error.code) &&
  typeof v.error.message === 'string';
const isMessage = (v: unknown) =>
  isObject(v) && (isRequest(v) || isNotification(v) || isResult(v) || isError(v));

const metaOf = (params: unknown): Json | undefined =>
  isObject(params) && isObject(params._meta) ? params._meta : undefined;

/** The message claims the per-request envelope (the claim key is present, whatever its value). */
export const claimsEnvelope = (params: unknown): boolean => {
  const meta = metaOf(params);
  return meta !== undefined && PROTOCOL_VERSION_META_KEY in meta;
};

/** A well-formed envelope naming a modern version: only this turns an `initialize` modern. */
function validModernEnvelope(params: unknown): boolean {
  const meta = metaOf(params);
  if (meta === undefined) return false;
  const version = meta[PROTOCOL_VERSION_META_KEY];
  if (typeof version !== 'string' || !isModernVersion(version)) return false;
  if (!isObject(meta[CLIENT_CAPABILITIES_META_KEY])) return false;
  const info = meta[CLIENT_INFO_META_KEY];
  if (
    info !== undefined &&
    !(isObject(info) && typeof info.name === 'string' && typeof info.version === 'string')
  )
    return false;
  const level = meta[LOG_LEVEL_META_KEY];
  if (level !== undefined && !(typeof level === 'string' && LOG_LEVELS.has(level))) return false;
  return !('progressToken' in meta) || isId(meta.progressToken);
}

/** RFC 9110 optional whitespace around a field value does not change it. */
const stripOws = (v: string) => v.replace(/^[ \t]+|[ \t]+$/g, '');

/** The era of one request to the MCP endpoint (module comment). */
export function classifyEra(facts: EraFacts): Era {
  if (facts.method.toUpperCase() !== 'POST' || facts.body === undefined) return LEGACY;
  const header = facts.protocolVersion === null ? undefined : stripOws(facts.protocolVersion);
  const headerModern = header !== undefined && isModernVersion(header);
  const body = facts.body;
  if (Array.isArray(body)) {
    if (body.length === 0) return modern('malformed');
    for (const element of body) {
      if (claimsEnvelope(isObject(element) ? element.params : undefined)) return modern('malformed');
      if (!isMessage(element)) return modern('malformed');
    }
    return LEGACY;
  }
  if (!isObject(body)) return modern('malformed');
  if (isResult(body) || isError(body)) return LEGACY;
  if (isRequest(body)) {
    if (body.method === 'initialize' && !validModernEnvelope(body.params))
      return headerModern ? modern('modern-header') : LEGACY;
    if (claimsEnvelope(body.params)) return modern('claim');
    return headerModern ? modern('modern-header') : LEGACY;
  }
  if (isNotification(body)) {
    if (claimsEnvelope(body.params)) return modern('claim');
    return headerModern ? modern('modern-header') : LEGACY;
  }
  return modern('malformed');
}

/** The 2026 `UnsupportedProtocolVersionError` (400, -32022) naming the versions this endpoint serves. */
export function unsupportedVersion(
  supported: readonly string[],
  requested: string | undefined,
): { readonly status: 400; readonly code: -32022; readonly message: string; readonly data: object } {
  return {
    status: 400,
    code: -32022,
    message:
      requested === undefined
        ? 'Unsupported protocol version: the request did not name a protocol version'
        : `Unsupported protocol version: ${requested}`,
    data: { supported: [...supported], ...(requested === undefined ? {} : { requested }) },
  };
}

/** The version a modern-classified request names (its claim, else its header), if any. */
export function requestedVersion(facts: EraFacts): string | undefined {
  const claimed = metaOf(isObject(facts.body) ? facts.body.params : undefined)?.[PROTOCOL_VERSION_META_KEY];
  if (typeof claimed === 'string') return claimed;
  return facts.protocolVersion === null ? undefined : stripOws(facts.protocolVersion);
}

/** Where a POST goes once its era is known. */
export type EraRoute =
  | { readonly kind: 'modern' }
  | { readonly kind: 'legacy' }
  /** A modern request to an endpoint without a modern server: the spec's -32022 naming `supported`. */
  | {
      readonly kind: 'unsupported';
      readonly status: 400;
      readonly body: {
        readonly jsonrpc: '2.0';
        readonly id: string | number | null;
        readonly error: { readonly code: number; readonly message: string; readonly data: object };
      };
    };

/**
 * Routes a POST by its era. A malformed body that only looks modern goes the legacy way when there is no
 * modern server (the 2025 admission then answers it as it always has); with one, the SDK answers it.
 */
export function routeByEra(facts: EraFacts, modernServed: boolean, supported: readonly string[]): EraRoute {
  const era = classifyEra(facts);
  if (era.era !== 'modern' || (era.reason === 'malformed' && !modernServed)) return { kind: 'legacy' };
  if (modernServed) return { kind: 'modern' };
  const e = unsupportedVersion(supported, requestedVersion(facts));
  const id = isObject(facts.body) ? facts.body.id : undefined;
  return {
    kind: 'unsupported',
    status: e.status,
    body: {
      jsonrpc: '2.0',
      id: typeof id === 'string' || typeof id === 'number' ? id : null,
      error: { code: e.code, message: e.message, data: e.data },
    },
  };
}

/** The methods the continuity extension sees first (src/server/modern/keyed-hook.ts). */
const KEYED_HOOK_METHODS = new Set(['tools/call', 'notifications/cancelled', CANCEL_METHOD]);

/** A name as `Mcp-Name` carries it: as it is when a header can, else in the spec's Base64 sentinel form. */
export function encodeMcpName(name: string): string {
  return /^[\x21-\x7e]+$/.test(name)
    ? name
    : `=?base64?${btoa(String.fromCharCode(...new TextEncoder().encode(name)))}?=`;
}

/** `Mcp-Name` in the spec's Base64 sentinel form (`=?base64?…?=`) decoded; undefined when it is invalid. */
export function decodeMcpName(value: string): string | undefined {
  const m = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(value);
  if (!m) return value.startsWith('=?base64?') ? undefined : value;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(
      Uint8Array.from(atob(m[1] ?? ''), (c) => c.charCodeAt(0)),
    );
  } catch {
    return undefined;
  }
}

/**
 * Whether a modern message goes to the keyed-requests hook before the SDK: a `tools/call` request or a
 * `notifications/cancelled`, whose standard headers agree with its body. The SDK checks those headers on
 * what it serves; a keyed call may be answered from the memo without reaching the SDK, so a call whose
 * headers disagree is left to the SDK, which answers -32020 (the gap the hook would otherwise open).
 */
export function handsToKeyed(body: unknown, headers: { get(name: string): string | null }): boolean {
  if (!isObject(body) || typeof body.method !== 'string' || !KEYED_HOOK_METHODS.has(body.method))
    return false;
  const isCall = body.method === 'tools/call';
  // The cancel (§13) is a request; sent without an id it is still the extension's, which answers -32602.
  const isRequestMethod = isCall || body.method === CANCEL_METHOD;
  const shapeOk = isCall
    ? isRequest(body)
    : isRequestMethod
      ? isRequest(body) || isNotification(body)
      : isNotification(body);
  if (!shapeOk) return false;
  const claimed = metaOf(body.params)?.[PROTOCOL_VERSION_META_KEY];
  const version = headers.get('mcp-protocol-version');
  const method = headers.get('mcp-method');
  if (typeof claimed !== 'string') return false;
  // The SDK requires the standard headers on requests only; on a notification, present ones must agree.
  if (!isRequestMethod)
    return (
      (version === null || stripOws(version) === claimed) &&
      (method === null || stripOws(method) === body.method)
    );
  if (version === null || stripOws(version) !== claimed) return false;
  if (method === null || stripOws(method) !== body.method) return false;
  // The cancel (§13) names no tool: `Mcp-Name` is the call's alone.
  if (!isCall) return true;
  const name = headers.get('mcp-name');
  const params = body.params as Json | undefined;
  return name !== null && typeof params?.name === 'string' && decodeMcpName(stripOws(name)) === params.name;
}

/**
 * Whether a modern request the keyed hook left alone (an unkeyed call: a client without the extension, or
 * a call it did not key) is served as an event stream rather than in `auto` mode: only a `tools/call`, and
 * only when keep-alive comments are on. A call runs for as long as its tool does and a JSON answer sends no
 * byte until then, so a balancer's idle timeout shorter than the tool cuts every attempt (a read-only lookup
 * re-issued on each cut never finishes); keep-alives on a stream keep it open. Without keep-alives a stream
 * gains nothing and costs a client that hangs on a cut stream (the official v2 client waits for its request
 * timeout), so the application's mode stands. Everything else is answered at once and keeps it too.
 */
export function streamsUnkeyedCall(body: unknown, keepAliveMs: number): boolean {
  return keepAliveMs > 0 && isObject(body) && body.method === 'tools/call' && isRequest(body);
}

/**
 * Whether the SDK's answer to a modern request may need the 2025 versions added (`withLegacyVersions`):
 * the answer to a `server/discover`, or any 400 (an unsupported version). The body is whatever the
 * client sent: anything but an object (`null` included) is no `server/discover`.
 */
export function listsVersions(body: unknown, status: number): boolean {
  const method =
    typeof body === 'object' && body !== null ? (body as { method?: unknown }).method : undefined;
  return method === 'server/discover' || status === 400;
}

/**
 * A `server/discover` result, or an `UnsupportedProtocolVersionError` (-32022), that lists `legacy` (the
 * 2025 versions the same endpoint serves through sessions) after the SDK's modern ones. The v2 SDK lists
 * only modern revisions there (it negotiates 2025 through `initialize`); the spec has both advertise the
 * versions the server supports, and this endpoint supports both eras. Anything else is returned unchanged.
 */
export function withLegacyVersions(message: unknown, legacy: readonly string[]): unknown {
  const add = (listed: unknown[]) => [...listed, ...legacy.filter((v) => !listed.includes(v))];
  if (!isObject(message)) return message;
  if (isObject(message.result) && Array.isArray(message.result.supportedVersions))
    return {
      ...message,
      result: { ...message.result, supportedVersions: add(message.result.supportedVersions) },
    };
  const error = message.error;
  if (isObject(error) && error.code === -32022 && isObject(error.data) && Array.isArray(error.data.supported))
    return { ...message, error: { ...error, data: { ...error.data, supported: add(error.data.supported) } } };
  return message;
}
