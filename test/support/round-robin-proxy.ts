import http from 'node:http';
import { listenOnLoopback } from './listen.js';

/**
 * A load balancer without sticky sessions, for tests: every HTTP request (not connection) goes to the
 * next upstream in turn, so a client's POSTs, resumes and DELETE land on different instances. An
 * upstream that refuses the connection (a killed instance) is skipped, as a health-checking balancer
 * would; nothing was sent to it, so trying the next one is safe. Loopback only.
 */
export interface RoundRobinProxy {
  readonly url: string;
  /** How many requests each upstream was sent, by index. */
  readonly routed: readonly number[];
  /** Every request in order: which upstream took it. */
  readonly log: ReadonlyArray<{ method: string; upstream: number; lastEventId?: string }>;
  close(): Promise<void>;
}

export async function startRoundRobinProxy(upstreamPorts: readonly number[]): Promise<RoundRobinProxy> {
  let next = 0;
  const routed = upstreamPorts.map(() => 0);
  const log: Array<{ method: string; upstream: number; lastEventId?: string }> = [];
  const agent = new http.Agent({ keepAlive: false });

  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const forward = (attempt: number): void => {
      if (attempt >= upstreamPorts.length) {
        res.writeHead(502).end('no upstream');
        return;
      }
      const index = next++ % upstreamPorts.length;
      const upstream = http.request(
        {
          host: '127.0.0.1',
          port: upstreamPorts[index],
          method: req.method,
          path: req.url,
          headers: req.headers,
          agent,
        },
        (answer) => {
          routed[index] = (routed[index] ?? 0) + 1;
          const lastEventId = req.headers['last-event-id'];
          log.push({
            method: req.method ?? '',
            upstream: index,
            ...(typeof lastEventId === 'string' ? { lastEventId } : {}),
          });
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          // The instance died mid-response: the client sees its connection reset, as it would in production.
          answer.on('aborted', () => res.destroy());
          answer.on('error', () => res.destroy());
        },
      );
      upstream.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code === 'ECONNREFUSED' && !res.headersSent) forward(attempt + 1);
        else res.destroy();
      });
      res.on('close', () => upstream.destroy());
      upstream.end(body);
    };
    forward(0);
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    routed,
    log,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
