import type { IncomingMessage } from 'node:http';
import { readLimited, toWebRequest } from './http.js';

/**
 * What the handler reads of an HTTP request, from a Web `Request` (the `fetch` handler) or straight from a
 * Node `IncomingMessage`. The Node path used to build a Web `Request` for every request (a `Headers`
 * object, an undici `Request`, a web stream over the body): ~120 µs per tool call of our server's CPU in
 * row 2 of docs/benchmarks.md. Now it builds one only for `authenticate`, which is given a `Request`.
 */
export interface IncomingCall {
  readonly method: string;
  /** The path, without the query. */
  readonly pathname: string;
  /** The Host header, or the host of the request's URL. */
  readonly host: string;
  header(name: string): string | null;
  /** Every header, lower-case names (the SDK's `requestInfo.headers`). */
  headers(): Record<string, string>;
  /** The body as text, or undefined when it is larger than `limit` bytes (the rest is not kept). */
  text(limit: number): Promise<string | undefined>;
  /** The request as a Web `Request` (built on first use). */
  request(): Request;
}

export function fromWebRequest(request: Request): IncomingCall {
  let url: URL | undefined;
  const parsed = () => {
    url ??= new URL(request.url);
    return url;
  };
  return {
    method: request.method,
    get pathname() {
      return parsed().pathname;
    },
    get host() {
      return request.headers.get('host') ?? parsed().host;
    },
    header: (name) => request.headers.get(name),
    headers: () => Object.fromEntries(request.headers.entries()),
    text: (limit) => readLimited(request, limit),
    request: () => request,
  };
}

export function fromNodeRequest(req: IncomingMessage): IncomingCall {
  let request: Request | undefined;
  // As a Web Request would have it: the Host header, else the host of an absolute-form target.
  const host = req.headers.host ?? new URL(req.url ?? '/', 'http://localhost').host;
  return {
    method: req.method ?? 'GET',
    // Parsed as a URL would be (dot segments, `//`), not compared as the raw request target.
    get pathname() {
      return new URL(req.url ?? '/', 'http://localhost').pathname;
    },
    host,
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
      request ??= toWebRequest(req, `http://${host}`);
      return request;
    },
  };
}

/** Reads a Node request body up to `limit` bytes; past it, the rest is discarded and undefined returned. */
function readNodeBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.byteLength;
      if (size > limit) {
        // Answered at once (413); what is still coming is read and dropped, so the connection stays usable.
        tooLarge = true;
        chunks.length = 0;
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
