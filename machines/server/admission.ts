import { JsonRpcCode } from '../codes.js';
import { isRequest, type JsonRpcMessage } from '../jsonrpc.js';
import { checkMessageShape, exceedsJsonDepth } from './message-shape.js';

/**
 * Which HTTP requests reach a session, and the status a bad one gets. Pure: the runtime extracts the
 * facts (headers, sizes, the parsed body) and relays the answer.
 *
 * @spec transports#security-warning (Origin → 403), transports#sending-messages-to-the-server (Accept,
 * 202), transports#protocol-version-header (400), transports#session-management (400 without a session id)
 */
export const SUPPORTED_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;

export interface RequestFacts {
  readonly method: string;
  readonly accept: string | null;
  readonly contentType: string | null;
  readonly origin: string | null;
  readonly host: string | null;
  readonly protocolVersion: string | null;
  readonly sessionId: string | null;
  /** Bytes of body read so far (POST); the runtime stops reading past the limit. */
  readonly bodyBytes?: number;
  /** The connection arrived on a loopback address: DNS-rebinding protection applies by default. */
  readonly localBind: boolean;
  /**
   * A POST's protocol version is checked once its era is known (machines/server/era.ts): a 2026-07-28
   * request is not refused as an unknown 2025 version. The handler then calls {@link admitProtocolVersion}
   * for legacy requests.
   */
  readonly versionDeferred?: boolean;
}

export interface AdmissionPolicy {
  /** Exact origins allowed (`https://app.example`). Default: loopback origins on a local bind, else same-origin. */
  readonly allowedOrigins?: readonly string[];
  /** Host header values allowed (`example.com:443`, or a bare host name for any port). Default: loopback names on a local bind. */
  readonly allowedHosts?: readonly string[];
  readonly maxBodyBytes: number;
}

export type Rejection = {
  readonly status: number;
  readonly code: number;
  readonly message: string;
  /** Why, in a word: the `reason` of the `server.rejected_requests` metric. */
  readonly reason?: string;
  /**
   * Not the client's doing (the server is stopping): answered, but not counted as a rejected request.
   * Decided here so the handler writes every refusal the same way.
   */
  readonly uncounted?: true;
};
export type Admission = { readonly ok: true } | ({ readonly ok: false } & Rejection);

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
const reject = (status: number, code: number, message: string, reason?: string): Admission => ({
  ok: false,
  status,
  code,
  message,
  reason,
});

/**
 * `uri-host [":" port]` (RFC 9110 §7.2), narrowed to what names a server: a bracketed IPv6 literal, or a
 * name of letters, digits, `.`, `-` and `_`; a port of at most five digits. Anything else (`[::1]evil`,
 * `127.0.0.1:abc`, a space) is not a Host.
 */
const HOST = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::([0-9]{1,5}))?$/;

/** The host name of a well-formed Host value (brackets kept for IPv6), or undefined when it is malformed. */
export function hostName(host: string): string | undefined {
  const match = HOST.exec(host);
  if (!match) return undefined;
  if (match[2] !== undefined && Number(match[2]) > 65_535) return undefined;
  return match[1];
}

export function hostAllowed(host: string | null, policy: AdmissionPolicy, localBind: boolean): boolean {
  const name = host === null ? undefined : hostName(host);
  if (policy.allowedHosts) {
    if (host === null || name === undefined) return false;
    return policy.allowedHosts.includes(host) || policy.allowedHosts.includes(name);
  }
  if (!localBind) return host === null || name !== undefined;
  return name !== undefined && LOOPBACK_NAMES.has(name.toLowerCase());
}

export function originAllowed(
  origin: string | null,
  host: string | null,
  policy: AdmissionPolicy,
  localBind: boolean,
): boolean {
  if (origin === null) return true; // Not a browser, or a same-origin navigation: nothing to check.
  if (policy.allowedOrigins) return policy.allowedOrigins.includes(origin);
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (localBind) return LOOPBACK_NAMES.has(url.hostname) || LOOPBACK_NAMES.has(`[${url.hostname}]`);
  return host !== null && url.host === host;
}

const accepts = (accept: string | null, type: string): boolean =>
  (accept ?? '').split(',').some((part) => {
    const t = part.split(';')[0]?.trim().toLowerCase();
    return t === type || t === '*/*' || t === `${type.split('/')[0]}/*`;
  });

/** The media type of a Content-Type value, without parameters (`; charset=utf-8`), lower case. */
export const mediaType = (contentType: string | null): string | undefined =>
  contentType?.split(';')[0]?.trim().toLowerCase();

/** Checks the request line and headers, before the body is parsed. */
export function admitHttp(facts: RequestFacts, policy: AdmissionPolicy): Admission {
  if (facts.host !== null && hostName(facts.host) === undefined) {
    return reject(400, JsonRpcCode.INVALID_REQUEST, 'Bad Request: malformed Host header', 'malformed_host');
  }
  if (!hostAllowed(facts.host, policy, facts.localBind)) {
    return reject(
      403,
      JsonRpcCode.INVALID_REQUEST,
      `Forbidden: host ${facts.host ?? '(none)'} is not allowed`,
      'host_not_allowed',
    );
  }
  if (!originAllowed(facts.origin, facts.host, policy, facts.localBind)) {
    return reject(
      403,
      JsonRpcCode.INVALID_REQUEST,
      `Forbidden: origin ${facts.origin} is not allowed`,
      'origin_not_allowed',
    );
  }
  if (!['GET', 'POST', 'DELETE'].includes(facts.method)) {
    return reject(
      405,
      JsonRpcCode.INVALID_REQUEST,
      `Method ${facts.method} is not allowed`,
      'method_not_allowed',
    );
  }
  if (!facts.versionDeferred) {
    const version = admitProtocolVersion(facts.protocolVersion);
    if (!version.ok) return version;
  }
  if (facts.method === 'POST') {
    if (!accepts(facts.accept, 'application/json') || !accepts(facts.accept, 'text/event-stream')) {
      return reject(
        406,
        JsonRpcCode.INVALID_REQUEST,
        'Not Acceptable: Accept must list application/json and text/event-stream',
        'not_acceptable',
      );
    }
    if (mediaType(facts.contentType) !== 'application/json') {
      return reject(
        415,
        JsonRpcCode.INVALID_REQUEST,
        'Unsupported Media Type: Content-Type must be application/json',
        'unsupported_media_type',
      );
    }
    if ((facts.bodyBytes ?? 0) > policy.maxBodyBytes) return payloadTooLarge(policy.maxBodyBytes);
    return { ok: true };
  }
  if (facts.method === 'GET' && !accepts(facts.accept, 'text/event-stream')) {
    return reject(
      406,
      JsonRpcCode.INVALID_REQUEST,
      'Not Acceptable: Accept must list text/event-stream',
      'not_acceptable',
    );
  }
  if (facts.sessionId === null)
    return reject(
      400,
      JsonRpcCode.INVALID_REQUEST,
      'Bad Request: Mcp-Session-Id header is required',
      'session_id_required',
    );
  return { ok: true };
}

/**
 * A body larger than `maxBodyBytes`: 413, whether its `Content-Length` said so (`admitHttp`) or reading it
 * found out (`admitBodyRead`). One answer for both.
 */
const payloadTooLarge = (maxBodyBytes: number): Admission =>
  reject(
    413,
    JsonRpcCode.INVALID_REQUEST,
    `Payload Too Large: the limit is ${maxBodyBytes} bytes`,
    'too_large',
  );

/** How reading a POST body ended, as the I/O shell reports it (src/server/incoming.ts). */
export type BodyRead =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'too-large' }
  /** The client went away, or the body's framing broke, before the body was whole. */
  | { readonly kind: 'aborted' };

/**
 * After the body was read: a body that broke off is 400 (nobody is left to read the answer, but it is
 * counted), one past the limit is 413 (the same answer as a `Content-Length` over it).
 */
export function admitBodyRead(
  read: BodyRead,
  policy: Pick<AdmissionPolicy, 'maxBodyBytes'>,
): { readonly ok: true; readonly text: string } | ({ readonly ok: false } & Rejection) {
  if (read.kind === 'text') return { ok: true, text: read.text };
  if (read.kind === 'too-large') return payloadTooLarge(policy.maxBodyBytes) as { ok: false } & Rejection;
  return {
    ok: false,
    status: 400,
    code: JsonRpcCode.INVALID_REQUEST,
    message: 'Bad Request: the body did not arrive whole',
    reason: 'aborted_body',
  };
}

/** Where a request target points: this endpoint, another path (a plain 404), or nowhere readable (400). */
export type TargetRoute =
  | { readonly kind: 'endpoint' }
  | { readonly kind: 'elsewhere'; readonly status: 404; readonly text: 'Not Found' }
  | ({ readonly kind: 'refused'; readonly ok: false } & Rejection);

/** The request target's path (null: not a URL) against the endpoint's `path`. */
export function routeTarget(pathname: string | null, path: string): TargetRoute {
  if (pathname === null) {
    return {
      kind: 'refused',
      ok: false,
      status: 400,
      code: JsonRpcCode.INVALID_REQUEST,
      message: 'Bad Request: the request target is not a URL',
      reason: 'malformed_target',
    };
  }
  return pathname === path ? { kind: 'endpoint' } : { kind: 'elsewhere', status: 404, text: 'Not Found' };
}

/** A 2025-era request's `MCP-Protocol-Version`: absent (2025-03-26) or one of ours. */
export function admitProtocolVersion(protocolVersion: string | null): Admission {
  if (
    protocolVersion === null ||
    (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(protocolVersion)
  )
    return { ok: true };
  return reject(
    400,
    JsonRpcCode.INVALID_REQUEST,
    `Unsupported MCP-Protocol-Version ${protocolVersion}; supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')}`,
    'unsupported_protocol_version',
  );
}

/**
 * After the headers: is this process accepting requests, and is the caller known? A server that is
 * stopping answers 503 (the client retries elsewhere or later); an unauthenticated caller gets 401.
 */
export function admitCaller(facts: {
  readonly stopping: boolean;
  readonly authRequired: boolean;
  readonly authenticated: boolean;
}): Admission {
  if (facts.stopping) {
    return {
      ok: false,
      status: 503,
      code: JsonRpcCode.INVALID_REQUEST,
      message: 'The server is shutting down',
      uncounted: true,
    };
  }
  if (facts.authRequired && !facts.authenticated)
    return reject(401, JsonRpcCode.INVALID_REQUEST, 'Unauthorized', 'unauthorized');
  return { ok: true };
}

export type PostedMessage =
  | { readonly kind: 'initialize'; readonly message: JsonRpcMessage }
  | { readonly kind: 'request' | 'notification' | 'response'; readonly message: JsonRpcMessage };

/** Why a POST body was refused: the `reason` of the `server.rejected_requests` metric. */
export const BodyRejection = {
  parseError: 'parse_error',
  tooDeep: 'too_deep',
  batch: 'batch',
  invalidMessage: 'invalid_message',
  idTooLong: 'id_too_long',
  sessionIdRequired: 'session_id_required',
  initializeWithSession: 'initialize_with_session',
} as const;
export type BodyRejection = (typeof BodyRejection)[keyof typeof BodyRejection];

export type BodyRefusal = { readonly ok: false; readonly reason: BodyRejection } & Rejection;

const refuseBody = (reason: BodyRejection, code: number, message: string): BodyRefusal => ({
  ok: false,
  reason,
  status: 400,
  code,
  message,
});

/** What a POST body may be: nesting depth and id length (`ServerLimits`). */
export interface BodyLimits {
  readonly maxJsonDepth: number;
  readonly maxRequestIdLength: number;
}

/**
 * Parses a POST body: too deeply nested (checked on the text, before anything recurses into it) or not
 * JSON is refused.
 */
export function parseBody(
  text: string,
  limits: Pick<BodyLimits, 'maxJsonDepth'>,
): { readonly ok: true; readonly body: unknown } | BodyRefusal {
  if (exceedsJsonDepth(text, limits.maxJsonDepth)) {
    return refuseBody(
      BodyRejection.tooDeep,
      JsonRpcCode.INVALID_REQUEST,
      `Invalid Request: JSON nested deeper than ${limits.maxJsonDepth}`,
    );
  }
  try {
    return { ok: true, body: JSON.parse(text) as unknown };
  } catch {
    return refuseBody(BodyRejection.parseError, JsonRpcCode.PARSE_ERROR, 'Parse error: the body is not JSON');
  }
}

/**
 * Classifies a POST body (already JSON-parsed; `parsed` false when it was not JSON). Every message that
 * passes has the shape the SDK accepts (machines/server/message-shape.ts), so none is dropped unanswered.
 */
export function admitBody(
  body: unknown,
  parsed: boolean,
  sessionId: string | null,
  limits: Pick<BodyLimits, 'maxRequestIdLength'> = { maxRequestIdLength: Number.POSITIVE_INFINITY },
): PostedMessage | BodyRefusal {
  if (!parsed) {
    return refuseBody(BodyRejection.parseError, JsonRpcCode.PARSE_ERROR, 'Parse error: the body is not JSON');
  }
  if (Array.isArray(body)) {
    return refuseBody(
      BodyRejection.batch,
      JsonRpcCode.INVALID_REQUEST,
      'Batches are not supported since 2025-06-18',
    );
  }
  const shape = checkMessageShape(body);
  if (!shape.ok) {
    return refuseBody(
      BodyRejection.invalidMessage,
      JsonRpcCode.INVALID_REQUEST,
      `Invalid Request: ${shape.problem}`,
    );
  }
  const message = body as JsonRpcMessage;
  const id = (body as { id?: unknown }).id;
  if (typeof id === 'string' && id.length > limits.maxRequestIdLength) {
    return refuseBody(
      BodyRejection.idTooLong,
      JsonRpcCode.INVALID_REQUEST,
      `Invalid Request: id longer than ${limits.maxRequestIdLength} characters`,
    );
  }
  if (isRequest(message) && message.method === 'initialize') {
    if (sessionId !== null) {
      return refuseBody(
        BodyRejection.initializeWithSession,
        JsonRpcCode.INVALID_REQUEST,
        'Bad Request: initialize must not carry Mcp-Session-Id',
      );
    }
    return { kind: 'initialize', message };
  }
  if (sessionId === null) {
    return refuseBody(
      BodyRejection.sessionIdRequired,
      JsonRpcCode.INVALID_REQUEST,
      'Bad Request: Mcp-Session-Id header is required',
    );
  }
  if (shape.kind === 'request') return { kind: 'request', message };
  if (shape.kind === 'notification') return { kind: 'notification', message };
  return { kind: 'response', message };
}

/**
 * A 2026-07-28 message's id, capped as a 2025 one is (`maxRequestIdLength`): the SDK echoes it on every
 * message of the response, and the keyed runtime and the listen log keep it with the request. Any body
 * whose `id` is a string longer than the bound is refused 400 before anything reads it further.
 */
export function admitModernId(
  body: unknown,
  limits: Pick<BodyLimits, 'maxRequestIdLength'>,
): { readonly ok: true } | BodyRefusal {
  const id =
    typeof body === 'object' && body !== null && !Array.isArray(body)
      ? (body as { id?: unknown }).id
      : undefined;
  if (typeof id === 'string' && id.length > limits.maxRequestIdLength) {
    return refuseBody(
      BodyRejection.idTooLong,
      JsonRpcCode.INVALID_REQUEST,
      `Invalid Request: id longer than ${limits.maxRequestIdLength} characters`,
    );
  }
  return { ok: true };
}
