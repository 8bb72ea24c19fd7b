import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BodyRead } from '../../machines/server/admission.js';
import { readLimited, toWebRequest } from './http.js';

/**
 * What the handler reads of an HTTP request, from a Web `Request` (the `fetch` handler) or straight from a
 * Node `IncomingMessage`. The Node path used to build a Web `Request` for every request (a `Headers`
 * object, an undici `Request`, a web stream over the body): ~120 µs per tool call of our server's CPU in
 * row 2 of docs/benchmarks.md. Now it builds one only for `authenticate`, which is given a `Request`.
 *
 * Nothing here throws on what a client sent: a target that is not a URL has no `pathname`, a body that
 * never completes is `aborted`.
 */
export interface IncomingCall {
  readonly method: string;
  /** The path, without the query; null when the request target cannot be read as a URL. */
  readonly pathname: string | null;
  /** The Host header, else the host of an absolute-form target; null when there is neither. */
  readonly host: string | null;
  /** The peer's address, when the HTTP stack tells (sessions per remote address without `authenticate`). */
  readonly remoteAddress: string | undefined;
  header(name: string): string | null;
  /** Every header, lower-case names (the SDK's `requestInfo.headers`). */
  headers(): Record<string, string>;
  /** The body as text, unless it is larger than `limit` bytes (the rest is not kept) or did not arrive whole. */
  text(limit: number): Promise<BodyRead>;
  /** The request as a Web `Request` (built on first use). */
  request(): Request;
  /**
   * Fires when the client goes away before its response has ended (a 2026-07-28 request is cancelled
   * then: the spec's close = cancel). Never fires for a response that ended normally.
   */
  readonly gone: AbortSignal;
}

/** How a body read ended: decided on in machines/server/admission.ts (`admitBodyRead`). */
export type { BodyRead } from '../../machines/server/admission.js';

export function fromWebRequest(request: Request, remoteAddress?: string): IncomingCall {
  const url = new URL(request.url);
  return {
    method: request.method,
    pathname: url.pathname,
    host: request.headers.get('host') ?? url.host,
    remoteAddress,
    header: (name) => request.headers.get(name),
    headers: () => Object.fromEntries(request.headers.entries()),
    text: (limit) => readLimited(request, limit),
    request: () => request,
    gone: request.signal,
  };
}

/** The request target as a URL against `base`, or undefined when it is not one. */
function targetUrl(target: string, base: string): URL | undefined {
  try {
    return new URL(target, base);
  } catch {
    return undefined;
  }
}

export function fromNodeRequest(req: IncomingMessage, res?: ServerResponse): IncomingCall {
  const gone = new AbortController();
  // 'close' also follows a response that ended normally; only one that did not finish means the client left.
  res?.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  let request: Request | undefined;
  const target = req.url ?? '/';
  // Parsed as a URL would be (dot segments, `//`), not compared as the raw request target.
  const url = targetUrl(target, 'http://localhost');
  // As a Web Request would have it: the Host header, else the host of an absolute-form target.
  const host = req.headers.host ?? url?.host ?? null;
  return {
    method: req.method ?? 'GET',
    pathname: url?.pathname ?? null,
    host,
    remoteAddress: req.socket.remoteAddress,
    header: (name) => {
      const value = req.headers[name];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(', ') : value;
    },
    headers: () => {
      const out: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
      }
      return out;
    },
    // Once `authenticate` had its Request, the body belongs to that Request's stream, which already
    // started reading it: reading `req` as well would miss what it took and never see the end.
    text: (limit) => (request ? readLimited(request, limit) : readNodeBody(req, limit)),
    request: () => {
      // Admission refused malformed Host values before this; a target that still does not make a URL
      // with it is read against localhost (only `authenticate` sees this URL).
      request ??= toWebRequest(
        req,
        (host === null ? undefined : targetUrl(target, `http://${host}`)) ??
          url ??
          new URL('http://localhost/'),
      );
      return request;
    },
    gone: gone.signal,
  };
}

/** Reads a Node request body up to `limit` bytes; past it, the rest is discarded. */
function readNodeBody(req: IncomingMessage, limit: number): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    let settled = false;
    const settle = (read: BodyRead) => {
      if (settled) return;
      settled = true;
      resolve(read);
    };
    req.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.byteLength;
      if (size > limit) {
        // Answered at once (413); what is still coming is read and dropped, so the connection stays usable.
        tooLarge = true;
        chunks.length = 0;
        settle({ kind: 'too-large' });
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () =>
      settle(
        tooLarge ? { kind: 'too-large' } : { kind: 'text', text: Buffer.concat(chunks).toString('utf8') },
      ),
    );
    req.on('error', () => settle({ kind: 'aborted' }));
    // Closed without 'end': the peer went away mid-body.
    req.on('close', () => settle({ kind: 'aborted' }));
  });
}
