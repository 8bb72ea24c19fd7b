import http from 'node:http';
import { Readable } from 'node:stream';
import { writeNodeResponse } from '../../src/server/http.js';

type FetchHandler = (request: Request, info: { remoteAddress?: string }) => Promise<Response>;

/**
 * Serves a Web-standard `fetch` handler over Node http, as a platform would: what cannot become a Web
 * `Request` (a target that is no URL, a method undici forbids) is refused here with a plain 400, as the
 * platform refuses it before any handler runs. A handler that throws is recorded in `errors` (a test
 * asserts there are none), never turned into an answer.
 */
export function serveFetch(handler: FetchHandler, errors: unknown[]): http.Server {
  return http.createServer(async (req, res) => {
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    let request: Request;
    try {
      const url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`);
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) for (const item of v) headers.append(k, item);
        else if (v !== undefined) headers.set(k, v);
      }
      const method = req.method ?? 'GET';
      request = new Request(url, {
        method,
        headers,
        body: method === 'GET' || method === 'HEAD' ? undefined : (Readable.toWeb(req) as ReadableStream),
        duplex: 'half',
        signal: abort.signal,
      } as RequestInit);
    } catch {
      res.writeHead(400).end();
      return;
    }
    let response: Response;
    try {
      response = await handler(request, { remoteAddress: req.socket.remoteAddress });
    } catch (error) {
      errors.push(error);
      res.destroy();
      return;
    }
    // Written as the Node handler writes any response; the writing is not what these tests are about.
    await writeNodeResponse(response, res).catch(() => undefined);
  });
}
