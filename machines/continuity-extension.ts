import { ContinuityErrorCode } from './codes.js';
/**
 * The wire names and limits of the continuity extension for MCP 2026-07-28, tabled once for the client
 * decision table, the server's keyed-request machine and the runtime. The document that another
 * implementation follows is `docs/continuity-extension.md`; every name here appears there.
 *
 * @spec 2026-07-28 changelog, minor change 1 (`extensions` in capabilities) and 12 (error code policy)
 */

/**
 * The extension identifier: the key in `capabilities.extensions` of `server/discover` and of a request's
 * `io.modelcontextprotocol/clientCapabilities`. The prefix's second label is `github`, so it does not
 * fall in the space MCP reserves (a second label `modelcontextprotocol` or `mcp`).
 */
export const CONTINUITY_EXTENSION = 'io.github.mcp-continuity/continuity';

/** `_meta` keys a keyed request carries (same prefix as the extension, per the `_meta` key format). */
export const ContinuityMeta = {
  /** The idempotency key: one per logical call, the same on every re-issue of it. */
  idempotencyKey: 'io.github.mcp-continuity/idempotencyKey',
  /**
   * Present on a re-issue only: the SSE id of the last event the client received for this key, or `null`
   * when it received none. Its presence is what tells a re-issue from a first attempt.
   */
  lastEventId: 'io.github.mcp-continuity/lastEventId',
} as const;

// The extension's error codes are tabled with every other code of the project (codes.ts).
export { ContinuityErrorCode } from './codes.js';

/** The HTTP status each extension error is sent with, so intermediaries see the same story as the body. */
export const CONTINUITY_ERROR_STATUS: Readonly<Record<ContinuityErrorCode, number>> = {
  [ContinuityErrorCode.KEY_REUSED]: 409,
  [ContinuityErrorCode.EVENTS_EVICTED]: 410,
  [ContinuityErrorCode.OUTCOME_UNKNOWN]: 200,
  [ContinuityErrorCode.CANCELLED]: 200,
};

/** The parameters a server advertises as the value of `capabilities.extensions[CONTINUITY_EXTENSION]`. */
export interface ContinuitySettings {
  /** How long a finished keyed request's outcome is remembered after it finished. Never shorter while running. */
  readonly memoWindowMs: number;
  /** How long each keyed request's events are retained for a re-issue to resume after. */
  readonly eventRetentionMs: number;
  /** At most this many events are retained per keyed request; the oldest go first. */
  readonly maxEventsPerRequest: number;
  /** Longest idempotency key accepted, in characters. */
  readonly maxKeyLength: number;
}

export const DEFAULT_CONTINUITY_SETTINGS: ContinuitySettings = {
  memoWindowMs: 86_400_000,
  eventRetentionMs: 600_000,
  maxEventsPerRequest: 1000,
  maxKeyLength: 255,
};

/**
 * Reads the settings from a `server/discover` result's `capabilities`. Absent or malformed → `undefined`:
 * a client that cannot read the window must not rely on it, so it behaves as without the extension.
 */
export function parseContinuitySettings(capabilities: unknown): ContinuitySettings | undefined {
  const extensions = field(capabilities, 'extensions');
  const raw = field(extensions, CONTINUITY_EXTENSION);
  if (typeof raw !== 'object' || raw === null) return undefined;
  const positive = (k: keyof ContinuitySettings) => {
    const v = (raw as Record<string, unknown>)[k];
    return typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined;
  };
  const memoWindowMs = positive('memoWindowMs');
  const eventRetentionMs = positive('eventRetentionMs');
  const maxEventsPerRequest = positive('maxEventsPerRequest');
  const maxKeyLength = positive('maxKeyLength');
  if (!memoWindowMs || !eventRetentionMs || !maxEventsPerRequest || !maxKeyLength) return undefined;
  // A client's keys (a UUID is 36 characters) must fit; a smaller limit is a misconfiguration.
  if (maxKeyLength < MIN_MAX_KEY_LENGTH) return undefined;
  return { memoWindowMs, eventRetentionMs, maxEventsPerRequest, maxKeyLength };
}

/** The capabilities fragment a server puts in its `server/discover` result. */
export function continuityCapability(settings: ContinuitySettings): { extensions: Record<string, object> } {
  return { extensions: { [CONTINUITY_EXTENSION]: { ...settings } } };
}

/** The smallest `maxKeyLength` a server may advertise. */
export const MIN_MAX_KEY_LENGTH = 64;

/**
 * The extension's explicit cancel of a keyed request (§13): a JSON-RPC request on the 2026-07-28 HTTP
 * transport, where `notifications/cancelled` is for stdio only (closing a stream is the HTTP cancel, and
 * the extension makes that a transport fact for keyed requests). Prefixed like the `_meta` keys: outside
 * the method names MCP reserves.
 */
export const CANCEL_METHOD = 'io.github.mcp-continuity/cancel';

/** Methods the extension applies to (version 1): on any other the key is ignored and the request is unkeyed. */
export const KEYED_METHODS: ReadonlySet<string> = new Set(['tools/call']);

export type KeyReading =
  | { readonly kind: 'unkeyed' }
  | { readonly kind: 'keyed'; readonly key: string; readonly reissue: boolean; readonly lastEventId?: string }
  /** Answered with -32602 (Invalid params): the request is not run. */
  | { readonly kind: 'invalid'; readonly why: string };

/** Visible ASCII (0x21-0x7E): safe in logs and headers, and never two spellings of one key. */
const KEY_CHARS = /^[\x21-\x7e]+$/;

/**
 * Reads the extension's `_meta` keys of a request. Pure; `maxKeyLength` is the advertised limit. `method`,
 * when given, limits keying to `KEYED_METHODS` (a `notifications/cancelled` is read without it).
 */
export function readContinuityMeta(params: unknown, maxKeyLength: number, method?: string): KeyReading {
  if (method !== undefined && !KEYED_METHODS.has(method)) return { kind: 'unkeyed' };
  const meta = field(params, '_meta');
  const key = field(meta, ContinuityMeta.idempotencyKey);
  const hasLast = typeof meta === 'object' && meta !== null && ContinuityMeta.lastEventId in meta;
  if (key === undefined) {
    return hasLast ? { kind: 'invalid', why: 'lastEventId without an idempotency key' } : { kind: 'unkeyed' };
  }
  const problem = keyProblem(key, maxKeyLength);
  if (problem !== undefined || typeof key !== 'string') return { kind: 'invalid', why: problem ?? '' };
  if (!hasLast) return { kind: 'keyed', key, reissue: false };
  const last = field(meta, ContinuityMeta.lastEventId);
  if (last === null) return { kind: 'keyed', key, reissue: true };
  if (typeof last !== 'string' || last.length === 0)
    return { kind: 'invalid', why: 'lastEventId is not a string' };
  return { kind: 'keyed', key, reissue: true, lastEventId: last };
}

/** Why `key` is not a well-formed idempotency key (§3), or undefined when it is one. */
function keyProblem(key: unknown, maxKeyLength: number): string | undefined {
  if (typeof key !== 'string' || key.length === 0) return 'key is not a string';
  if (key.length > maxKeyLength) return `key longer than ${maxKeyLength}`;
  if (!KEY_CHARS.test(key)) return 'key has characters outside 0x21-0x7E';
  return undefined;
}

/** The key a `CANCEL_METHOD` request names in `params.idempotencyKey` (§13), checked as a call's key is. */
export function readCancelKey(
  params: unknown,
  maxKeyLength: number,
): { readonly kind: 'key'; readonly key: string } | { readonly kind: 'invalid'; readonly why: string } {
  const key = field(params, 'idempotencyKey');
  const problem = keyProblem(key, maxKeyLength);
  return problem === undefined ? { kind: 'key', key: key as string } : { kind: 'invalid', why: problem };
}

/**
 * Where a key is remembered: scoped by the authenticated principal, so one principal can neither read nor
 * block another's key. Length-prefixed, so no (principal, key) pair spells another.
 */
export function memoKey(principal: string, key: string): string {
  return `${principal.length}:${principal}|${key}`;
}

/**
 * What "the same request" means for a key: the method and the params without `_meta` (which carries the
 * key itself, the last event id, trace context...), as canonical JSON with sorted keys (RFC 8785 for the
 * values JSON-RPC carries). Two re-issues of one call give the same string; any change of tool name or
 * argument gives another.
 */
export function requestFingerprint(method: string, params: unknown): string {
  const rest =
    typeof params === 'object' && params !== null && !Array.isArray(params)
      ? Object.fromEntries(Object.entries(params).filter(([k]) => k !== '_meta'))
      : params;
  return canonicalJson([method, rest ?? null]);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function field(o: unknown, k: string): unknown {
  return typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined;
}

/**
 * `_meta` keys of the extension's `subscriptions/listen` part (docs/continuity-extension.md §12). Positions
 * travel in `_meta`, never as SSE ids, so 2025-era code never tries a `Last-Event-ID` resumption with them.
 */
export const ListenMeta = {
  /** On the acknowledgement and every change notification: that message's position in the change log. */
  position: 'io.github.mcp-continuity/position',
  /** On a re-opened listen request: the last position the client received on the stream it re-opens. */
  lastPosition: 'io.github.mcp-continuity/lastPosition',
  /** On the acknowledgement of a re-open: `{ count, relist }`, only when the server can vouch for it. */
  missed: 'io.github.mcp-continuity/missed',
} as const;

/** Longest position accepted back from a client: an epoch and a sequence number are far shorter. */
export const MAX_POSITION_LENGTH = 64;

/** The `_meta` key of a 2026-07-28 request's client capabilities (changelog, major change 2). */
export const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities';

/** A request's `_meta` declares the extension in its client capabilities. */
export function declaresContinuity(params: unknown): boolean {
  const caps = field(field(params, '_meta'), CLIENT_CAPABILITIES_META_KEY);
  const value = field(field(caps, 'extensions'), CONTINUITY_EXTENSION);
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Client capabilities with the extension declared (an empty object as its value), the rest unchanged. */
export function withContinuityDeclared(capabilities: unknown): Record<string, unknown> {
  const caps =
    typeof capabilities === 'object' && capabilities !== null && !Array.isArray(capabilities)
      ? (capabilities as Record<string, unknown>)
      : {};
  const extensions = field(caps, 'extensions');
  const others =
    typeof extensions === 'object' && extensions !== null && !Array.isArray(extensions) ? extensions : {};
  return { ...caps, extensions: { ...others, [CONTINUITY_EXTENSION]: {} } };
}

/** What a listen acknowledgement's `missed` says: exactly `count` accepted changes, of these list types. */
export interface ListenMissedReport {
  readonly count: number;
  /** `tools`, `prompts`, `resources`, `resource:<uri>`: each at most once, empty exactly when `count` is 0. */
  readonly relist: readonly string[];
}

/** Reads `missed` off an acknowledgement's `_meta`; anything malformed is `undefined` (not vouched for). */
export function readListenMissed(meta: unknown): ListenMissedReport | undefined {
  const raw = field(meta, ListenMeta.missed);
  const count = field(raw, 'count');
  const relist = field(raw, 'relist');
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) return undefined;
  if (!Array.isArray(relist) || !relist.every((r) => typeof r === 'string')) return undefined;
  if (new Set(relist).size !== relist.length || (count === 0) !== (relist.length === 0)) return undefined;
  return { count, relist: relist as string[] };
}
