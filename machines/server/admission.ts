import { JsonRpcCode } from '../codes.js';
import { isNotification, isRequest, isResponse, type JsonRpcMessage } from '../jsonrpc.js';

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
}

export interface AdmissionPolicy {
  /** Exact origins allowed (`https://app.example`). Default: loopback origins on a local bind, else same-origin. */
  readonly allowedOrigins?: readonly string[];
  /** Host header values allowed (`example.com:443`, or a bare host name for any port). Default: loopback names on a local bind. */
  readonly allowedHosts?: readonly string[];
  readonly maxBodyBytes: number;
}

export type Rejection = { readonly status: number; readonly code: number; readonly message: string };
export type Admission = { readonly ok: true } | ({ readonly ok: false } & Rejection);

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
const reject = (status: number, code: number, message: string): Admission => ({
  ok: false,
  status,
  code,
  message,
});

const hostName = (host: string): string =>
  host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : (host.split(':')[0] ?? host);

export function hostAllowed(host: string | null, policy: AdmissionPolicy, localBind: boolean): boolean {
  if (policy.allowedHosts) {
    if (host === null) return false;
    return policy.allowedHosts.includes(host) || policy.allowedHosts.includes(hostName(host));
  }
  if (!localBind) return true;
  return host !== null && LOOPBACK_NAMES.has(hostName(host));
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

/** Checks the request line and headers, before the body is parsed. */
export function admitHttp(facts: RequestFacts, policy: AdmissionPolicy): Admission {
  if (!hostAllowed(facts.host, policy, facts.localBind)) {
    return reject(
      403,
      JsonRpcCode.INVALID_REQUEST,
      `Forbidden: host ${facts.host ?? '(none)'} is not allowed`,
    );
  }
  if (!originAllowed(facts.origin, facts.host, policy, facts.localBind)) {
    return reject(403, JsonRpcCode.INVALID_REQUEST, `Forbidden: origin ${facts.origin} is not allowed`);
  }
  if (!['GET', 'POST', 'DELETE'].includes(facts.method)) {
    return reject(405, JsonRpcCode.INVALID_REQUEST, `Method ${facts.method} is not allowed`);
  }
  if (
    facts.protocolVersion !== null &&
    !(SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(facts.protocolVersion)
  ) {
    return reject(
      400,
      JsonRpcCode.INVALID_REQUEST,
      `Unsupported MCP-Protocol-Version ${facts.protocolVersion}; supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')}`,
    );
  }
  if (facts.method === 'POST') {
    if (!accepts(facts.accept, 'application/json') || !accepts(facts.accept, 'text/event-stream')) {
      return reject(
        406,
        JsonRpcCode.INVALID_REQUEST,
        'Not Acceptable: Accept must list application/json and text/event-stream',
      );
    }
    if (!facts.contentType?.toLowerCase().startsWith('application/json')) {
      return reject(
        415,
        JsonRpcCode.INVALID_REQUEST,
        'Unsupported Media Type: Content-Type must be application/json',
      );
    }
    if ((facts.bodyBytes ?? 0) > policy.maxBodyBytes) {
      return reject(
        413,
        JsonRpcCode.INVALID_REQUEST,
        `Payload Too Large: the limit is ${policy.maxBodyBytes} bytes`,
      );
    }
    return { ok: true };
  }
  if (facts.method === 'GET' && !accepts(facts.accept, 'text/event-stream')) {
    return reject(406, JsonRpcCode.INVALID_REQUEST, 'Not Acceptable: Accept must list text/event-stream');
  }
  if (facts.sessionId === null)
    return reject(400, JsonRpcCode.INVALID_REQUEST, 'Bad Request: Mcp-Session-Id header is required');
  return { ok: true };
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
  if (facts.stopping) return reject(503, JsonRpcCode.INVALID_REQUEST, 'The server is shutting down');
  if (facts.authRequired && !facts.authenticated)
    return reject(401, JsonRpcCode.INVALID_REQUEST, 'Unauthorized');
  return { ok: true };
}

export type PostedMessage =
  | { readonly kind: 'initialize'; readonly message: JsonRpcMessage }
  | { readonly kind: 'request' | 'notification' | 'response'; readonly message: JsonRpcMessage };

/** Classifies a POST body (already JSON-parsed; `undefined` when it was not JSON). */
export function admitBody(
  body: unknown,
  parsed: boolean,
  sessionId: string | null,
): PostedMessage | ({ readonly ok: false } & Rejection) {
  if (!parsed)
    return {
      ok: false,
      status: 400,
      code: JsonRpcCode.PARSE_ERROR,
      message: 'Parse error: the body is not JSON',
    };
  if (Array.isArray(body)) {
    return {
      ok: false,
      status: 400,
      code: JsonRpcCode.INVALID_REQUEST,
      message: 'Batches are not supported since 2025-06-18',
    };
  }
  if (typeof body !== 'object' || body === null || (body as { jsonrpc?: unknown }).jsonrpc !== '2.0') {
    return {
      ok: false,
      status: 400,
      code: JsonRpcCode.INVALID_REQUEST,
      message: 'Invalid Request: not a JSON-RPC 2.0 message',
    };
  }
  const message = body as JsonRpcMessage;
  const id = (body as { id?: unknown }).id;
  if ('id' in body && typeof id !== 'string' && typeof id !== 'number' && !isResponse(message)) {
    return {
      ok: false,
      status: 400,
      code: JsonRpcCode.INVALID_REQUEST,
      message: 'Invalid Request: id must be a string or a number',
    };
  }
  if (isRequest(message) && message.method === 'initialize') {
    if (sessionId !== null) {
      return {
        ok: false,
        status: 400,
        code: JsonRpcCode.INVALID_REQUEST,
        message: 'Bad Request: initialize must not carry Mcp-Session-Id',
      };
    }
    return { kind: 'initialize', message };
  }
  if (sessionId === null) {
    return {
      ok: false,
      status: 400,
      code: JsonRpcCode.INVALID_REQUEST,
      message: 'Bad Request: Mcp-Session-Id header is required',
    };
  }
  if (isRequest(message)) return { kind: 'request', message };
  if (isNotification(message)) return { kind: 'notification', message };
  if (isResponse(message)) return { kind: 'response', message };
  return {
    ok: false,
    status: 400,
    code: JsonRpcCode.INVALID_REQUEST,
    message: 'Invalid Request: not a request, notification or response',
  };
}
