import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import { loadOptional } from '../optional-peer.js';
import { type HubLimits, InspectionHub } from './hub.js';
import { PAGE_HTML, PAGE_SCRIPT, PAGE_STYLE } from './page/index.js';
import type { PageMessage } from './wire.js';

export interface InspectorServerOptions {
  /** Default 0: an ephemeral port (read it from `url`). The CLI's default is 4477. */
  readonly port?: number;
  /** Default 127.0.0.1. On a loopback address only loopback host names are served (DNS rebinding). */
  readonly host?: string;
  /** Largest feed message accepted; a larger one closes that connection. Default 4 MiB. */
  readonly maxMessageBytes?: number;
  /** How much the server remembers for pages that open later. */
  readonly limits?: Partial<HubLimits>;
  /**
   * A recorded trace instead of live feeds (`mcp-continuity replay <trace> --open`): the page shows a time
   * scrubber over its stops and asks for the machines as of the stop chosen.
   */
  readonly scrubber?: ScrubSource;
}

/** What the scrubber steps through: `scrubTrace` and `pageAsOf` (src/trace/scrub.ts) over a trace. */
export interface ScrubSource {
  /** The instants the page's slider stops at, oldest first. */
  readonly stops: readonly { readonly t: number; readonly label: string }[];
  /** Everything a page must be told to show the machines as of stop `stop`, starting with a reset. */
  pageAt(stop: number): PageMessage[];
  /** Shown beside the slider: the replay's regression check. */
  readonly note?: string;
}

export interface InspectorServer {
  /** The page: `http://127.0.0.1:<port>/`. */
  readonly url: string;
  /** Where feeds connect: `ws://127.0.0.1:<port>/feed` (`createInspectorFeed`, or @statelyai/inspect's `createWebSocketInspector`). */
  readonly feedUrl: string;
  /** Pages connected now. */
  viewers(): number;
  /** True once a page is connected; false if none came within `timeoutMs`. */
  waitForViewer(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/** A page that stops reading is cut off rather than buffered without bound; it reconnects and replays. */
const MAX_VIEWER_BACKLOG = 8 * 1024 * 1024;
const MAX_BATCH = 10_000;
const LOOPBACK_HOST = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?$/i;
const LOOPBACK_BIND = /^(127\.|::1$|localhost$)/;

/**
 * `mcp-continuity inspect`: serves the inspector page (bundled, no CDN) and a WebSocket hub. Feeds send
 * inspection events to `/feed`; pages listen on `/live`, get a replay of what is known, then every change.
 * A page also relays what @statelyai/inspect's browser inspector posts to its window.
 *
 * Needs the `ws` package (an optional peer dependency); rejects with a `MissingPeerError` naming it otherwise.
 */
export async function startInspectorServer(options: InspectorServerOptions = {}): Promise<InspectorServer> {
  const host = options.host ?? '127.0.0.1';
  // `ws` is an optional peer dependency of the package; a missing one is a MissingPeerError naming it.
  const { WebSocketServer } = await loadOptional(() => import('ws'));
  const hub = new InspectionHub(options.limits);
  const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxMessageBytes ?? 4 * 1024 * 1024 });
  const viewers = new Set<WebSocket>();
  const waiting = new Set<() => void>();
  const checkHost = LOOPBACK_BIND.test(host);
  const hostAllowed = (value: string | undefined) =>
    !checkHost || (value !== undefined && LOOPBACK_HOST.test(value));

  const broadcast = (messages: PageMessage[]) => {
    if (messages.length === 0 || viewers.size === 0) return;
    const text = JSON.stringify(messages);
    for (const viewer of viewers) {
      if (viewer.bufferedAmount > MAX_VIEWER_BACKLOG) viewer.terminate();
      else if (viewer.readyState === 1) viewer.send(text);
    }
  };

  const server = http.createServer((req, res) => serve(req, res));

  /** Path → content type and body. The page's parts are fixed strings; only state.json is computed. */
  const routes: Record<string, { type: string; body: (url: URL) => string; page?: true }> = {
    '/': { type: 'text/html; charset=utf-8', body: () => PAGE_HTML, page: true },
    '/index.html': { type: 'text/html; charset=utf-8', body: () => PAGE_HTML, page: true },
    '/inspector.js': { type: 'text/javascript; charset=utf-8', body: () => PAGE_SCRIPT },
    '/inspector.css': { type: 'text/css; charset=utf-8', body: () => PAGE_STYLE },
    '/state.json': { type: 'application/json', body: () => JSON.stringify(hub.replay()) },
    // Browsers ask for it; an empty icon keeps their console free of a 404.
    '/favicon.ico': { type: 'image/x-icon', body: () => '' },
  };

  // A trace's scrubber: its stops, and the page as of one (`/scrub/at?stop=N`).
  const scrubber = options.scrubber;
  if (scrubber) {
    routes['/scrub.json'] = {
      type: 'application/json',
      body: () => JSON.stringify({ stops: scrubber.stops, note: scrubber.note ?? '' }),
    };
    routes['/scrub/at'] = {
      type: 'application/json',
      body: (url) => JSON.stringify(scrubber.pageAt(Math.floor(Number(url.searchParams.get('stop')) || 0))),
    };
  }

  function serve(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://inspector');
    const route = routes[url.pathname];
    if (!hostAllowed(req.headers.host)) plain(res, 403, 'Forbidden: unexpected Host');
    else if (req.method !== 'GET' && req.method !== 'HEAD') plain(res, 405, 'Method Not Allowed');
    else if (!route) plain(res, 404, 'Not Found');
    else {
      res.writeHead(200, {
        'Content-Type': route.type,
        'Cache-Control': 'no-store',
        'X-Content-Type-Options': 'nosniff',
        ...(route.page ? { 'Content-Security-Policy': contentPolicy(req.headers.host) } : {}),
      });
      res.end(req.method === 'HEAD' ? undefined : route.body(url));
    }
  }

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = new URL(req.url ?? '/', 'http://inspector').pathname;
    const role = path === '/live' ? 'viewer' : path === '/feed' || path === '/' ? 'feed' : undefined;
    const origin = req.headers.origin;
    // Pages read everything the machines saw: only our own page may. Feeds come from Node (no Origin) or
    // from an app on this machine (@statelyai/inspect in a local dev server).
    const originOk =
      role === 'viewer'
        ? origin === `http://${req.headers.host}`
        : origin === undefined || LOOPBACK_HOST.test(new URL(origin, 'http://x').host);
    if (!role || !hostAllowed(req.headers.host) || !originOk) {
      socket.end(
        `HTTP/1.1 ${role ? 403 : 404} ${role ? 'Forbidden' : 'Not Found'}\r\nConnection: close\r\n\r\n`,
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => (role === 'viewer' ? viewer(ws) : feed(ws, 'feed')));
  });

  function feed(ws: WebSocket, name: string): void {
    const opened = hub.openFeed(name);
    broadcast(opened.messages);
    ws.on('message', (data, isBinary) => {
      const batch = parse(data, isBinary);
      if (batch === undefined) return ws.close(1007, 'expected JSON inspection events');
      if (batch.length > MAX_BATCH) return ws.close(1009, 'batch too large');
      broadcast(ingest(opened.feed, batch));
    });
    ws.on('error', () => undefined);
    ws.on('close', () => broadcast(hub.closeFeed(opened.feed)));
  }

  function viewer(ws: WebSocket): void {
    viewers.add(ws);
    ws.send(JSON.stringify(hub.replay()));
    for (const resolve of waiting) resolve();
    waiting.clear();
    let relay: string | undefined;
    // What @statelyai/inspect's browser inspector posts to the page, relayed here. Anything else is ignored.
    ws.on('message', (data, isBinary) => {
      const batch = parse(data, isBinary)?.filter((m) =>
        /^@xstate\./.test(String((m as { type?: unknown })?.type)),
      );
      if (!batch || batch.length === 0 || batch.length > MAX_BATCH) return;
      if (relay === undefined) {
        const opened = hub.openFeed('browser inspector');
        relay = opened.feed;
        broadcast(opened.messages);
      }
      broadcast(ingest(relay, batch));
    });
    ws.on('error', () => undefined);
    ws.on('close', () => {
      viewers.delete(ws);
      if (relay !== undefined) broadcast(hub.closeFeed(relay));
    });
  }

  function ingest(feedId: string, batch: unknown[]): PageMessage[] {
    const out: PageMessage[] = [];
    for (const message of batch) {
      try {
        out.push(...hub.ingest(feedId, message));
      } catch {
        // A message the hub cannot read is dropped; the rest of the batch still counts.
      }
    }
    return out;
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const authority = `${host.includes(':') ? `[${host}]` : host}:${port}`;

  return {
    url: `http://${authority}/`,
    feedUrl: `ws://${authority}/feed`,
    viewers: () => viewers.size,
    waitForViewer: (timeoutMs) => {
      if (viewers.size > 0) return Promise.resolve(true);
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          resolve(true);
        };
        const timer = setTimeout(() => {
          waiting.delete(done);
          resolve(false);
        }, timeoutMs);
        waiting.add(done);
      });
    },
    close: async () => {
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function parse(data: RawData, isBinary: boolean): unknown[] | undefined {
  if (isBinary) return undefined;
  const text = Array.isArray(data)
    ? Buffer.concat(data).toString('utf8')
    : Buffer.from(data as Buffer).toString('utf8');
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed : [parsed];
  } catch {
    return undefined;
  }
}

/** The page loads only its own script and style, and talks only to this server. */
function contentPolicy(host: string | undefined): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `connect-src 'self' ws://${host}`,
    "img-src 'self' data:",
    "base-uri 'none'",
  ].join('; ');
}

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(text);
}
