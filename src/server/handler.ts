import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import { ADVERTISEMENT_HEADER, formatAdvertisement } from '../../machines/advertisement.js';
import { JsonRpcCode } from '../../machines/codes.js';
import type { JsonRpcRequest } from '../../machines/jsonrpc.js';
import { type AdmissionPolicy, admitBody, admitCaller, admitHttp } from '../../machines/server/admission.js';
import type { ServerAdvertisement } from '../../machines/validity.js';
import type { EventLog } from './event-log.js';
import { readLimited, toResponse, toWebRequest, writeNodeResponse } from './http.js';
import { MemoryEventLog } from './memory-event-log.js';
import { errorReply, type Reply } from './reply.js';
import { type McpServerLike, RuntimeSession, type SessionInfo } from './session.js';

/** Who is calling, as `authenticate` decides. Sessions are bound to the principal that created them. */
export interface Principal {
  readonly principal: string;
  /** Passed to the SDK server as `extra.authInfo`. */
  readonly authInfo?: AuthInfo;
}

export interface ContinuityServerOptions {
  /** One SDK `McpServer` (or `Server`) per session. */
  readonly createMcpServer: (session: SessionInfo) => McpServerLike | Promise<McpServerLike>;
  /** Default: `new MemoryEventLog()` (1000 events per stream, 10 minutes). */
  readonly eventLog?: EventLog;
  /** A session with nothing attached and nothing running expires after this long. Default 30 minutes. */
  readonly sessionIdleTtlMs?: number;
  /** A comment line on every open stream this often, so idle proxies keep long calls. Default 15 s; 0: off. */
  readonly heartbeatMs?: number;
  /** The `retry:` sent to clients. Default 1000 ms. */
  readonly retryMs?: number;
  /** Default: loopback origins when bound to loopback, else same-origin only. */
  readonly allowedOrigins?: readonly string[];
  /** Default: loopback host names when bound to loopback, else any. */
  readonly allowedHosts?: readonly string[];
  /** Largest POST body accepted. Default 4 MiB. */
  readonly maxBodyBytes?: number;
  /** Return the caller, or null to answer 401. Omitted: everyone is anonymous. */
  readonly authenticate?: (request: Request) => Principal | null | Promise<Principal | null>;
  /** The MCP endpoint's path. Default `/mcp`. */
  readonly path?: string;
  /** Errors that belong to no request (an SDK server failing to close, say). Default: console.error. */
  readonly onError?: (error: unknown) => void;
}

export interface ContinuityServer {
  /** For `http.createServer(continuity.nodeHandler)`. */
  readonly nodeHandler: (req: IncomingMessage, res: ServerResponse) => void;
  /** Web-standard handler: Request in, Response out. */
  readonly fetch: (request: Request) => Promise<Response>;
  /** Ends every stream: with a memory log sessions end (`event: close`); with a durable one clients resume later. */
  readonly close: () => Promise<void>;
  /** What this server promises clients (also sent in the `MCP-Continuity` header). */
  readonly advertisement: ServerAdvertisement;
  /** Live sessions. */
  readonly sessionCount: () => number;
}

const DEFAULTS = {
  sessionIdleTtlMs: 30 * 60_000,
  heartbeatMs: 15_000,
  retryMs: 1_000,
  maxBodyBytes: 4 * 1024 * 1024,
  path: '/mcp',
};

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

/** Creates an MCP Streamable HTTP endpoint whose sessions survive dropped connections. */
export function createContinuityServer(options: ContinuityServerOptions): ContinuityServer {
  const log: EventLog = options.eventLog ?? new MemoryEventLog();
  const idleTtlMs = options.sessionIdleTtlMs ?? DEFAULTS.sessionIdleTtlMs;
  const heartbeatMs = options.heartbeatMs ?? DEFAULTS.heartbeatMs;
  const retryMs = options.retryMs ?? DEFAULTS.retryMs;
  const path = options.path ?? DEFAULTS.path;
  const onError = options.onError ?? ((e: unknown) => console.error('mcp-continuity:', e));
  const policy: AdmissionPolicy = {
    allowedOrigins: options.allowedOrigins,
    allowedHosts: options.allowedHosts,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULTS.maxBodyBytes,
  };
  const advertisement: ServerAdvertisement = {
    retentionMs: log.policy.retentionMs,
    maxEventsPerStream: log.policy.maxEventsPerStream,
    idleTtlMs,
    heartbeatMs: heartbeatMs > 0 ? heartbeatMs : undefined,
    gapSignalling: true,
    duplicateRequestProtection: true,
  };
  const advertised = formatAdvertisement(advertisement);
  const sessions = new Map<string, RuntimeSession>();
  let closing = false;

  const headersFor = (id: string) => ({ 'Mcp-Session-Id': id, [ADVERTISEMENT_HEADER]: advertised });

  const sessionOptions = (id: string) => ({
    log,
    idleTtlMs,
    heartbeatMs,
    retryMs,
    advertisement,
    headers: headersFor(id),
    onEnded: (ended: string) => sessions.delete(ended),
    onError,
  });

  async function createSession(
    principal: Principal | null,
    initialize: JsonRpcRequest,
  ): Promise<RuntimeSession> {
    const id = randomBytes(16).toString('base64url');
    const session = new RuntimeSession({
      ...sessionOptions(id),
      id,
      epoch: randomBytes(6).toString('hex'),
      initialize,
      principal: principal?.principal,
    });
    sessions.set(id, session);
    await session.connect(await options.createMcpServer({ id, principal: principal?.principal }));
    return session;
  }

  const restoring = new Map<string, Promise<RuntimeSession | undefined>>();

  /** A session this process does not hold may live in a durable log (a restart, or another instance). */
  async function findSession(id: string | null): Promise<RuntimeSession | undefined> {
    if (id === null) return undefined;
    const live = sessions.get(id);
    if (live || !log.registry) return live;
    let pending = restoring.get(id);
    if (!pending) {
      pending = (async () => {
        const record = await log.registry?.load(id);
        if (!record) return undefined;
        const session = new RuntimeSession({
          ...sessionOptions(id),
          id,
          epoch: record.epoch,
          principal: record.principal,
          initialize: record.initialize,
          snapshot: record.snapshot,
        });
        sessions.set(id, session);
        await session.restore(await options.createMcpServer({ id, principal: record.principal }));
        return session;
      })().finally(() => restoring.delete(id));
      restoring.set(id, pending);
    }
    return pending;
  }

  async function handle(request: Request, localBind: boolean): Promise<Reply> {
    const h = request.headers;
    const sessionId = h.get('mcp-session-id');
    const admission = admitHttp(
      {
        method: request.method,
        accept: h.get('accept'),
        contentType: h.get('content-type'),
        origin: h.get('origin'),
        host: h.get('host') ?? new URL(request.url).host,
        protocolVersion: h.get('mcp-protocol-version'),
        sessionId,
        bodyBytes: Number(h.get('content-length') ?? 0),
        localBind,
      },
      policy,
    );
    if (!admission.ok) return errorReply(admission.status, admission.code, admission.message);
    const principal = options.authenticate && !closing ? await options.authenticate(request) : null;
    const caller = admitCaller({
      stopping: closing,
      authRequired: options.authenticate !== undefined,
      authenticated: principal !== null,
    });
    if (!caller.ok) return errorReply(caller.status, caller.code, caller.message);
    const extra: MessageExtraInfo = {
      authInfo: principal?.authInfo,
      requestInfo: { headers: Object.fromEntries(h.entries()) },
    };
    const who = principal?.principal;

    if (request.method === 'POST') {
      const text = await readLimited(request, policy.maxBodyBytes);
      if (text === undefined) {
        return errorReply(
          413,
          JsonRpcCode.INVALID_REQUEST,
          `Payload Too Large: the limit is ${policy.maxBodyBytes} bytes`,
        );
      }
      let body: unknown;
      let parsed = true;
      try {
        body = JSON.parse(text);
      } catch {
        parsed = false;
      }
      const posted = admitBody(body, parsed, sessionId);
      if ('ok' in posted) return errorReply(posted.status, posted.code, posted.message);
      if (posted.kind === 'initialize') {
        const session = await createSession(principal, posted.message as JsonRpcRequest);
        return session.request(posted.message as JsonRpcRequest, who, extra);
      }
      const session = await findSession(sessionId);
      if (!session) return errorReply(404, JsonRpcCode.SESSION_NOT_FOUND, 'Session not found');
      if (posted.kind === 'request') return session.request(posted.message as JsonRpcRequest, who, extra);
      return session.accept(posted.message, who, extra);
    }
    const session = await findSession(sessionId);
    if (!session) return errorReply(404, JsonRpcCode.SESSION_NOT_FOUND, 'Session not found');
    if (request.method === 'DELETE') return session.delete(who);
    const lastEventId = h.get('last-event-id');
    return lastEventId === null ? session.standalone(who) : session.resume(lastEventId, who);
  }

  async function fetchHandler(request: Request, localBind = false): Promise<Response> {
    if (new URL(request.url).pathname !== path) return new Response('Not Found', { status: 404 });
    try {
      return toResponse(await handle(request, localBind));
    } catch (error) {
      onError(error);
      return toResponse(errorReply(500, -32603, 'Internal error'));
    }
  }

  return {
    advertisement,
    sessionCount: () => sessions.size,
    fetch: (request) => fetchHandler(request),
    nodeHandler: (req, res) => {
      const localBind = LOOPBACK.test(req.socket.localAddress ?? '');
      const request = toWebRequest(req, `http://${req.headers.host ?? 'localhost'}`);
      void fetchHandler(request, localBind)
        .then((response) => writeNodeResponse(response, res))
        .catch((error) => {
          onError(error);
          if (!res.headersSent) res.writeHead(500);
          res.end();
        });
    },
    close: async () => {
      closing = true;
      for (const session of [...sessions.values()]) session.stop();
      await log.close();
    },
  };
}
