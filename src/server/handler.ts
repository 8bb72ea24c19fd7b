import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import type { InspectionEvent, Observer } from 'xstate';
import { ADVERTISEMENT_HEADER, formatAdvertisement } from '../../machines/advertisement.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../machines/jsonrpc.js';
import {
  type AdmissionPolicy,
  admitBody,
  admitBodyRead,
  admitCaller,
  admitHttp,
  admitModernId,
  admitProtocolVersion,
  type PostedMessage,
  parseBody,
  type Rejection,
  routeTarget,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '../../machines/server/admission.js';
import { namesSession, routeCall, sessionUnavailable } from '../../machines/server/call-routing.js';
import { leaseRenewPeriodMs, sharedPollMs, sweepPeriodMs } from '../../machines/server/deadlines.js';
import { routeByEra } from '../../machines/server/era.js';
import { leaseRead } from '../../machines/server/instances.js';
import {
  admitNewSession,
  holderOf,
  type LimitRefusal,
  resolveLimits,
  type ServerLimits,
} from '../../machines/server/limits.js';
import { INTERNAL_ERROR, limitReached } from '../../machines/server/replies.js';
import { ownsSession } from '../../machines/server/session.machine.js';
import type { ServerAdvertisement } from '../../machines/validity.js';
import type { ContinuityMetrics } from '../metrics/continuity-metrics.js';
import { tracingSessionServer } from '../telemetry/session-server-traces.js';
import { type ContinuityTelemetry, globalTelemetry } from '../telemetry/telemetry.js';
import type { EventLog, SharedSessionStore } from './event-log.js';
import { type SseLimits, toResponse, writeNodeReply, writeNodeResponse } from './http.js';
import { fromNodeRequest, fromWebRequest, type IncomingCall } from './incoming.js';
import { MemoryEventLog } from './memory-event-log.js';
import {
  createModernEndpoint,
  type ModernEndpoint,
  type ModernInput,
  type ModernOptions,
} from './modern/endpoint.js';
import { errorReply, type Reply, replyWith, sessionNotFound } from './reply.js';
import {
  type McpServerLike,
  RuntimeSession,
  type RuntimeSessionOptions,
  type SessionInfo,
  SessionUnavailableError,
} from './session.js';
import { SessionOptions, type SessionOwnOptions, type SessionServerOptions } from './session-options.js';
import { WakePort } from './wake-port.js';

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
  /**
   * Several instances sharing a store (`RedisEventLog`): an instance that has not renewed its lease for
   * this long counts as dead, and the calls it was running end as outcome unknown (`instance_lost`).
   * Longer means fewer false alarms on a stalled process; shorter, faster answers after a crash.
   * Default 10 s.
   */
  readonly instanceLeaseMs?: number;
  /**
   * Shared store: a stream attached here whose events come from another instance is woken by the
   * store's change feed; it is also read this often, in case a report went missing. Default 1 s.
   */
  readonly sharedStorePollMs?: number;
  /** Errors that belong to no request (an SDK server failing to close, say). Default: console.error. */
  readonly onError?: (error: unknown) => void;
  /**
   * An XState inspector for every session's machine: any `@statelyai/inspect` inspector's `.inspect`, the
   * feed of `mcp-continuity inspect` (`createInspectorFeed`), or your own observer.
   */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** Records resumes, 410s, evictions, ended sessions and the retention margin (docs/operations.md, "Metrics"). */
  readonly metrics?: ContinuityMetrics;
  /**
   * Spans and duration metrics on OpenTelemetry's MCP conventions: one SERVER span per request of a 2025
   * session, and per 2026-07-28 request served without the keyed path, under the client's trace context
   * from `params._meta` (docs/operations.md, "Traces"). Keyed executions take `createKeyedRequests`' own.
   * Default: the OTel API's globals, read at the first session (no-ops without an SDK).
   */
  readonly telemetry?: ContinuityTelemetry;
  /**
   * Slow readers (docs/server.md, "Slow readers"). `paceBytes`: a tool awaiting its sends waits while its reader
   * is this far behind (default 1 MiB, `SSE_PACE_BYTES`). `maxBufferedBytes`: a reader this far behind
   * is cut and resumes from the log (default 16 MiB). `stallMs`: a paced reader whose backlog does not
   * shrink for this long has its response ended, releasing the tool (default 60 s).
   */
  readonly sse?: SseLimits;
  /**
   * Bounds on what clients may make this server hold (docs/operations.md, "Limits and hardening"). Each field is
   * optional; the defaults are `DEFAULT_SERVER_LIMITS`: 10,000 sessions, 1,000 per principal (per remote
   * address without `authenticate`), 100 running requests per session, request ids of 256 characters
   * (2025 and 2026-07-28), JSON nested 128 deep, `Retry-After: 5`; on 2026-07-28, 10,000 open
   * `subscriptions/listen` streams, 100 per principal (per address without `authenticate`).
   */
  readonly limits?: Partial<ServerLimits>;
  /**
   * Serve MCP 2026-07-28 on the same endpoint (docs/eras.md, "Two eras on one endpoint") with the official v2
   * `@modelcontextprotocol/server` (an optional peer, loaded on the first modern request). Omitted: a
   * 2026-07-28 request is answered 400 `UnsupportedProtocolVersionError` naming the 2025 versions served
   * here, and a negotiating v2 client falls back to a 2025 session.
   */
  readonly modern?: ModernOptions;
}

export interface ContinuityServer {
  /** For `http.createServer(continuity.nodeHandler)`. */
  readonly nodeHandler: (req: IncomingMessage, res: ServerResponse) => void;
  /**
   * Web-standard handler: Request in, Response out. `info.remoteAddress`, when the platform tells it,
   * is what `limits.maxSessionsPerPrincipal` counts by when there is no `authenticate`.
   */
  readonly fetch: (request: Request, info?: { readonly remoteAddress?: string }) => Promise<Response>;
  /** Ends every stream: with a memory log sessions end (`event: close`); with a durable one clients resume later. */
  readonly close: () => Promise<void>;
  /** What this server promises clients (also sent in the `MCP-Continuity` header). */
  readonly advertisement: ServerAdvertisement;
  /** Live sessions. */
  readonly sessionCount: () => number;
  /** Live sessions that are asleep: idle, their machine kept as a snapshot until a request wakes it. */
  readonly sleepingSessionCount: () => number;
  /**
   * 2026-07-28: tells every open `subscriptions/listen` stream that opted in (no-op before the first
   * modern request, when no stream can be open). 2025 sessions hear changes from their own SDK server.
   */
  readonly notifyModern: ModernEndpoint['notify'];
}

const DEFAULTS = {
  sessionIdleTtlMs: 30 * 60_000,
  heartbeatMs: 15_000,
  retryMs: 1_000,
  maxBodyBytes: 4 * 1024 * 1024,
  path: '/mcp',
  instanceLeaseMs: 10_000,
};

/** What differs between sessions, besides the id (the rest is the server's). */
const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;

/** Creates an MCP Streamable HTTP endpoint whose sessions survive dropped connections. */
export function createContinuityServer(options: ContinuityServerOptions): ContinuityServer {
  const onError = options.onError ?? ((e: unknown) => console.error('mcp-continuity:', e));
  /** This server's one timer: every deadline below is a wake-up asked of it (machines/server/deadlines.ts). */
  const wakes = new WakePort(onError);
  const log: EventLog = options.eventLog ?? new MemoryEventLog({ wakes });
  const idleTtlMs = options.sessionIdleTtlMs ?? DEFAULTS.sessionIdleTtlMs;
  const heartbeatMs = options.heartbeatMs ?? DEFAULTS.heartbeatMs;
  const retryMs = options.retryMs ?? DEFAULTS.retryMs;
  const path = options.path ?? DEFAULTS.path;
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
  const limits = resolveLimits(options.limits);
  const sessions = new Map<string, RuntimeSession>();
  /** Who holds each session (principal, or remote address) and how many each holder has: the per-principal bound. */
  const holders = new Map<string, string>();
  const held = new Map<string, number>();
  const hold = (id: string, holder: string) => {
    holders.set(id, holder);
    held.set(holder, (held.get(holder) ?? 0) + 1);
  };
  const release = (id: string) => {
    const holder = holders.get(id);
    if (holder === undefined) return;
    holders.delete(id);
    const n = (held.get(holder) ?? 1) - 1;
    if (n > 0) held.set(holder, n);
    else held.delete(holder);
  };
  let closing = false;
  const metrics = options.metrics?.server.observe(log);
  /** The 2026-07-28 side, loaded on the first modern request (a load failure is retried next time). */
  let modern: Promise<ModernEndpoint> | undefined;
  const modernEndpoint = (spec: ModernOptions) => {
    modern ??= createModernEndpoint(spec, {
      legacyVersions: SUPPORTED_PROTOCOL_VERSIONS,
      maxBodyBytes: policy.maxBodyBytes,
      heartbeatMs,
      onError,
      limits,
      limited: (reason, status) => metrics?.requestLimited(reason, status),
      telemetry: () => options.telemetry ?? globalTelemetry(),
      wakes,
    }).catch((error: unknown) => {
      modern = undefined;
      throw error;
    });
    return modern;
  };
  let loadedModern: ModernEndpoint | undefined;
  const notifyModern: ModernEndpoint['notify'] = {
    toolsChanged: () => loadedModern?.notify.toolsChanged(),
    promptsChanged: () => loadedModern?.notify.promptsChanged(),
    resourcesChanged: () => loadedModern?.notify.resourcesChanged(),
    resourceUpdated: (uri) => loadedModern?.notify.resourceUpdated(uri),
  };

  /** A session's SDK server, its requests traced (src/telemetry/session-server-traces.ts). */
  const traced = (server: McpServerLike, id: string): McpServerLike =>
    tracingSessionServer(server, options.telemetry ?? globalTelemetry(), id);

  const headersFor = (id: string) => ({ 'Mcp-Session-Id': id, [ADVERTISEMENT_HEADER]: advertised });

  // One sweep for every session: idle sessions go to sleep (their actor becomes a snapshot), and sleeping
  // ones whose TTL ran out are woken so their machine expires them.
  const sweepMs = sweepPeriodMs(idleTtlMs);
  const sweeper = wakes.every(sweepMs, (now) => {
    for (const session of sessions.values()) session.sweep(now, sweepMs);
  });

  const shared = log.shared;
  const leaseMs = options.instanceLeaseMs ?? DEFAULTS.instanceLeaseMs;
  const stopSharing = shared ? share(shared) : undefined;

  /**
   * With a shared store this instance keeps a lease, hears what the others append and end, keeps the
   * sessions busy here alive for the others, and answers for calls whose instance died.
   */
  function share(store: SharedSessionStore): () => Promise<void> {
    const renew = () => store.renewLease(leaseMs).catch(onError);
    void renew();
    const unwatch = store.watch((change) => {
      const session = sessions.get(change.sessionId);
      if (change.kind === 'appended') session?.wake(change.stream);
      else if (change.kind === 'inbound') session?.receiveForwarded(change.message);
      else session?.gone(change.reason);
    });
    const tick = async () => {
      await renew();
      const busy = [...sessions.values()].filter((s) => s.busyHere);
      if (busy.length > 0) await store.touch(busy.map((s) => s.id));
      const owners = busy.flatMap((s) => s.foreignOwners());
      if (owners.length === 0) return;
      // Only a trigger: a session whose attached streams changed since is judged on owners asked about,
      // and its reap reads the leases again for the streams it decides on.
      const read = leaseRead(owners, await store.alive(owners));
      for (const s of busy) if (s.ownerLost(read)) await s.reapAbandoned();
    };
    const timer = wakes.every(leaseRenewPeriodMs(leaseMs, idleTtlMs), () => void tick().catch(onError));
    return async () => {
      timer.cancel();
      unwatch();
      await store.dropLease().catch(onError);
    };
  }

  /** One for every session (a closure per session would be kept by each idle one). */
  const sessionEnded = (ended: string) => {
    sessions.delete(ended);
    release(ended);
  };
  /** What every session of this server shares in its options: one object for all of them. */
  const sessionServer: SessionServerOptions = {
    pollMs: sharedPollMs(shared !== undefined, options.sharedStorePollMs),
    wakes,
    log,
    idleTtlMs,
    heartbeatMs,
    retryMs,
    advertisement,
    onEnded: sessionEnded,
    inspect: options.inspect,
    onError,
    metrics,
    limits,
  };
  /** A session's options: its own values, the server's read through (session-options.ts). */
  const sessionOptions = (id: string, own: SessionOwnOptions): RuntimeSessionOptions =>
    new SessionOptions(id, own, headersFor(id), sessionServer);

  async function createSession(
    principal: Principal | null,
    holder: string,
    initialize: JsonRpcRequest,
  ): Promise<RuntimeSession> {
    const id = randomBytes(16).toString('base64url');
    const durable = log.durable;
    const session = new RuntimeSession(
      sessionOptions(id, {
        epoch: randomBytes(6).toString('hex'),
        principal: principal?.principal,
        initialize: durable ? initialize : undefined,
        createdAt: durable ? Date.now() : undefined,
      }),
    );
    sessions.set(id, session);
    hold(id, holder);
    metrics?.sessionStarted(id);
    await session.connect(traced(await options.createMcpServer({ id, principal: principal?.principal }), id));
    return session;
  }

  const restoring = new Map<string, Promise<RuntimeSession | undefined>>();

  /**
   * The session `id` names, if `principal` may use it. A session held for another principal is not
   * found, exactly as an unknown id is, and nothing about it changes (not even its idle clock).
   */
  async function findSession(
    id: string | null,
    principal: string | undefined,
  ): Promise<RuntimeSession | undefined> {
    const session = await lookUp(id, principal);
    return session?.ownedBy(principal) ? session : undefined;
  }

  /** A session this process does not hold may live in a durable log (a restart, or another instance). */
  async function lookUp(
    id: string | null,
    principal: string | undefined,
  ): Promise<RuntimeSession | undefined> {
    if (id === null) return undefined;
    // A session being restored is already in `sessions` (so changes other instances report reach it), but
    // not ready: a request waits for the restore, never runs on a half-restored session (whose reap would
    // decide on streams it has not read the owners of yet).
    const restoringNow = restoring.get(id);
    if (restoringNow) return restoringNow;
    const live = sessions.get(id);
    if (live || !log.durable) return live;
    const pending = (async () => {
      const stored = shared
        ? await shared.load(id)
        : await log.registry?.load(id).then((record) => record && { record, version: 0 });
      // Another principal's session stays where it is: restoring it would restart its idle clock.
      if (!stored || !ownsSession(stored.record.principal, principal)) return undefined;
      const { record, version } = stored;
      const session = new RuntimeSession(
        sessionOptions(id, {
          epoch: record.epoch,
          principal: record.principal,
          initialize: record.initialize,
          createdAt: record.createdAt,
          snapshot: record.snapshot,
          version,
        }),
      );
      sessions.set(id, session);
      metrics?.sessionRestored(id, record.createdAt);
      hold(id, holderOf(record.principal, undefined));
      await session.restore(traced(await options.createMcpServer({ id, principal: record.principal }), id));
      return session;
    })().finally(() => restoring.delete(id));
    restoring.set(id, pending);
    return pending;
  }

  /** A refusal: counted unless admission says the client did not cause it, never reported as an error. */
  const refused = (r: Rejection): Reply => {
    if (!r.uncounted) metrics?.requestRejected(r.reason ?? 'invalid_request', r.status);
    return errorReply(r.status, r.code, r.message);
  };

  const limited = (r: LimitRefusal): Reply => {
    metrics?.requestLimited(r.reason, r.status);
    return replyWith(limitReached(r));
  };

  async function handle(call: IncomingCall, localBind: boolean): Promise<Reply | Response> {
    const sessionId = call.header('mcp-session-id');
    const protocolVersion = call.header('mcp-protocol-version');
    const admission = admitHttp(
      {
        method: call.method,
        accept: call.header('accept'),
        contentType: call.header('content-type'),
        origin: call.header('origin'),
        host: call.host,
        protocolVersion,
        sessionId,
        bodyBytes: Number(call.header('content-length') ?? 0),
        localBind,
        // A POST may be 2026-07-28: its version is checked once the body tells the era.
        versionDeferred: call.method === 'POST',
      },
      policy,
    );
    if (!admission.ok) return refused(admission);
    const principal = options.authenticate && !closing ? await options.authenticate(call.request()) : null;
    const caller = admitCaller({
      stopping: closing,
      authRequired: options.authenticate !== undefined,
      authenticated: principal !== null,
    });
    if (!caller.ok) return refused(caller);
    const extra: MessageExtraInfo = {
      authInfo: principal?.authInfo,
      requestInfo: { headers: call.headers() },
    };
    const who = principal?.principal;

    let posted: PostedMessage | undefined;
    if (call.method === 'POST') {
      const read = admitBodyRead(await call.text(policy.maxBodyBytes), policy);
      if (!read.ok) return refused(read);
      const parsed = parseBody(read.text, limits);
      const facts = { method: call.method, protocolVersion, body: parsed.ok ? parsed.body : undefined };
      const route = routeByEra(facts, options.modern !== undefined, SUPPORTED_PROTOCOL_VERSIONS);
      if (route.kind === 'unsupported') {
        metrics?.requestRejected('unsupported_protocol_version', route.status);
        return { kind: 'json', status: route.status, body: route.body };
      }
      if (route.kind === 'modern' && options.modern) {
        const id = admitModernId(facts.body, limits);
        if (!id.ok) return refused(id);
        const endpoint = await modernEndpoint(options.modern);
        loadedModern = endpoint;
        return endpoint.serve({
          url: `http://${call.host ?? 'localhost'}${path}`,
          headers: new Headers(call.headers()),
          text: read.text,
          body: facts.body,
          principal: who,
          remoteAddress: call.remoteAddress,
          gone: call.gone,
          authInfo: principal?.authInfo as ModernInput['authInfo'],
        });
      }
      if (!parsed.ok) return refused(parsed);
      const version = admitProtocolVersion(protocolVersion);
      if (!version.ok) return refused(version);
      const admitted = admitBody(parsed.body, true, sessionId, limits);
      if ('ok' in admitted) return refused(admitted);
      posted = admitted;
    }
    const session = namesSession(call.method, posted?.kind) ? await findSession(sessionId, who) : undefined;
    const lastEventId = call.header('last-event-id');
    const route = routeCall({
      method: call.method,
      posted: posted?.kind,
      sessionFound: !!session,
      lastEventId,
    });
    switch (route.kind) {
      case 'create-session': {
        const holder = holderOf(who, call.remoteAddress);
        const room = admitNewSession(
          { sessions: sessions.size, sessionsOfPrincipal: held.get(holder) ?? 0 },
          limits,
        );
        if (!room.ok) return limited(room);
        const initialize = posted?.message as JsonRpcRequest;
        return (await createSession(principal, holder, initialize)).request(initialize, who, extra);
      }
      case 'not-found':
        if (route.resume) metrics?.resumeOfUnknownSession();
        return sessionNotFound();
      case 'request':
        return (session as RuntimeSession).request(posted?.message as JsonRpcRequest, who, extra);
      case 'accept':
        return (session as RuntimeSession).accept(posted?.message as JsonRpcMessage, who, extra);
      case 'delete':
        return (session as RuntimeSession).delete(who);
      case 'standalone':
        return (session as RuntimeSession).standalone(who);
      case 'resume':
        return (session as RuntimeSession).resume(route.lastEventId, who);
    }
  }

  /** The answer to a call: a Reply, or a Web Response where one is made (the modern endpoint, elsewhere). */
  async function answer(call: IncomingCall, localBind = false): Promise<Reply | Response> {
    const target = routeTarget(call.pathname, path);
    if (target.kind === 'refused') return refused(target);
    if (target.kind === 'elsewhere') return new Response(target.text, { status: target.status });
    try {
      return await handle(call, localBind);
    } catch (error) {
      if (error instanceof SessionUnavailableError) return replyWith(sessionUnavailable(error.released));
      onError(error);
      return replyWith(INTERNAL_ERROR);
    }
  }

  async function fetchHandler(call: IncomingCall, localBind = false): Promise<Response> {
    const answered = await answer(call, localBind);
    return answered instanceof Response ? answered : toResponse(answered, options.sse, wakes);
  }

  /** Node: nothing a client sends may throw out of here (an uncaught throw would stop the process). */
  async function serveNode(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A socket error on either side would otherwise be an unhandled 'error' event; what it means for
    // this request (an aborted body, say) is read where it matters.
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    try {
      const localBind = LOOPBACK.test(req.socket.localAddress ?? '');
      const answered = await answer(fromNodeRequest(req, res), localBind);
      // A Reply is written straight to the socket; only a Web Response goes through a stream.
      if (answered instanceof Response)
        await writeNodeResponse(answered, res, options.sse?.stallMs, options.sse?.maxBufferedBytes, wakes);
      else await writeNodeReply(answered, res, options.sse, wakes);
    } catch (error) {
      onError(error);
      try {
        if (!res.headersSent) res.writeHead(INTERNAL_ERROR.status);
        res.end();
      } catch {
        res.destroy();
      }
    }
  }

  return {
    advertisement,
    notifyModern,
    sessionCount: () => sessions.size,
    sleepingSessionCount: () => [...sessions.values()].filter((s) => s.sleeping).length,
    fetch: (request, info) => fetchHandler(fromWebRequest(request, info?.remoteAddress)),
    nodeHandler: (req, res) => void serveNode(req, res),
    close: async () => {
      closing = true;
      sweeper.cancel();
      const stopping = [...sessions.values()];
      for (const session of stopping) session.stop();
      await stopSharing?.();
      // Nothing stored behind a tool may land on a closed log (write-behind.ts).
      await Promise.all(stopping.map((s) => s.drained()));
      if (modern) await modern.then((m) => m.close()).catch(onError);
      await log.close();
    },
  };
}
