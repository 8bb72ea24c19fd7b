import http from 'node:http';

export interface PostedFrom {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** The whole body (the request ends when the server ends the response). */
  readonly text: string;
}

/**
 * POSTs `body` to `url` over a connection from `localAddress` (any 127.0.0.0/8 address on Linux): callers
 * from distinct addresses, for the per-address bounds. Bounded by `timeoutMs`.
 */
export function postFrom(
  url: URL,
  localAddress: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs = 20_000,
): Promise<PostedFrom> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', localAddress, headers, agent: false, timeout: timeoutMs },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
