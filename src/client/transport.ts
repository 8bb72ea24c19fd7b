import { randomBytes } from 'node:crypto';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import {
  type Actor,
  createActor,
  fromCallback,
  fromPromise,
  type InspectionEvent,
  type Observer,
} from 'xstate';
import { DEFAULT_RECONNECT_POLICY, type ReconnectPolicy } from '../../machines/backoff.js';
import { appResumeKey } from '../../machines/client/app-resume.js';
import type { AuthChallenge, AuthorizationResult } from '../../machines/client/authorization.js';
import {
  closeDeadlineMs,
  deletesOnClose,
  resumesFrom,
  settledByMessage,
} from '../../machines/client/closing.js';
import { type CursorRecord, joinedRecord } from '../../machines/client/cursor.js';
import type { RetryPolicy } from '../../machines/client/ledger.js';
import {
  clientSessionMachine,
  type GapReport,
  stallTimeoutFor,
} from '../../machines/client/session.machine.js';
import { streamMachine } from '../../machines/client/stream.machine.js';
import { terminateAccepted } from '../../machines/client/terminate-answer.js';
import { isRequest, type JsonRpcMessage, type RequestId, requestKey } from '../../machines/jsonrpc.js';
import { clientOwner, tagOutgoing, untagIncoming } from '../../machines/request-tag.js';
import {
  assessContinuity,
  type ContinuityAssessment,
  type ContinuityLevel,
} from '../../machines/validity.js';
import { ContinuityError, ErrorCode } from '../errors.js';
import type { ContinuityMetrics } from '../metrics/continuity-metrics.js';
import { SessionCallTraces } from '../telemetry/session-call-traces.js';
import { type ContinuityTelemetry, globalTelemetry } from '../telemetry/telemetry.js';
import { ProviderAuthorization } from './authorization.js';
import { type CursorStore, MemoryCursorStore } from './cursor-store.js';
import { createExchangeActor, type FetchLike } from './exchange.js';
import { LatestWrite } from './latest-write.js';
import { ResumptionTokens } from './resumption-tokens.js';

export interface ContinuityClientOptions {
  /** Where the cursor is kept. Default: in memory (resumes across drops, not across restarts). */
  readonly cursorStore?: CursorStore;
  /** Reconnect backoff. Default: 500 ms initial, ×2, 30 s max, 8 retries, full jitter. */
  readonly reconnect?: Partial<ReconnectPolicy>;
  /**
   * No byte for this long counts as a reset, in every phase of an exchange: connecting, waiting for the
   * headers, reading a JSON body or an event stream; bytes restart it, complete events are not needed.
   * Default: three advertised heartbeats (kept within 1 s–10 min), else 300 s. 0 turns it off.
   */
  readonly stallTimeoutMs?: number;
  /**
   * The most one message may hold: an SSE event's data (characters) or a JSON response body (bytes).
   * Past it the exchange is cut (as a reset) and reported (`MCPC_MALFORMED_EVENT`). Default 16 MiB.
   */
  readonly maxMessageBytes?: number;
  /** Events were lost. Default: reported through `onerror` (code MCPC_EVENTS_LOST), never silently. */
  readonly onGap?: (gap: GapReport) => void;
  /** A replayed answer or progress of a request this process never sent (after a restart). Default: `onerror`. */
  readonly onOrphanResult?: (message: JSONRPCMessage) => void;
  /** Which in-flight calls may be sent again after the session was lost. Default: reads and tools annotated read-only or idempotent. */
  readonly retryPolicy?: RetryPolicy;
  readonly fetch?: FetchLike;
  /**
   * Merged into every request (headers for auth, say). Its `redirect` is overridden: redirects are never
   * followed (a 3xx ends the call with an error) unless `redirectPolicy` is `follow`, so these headers never
   * reach another URL.
   */
  readonly requestInit?: RequestInit;
  /**
   * The SDK's `OAuthClientProvider`, as `StreamableHTTPClientTransport` takes it: its token goes on every
   * request, and a 401 (or a 403 `insufficient_scope`) runs the SDK's `auth()` and sends the same request
   * again (same id; a resume keeps its Last-Event-ID). When the user must authorize, a call that never ran
   * fails with the SDK's `UnauthorizedError`; a call that may have run, and the standalone stream, wait for
   * `finishAuth(code)` and go on. Tokens stay in the provider (never in the cursor store).
   */
  readonly authProvider?: OAuthClientProvider;
  /**
   * A session to join (the SDK's `sessionId` option): used when the cursor store holds no session, and the
   * SDK Client then skips `initialize`. Not re-initialized after a 404 (no initialize request is known).
   */
  readonly sessionId?: string;
  /**
   * The SDK's `redirectPolicy`. Default `same-origin`: MCP requests never follow a redirect at all (stricter
   * than the SDK, which follows same-origin ones); the SDK's OAuth requests follow same-origin redirects.
   * `follow`: MCP requests follow every redirect.
   */
  readonly redirectPolicy?: 'same-origin' | 'follow';
  /** An XState inspector (e.g. from @statelyai/inspect) to watch the machines live. */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** Send DELETE when closed. Default true. */
  readonly deleteOnClose?: boolean;
  /** How long `close()` waits for the DELETE. Default 2 s (at most 2^31-1 ms). */
  readonly closeTimeoutMs?: number;
  /** Records gaps, outcome-unknown calls, reconnect attempts and latency (docs/operations.md, "Metrics"). */
  readonly metrics?: ContinuityMetrics;
  /**
   * Spans and duration metrics on OpenTelemetry's MCP conventions: a CLIENT span per request, its trace
   * context in `params._meta` (docs/operations.md, "Traces"). Default: the OTel API's globals (no-ops without an SDK).
   */
  readonly telemetry?: ContinuityTelemetry;
}

/**
 * An SDK `Transport` for MCP Streamable HTTP that keeps the session through dropped connections:
 * resumes with Last-Event-ID, re-initializes only on 404, reports every loss, never re-sends a call
 * blindly. Every decision is the client machine's (`transport.actor`); this class does the I/O.
 */
export class ContinuityClientTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;

  private running: Actor<typeof clientSessionMachine> | undefined;
  private readonly store: CursorStore;
  private readonly policy: ReconnectPolicy;
  private saving: Promise<void> = Promise.resolve();
  private readonly saves: LatestWrite<CursorRecord | null>;
  private deleting: Promise<void> = Promise.resolve();
  private warned = false;
  private readonly inbox: JsonRpcMessage[] = [];
  /**
   * This process's tag on the request ids it sends (machines/request-tag.ts): a restarted SDK Client numbers
   * its requests from 0 again, and the server de-duplicates by id, so its first call would otherwise be
   * answered with the replay of an old one.
   */
  private readonly owner = clientOwner(randomBytes(6).toString('hex'));
  private draining = false;
  /** A notification was handed over since the last yield; an answer must wait for its handler. */
  private notifiedSinceYield = false;
  private closed = false;
  /** `onclose` was called (by `close()`, or when the transport failed for good). */
  private closeNotified = false;
  /** The OAuth client, when the application gave an `authProvider`. */
  private readonly authorization: ProviderAuthorization | undefined;
  /**
   * With an `authProvider`, a request's `send` settles when its call ends: it rejects with the SDK's
   * `UnauthorizedError` when authorization needs the user before the request ran (as the SDK transport's
   * `send` does), so `client.connect` and `client.callTool` fail the way an application expects.
   */
  private readonly sends = new Map<RequestId, { resolve: () => void; reject: (e: Error) => void }>();
  /** `terminateSession` sent the DELETE already. */
  private sessionTerminated = false;
  private readonly traces: SessionCallTraces;
  /** The SDK's `onresumptiontoken` callbacks of calls and of `resumeStream`s. */
  private readonly tokens = new ResumptionTokens((e) =>
    this.report(ErrorCode.transport, `onresumptiontoken threw: ${String(e)}`, e),
  );
  /** Counts `resumeStream` calls: each resumed stream's key. */
  private resumes = 0;

  constructor(
    readonly url: URL,
    private readonly options: ContinuityClientOptions = {},
  ) {
    this.store = options.cursorStore ?? new MemoryCursorStore();
    this.saves = new LatestWrite((record) => this.store.save(record));
    this.policy = { ...DEFAULT_RECONNECT_POLICY, ...options.reconnect };
    if (options.authProvider)
      this.authorization = new ProviderAuthorization(
        url,
        options.authProvider,
        options.fetch ?? fetch,
        (error) => this.onerror?.(error),
      );
    this.traces = new SessionCallTraces(options.telemetry ?? globalTelemetry());
  }

  /** The running client machine, for inspection. */
  get actor(): Actor<typeof clientSessionMachine> {
    if (!this.running) throw new Error('ContinuityClientTransport: not started');
    return this.running;
  }

  get sessionId(): string | undefined {
    return this.running?.getSnapshot().context.sessionId;
  }

  /** What this client can promise: see the conditions of validity (docs/verification.md). */
  get continuity(): ContinuityLevel {
    return this.assessment().level;
  }

  assessment(): ContinuityAssessment {
    const ctx = this.running?.getSnapshot().context;
    return assessContinuity({
      policy: this.policy,
      stallTimeoutMs: ctx ? stallTimeoutFor(ctx.config, ctx.advertisement) : this.options.stallTimeoutMs,
      cursor: this.store.durable ? 'durable' : 'memory',
      server: ctx?.advertisement,
    });
  }

  async start(): Promise<void> {
    if (this.running) throw new Error('ContinuityClientTransport: already started');
    const restored = (await this.store.load()) ?? this.joined();
    const authorization = this.authorization;
    const exchange = createExchangeActor({
      url: this.url,
      fetch: this.options.fetch ?? fetch,
      requestInit: this.options.requestInit,
      maxMessageBytes: this.options.maxMessageBytes,
      onMalformed: (e) => this.report(ErrorCode.malformedEvent, e.message),
      authorization: authorization && (() => authorization.header()),
      followRedirects: this.options.redirectPolicy === 'follow',
    });
    const stream = authorization
      ? streamMachine.provide({
          actors: {
            exchange,
            authorize: fromPromise<AuthorizationResult, AuthChallenge>(({ input }) =>
              authorization.authorize(input),
            ),
            awaitAuthorization: fromCallback<{ type: 'auth.granted' }, AuthChallenge>(({ sendBack }) =>
              authorization.waitForGrant(() => sendBack({ type: 'auth.granted' })),
            ),
          },
        })
      : streamMachine.provide({ actors: { exchange } });
    const machine = clientSessionMachine.provide({
      actors: { stream },
      actions: {
        deliver: (_, { message, key, eventId }) => {
          this.traces.delivered(message);
          this.tokens.delivered(key, eventId);
          this.enqueue(message);
        },
        rejectUnauthorized: (_, { message }) => void this.rejectUnauthorized(message),
        deliverOrphan: (_, { message }) => this.orphan(message),
        notifyGap: (_, gap) => {
          this.traces.gap(gap);
          this.gap(gap);
        },
        persistCursor: (_, { record }) => this.persist(record),
        sendDelete: (_, { sessionId }) => {
          if (deletesOnClose(this.options.deleteOnClose, this.sessionTerminated))
            this.deleting = this.sendDelete(sessionId);
        },
        reportError: (_, { message, detail }) => this.report(ErrorCode.transport, message, detail),
        reportFailure: (_, { message, detail }) => this.fail(message, detail),
        reportTerminated: () => this.terminated(),
      },
    });
    const actor = createActor(machine, {
      input: {
        policy: this.policy,
        stallTimeoutMs: this.options.stallTimeoutMs,
        retryPolicy: this.options.retryPolicy,
        seed: Math.floor(Math.random() * 0x7fffffff),
        restored: restored ?? undefined,
        serverUrl: this.url.href,
        requestOwner: this.owner,
        authorization: authorization !== undefined,
      },
      inspect: this.options.inspect,
    });
    this.running = actor;
    this.options.metrics?.client.watch(actor);
    actor.subscribe((snapshot) => {
      if (!this.warned && snapshot.context.advertisement) this.warnIfMisconfigured();
    });
    actor.start();
  }

  /**
   * Sends a message. The SDK's options: `onresumptiontoken` hears each event id of a request's stream (the
   * transport resumes the stream itself); with `resumptionToken` a request is not POSTed: the stream that
   * token belongs to is resumed (GET, `Last-Event-ID`), and the answer there answers this request.
   */
  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (this.closed) throw new Error('ContinuityClientTransport: closed');
    const ctx = this.actor.getSnapshot().context;
    const tagged = this.traces.sent(
      tagOutgoing(this.owner, message as JsonRpcMessage),
      ctx.sessionId,
      ctx.protocolVersion,
    );
    const resumptionToken = resumesFrom(tagged, options?.resumptionToken);
    if (options?.onresumptiontoken && isRequest(tagged))
      this.tokens.watch(requestKey(tagged.id), options.onresumptiontoken, resumptionToken);
    if (!this.authorization) {
      this.actor.send({ type: 'app.send', message: tagged, resumptionToken });
      return;
    }
    // A cancelled call will not be answered: its `send` is settled now.
    this.settleSend(settledByMessage(tagged));
    if (!isRequest(tagged)) {
      this.actor.send({ type: 'app.send', message: tagged, resumptionToken });
      return;
    }
    const settled = new Promise<void>((resolve, reject) => this.sends.set(tagged.id, { resolve, reject }));
    this.actor.send({ type: 'app.send', message: tagged, resumptionToken });
    return settled;
  }

  /**
   * Resumes a stream from an event id, as the SDK transport's `resumeStream` does: a GET with
   * `Last-Event-ID: lastEventId` in the current session, whose messages go to `onmessage` (a replayed
   * answer or progress of a request another process sent included, with its original id) and whose event
   * ids go to `onresumptiontoken`. It is resumed again after a drop and refused or ended like every other
   * resume; with no active session the application hears so through `onerror`. Resolves once asked for
   * (the GET goes out in the background). Streams of this transport's own calls need no such call.
   */
  async resumeStream(
    lastEventId: string,
    options?: { onresumptiontoken?: (token: string) => void },
  ): Promise<void> {
    if (this.closed) throw new Error('ContinuityClientTransport: closed');
    const key = appResumeKey(++this.resumes);
    if (options?.onresumptiontoken) this.tokens.watch(key, options.onresumptiontoken, lastEventId);
    this.actor.send({ type: 'app.resume', key, lastEventId });
  }

  /**
   * Completes the authorization code flow (the SDK transport's `finishAuth`): the provider trades the code
   * for tokens, and every stream that was waiting for authorization goes on (a call that may have run is
   * then answered). Works after `close()` too, as the SDK's does (a `connect` that failed closed it).
   */
  async finishAuth(authorizationCode: string): Promise<void> {
    if (!this.authorization) throw await unauthorized('No auth provider');
    await this.authorization.finishAuth(authorizationCode);
  }

  /**
   * Ends the session on the server now (DELETE with its id; a 405, "the server does not allow it", is
   * accepted), then closes this transport. The SDK's keeps the transport for a new session; here a new
   * session takes a new transport (and its cursor store forgets the old one).
   */
  async terminateSession(): Promise<void> {
    const sessionId = this.sessionId;
    if (sessionId === undefined || this.closed) return;
    const response = await this.deleteRequest(sessionId);
    await response.body?.cancel().catch(() => undefined);
    if (!terminateAccepted(response.status)) {
      const error = new ContinuityError(
        ErrorCode.transport,
        `Failed to terminate session: HTTP ${response.status}`,
        { status: response.status },
      );
      this.onerror?.(error);
      throw error;
    }
    this.sessionTerminated = true;
    await this.close();
  }

  setProtocolVersion(version: string): void {
    this.actor.send({ type: 'app.protocolVersion', version });
  }

  /** Sends DELETE (unless disabled), settles every pending call, stops every stream and timer. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.running?.send({ type: 'app.close' });
    const timeout = new Promise<void>((resolve) =>
      setTimeout(resolve, closeDeadlineMs(this.options.closeTimeoutMs)).unref(),
    );
    await Promise.race([Promise.all([this.deleting, this.saving]), timeout]);
    this.running?.stop();
    for (const pending of this.sends.values()) pending.resolve();
    this.sends.clear();
    this.traces.closed();
    this.notifyClosed();
  }

  private notifyClosed(): void {
    if (this.closeNotified) return;
    this.closeNotified = true;
    this.onclose?.();
  }

  /**
   * The machine gave up on the session for good (`failed`): every call has ended. The application hears
   * why, then that the transport is closed; later sends are refused.
   */
  private fail(message: string, detail: unknown): void {
    this.report(ErrorCode.reinitializeGivenUp, message, detail);
    this.closed = true;
    // After the calls' endings are handed over (the SDK rejects what is still pending on close), and after
    // the machine's transition: onclose may call close().
    void this.delivered().then(() => {
      this.running?.stop();
      this.notifyClosed();
    });
  }

  /**
   * The server ended the session (`event: close`, after a DELETE or its expiry): the session is gone for
   * every client, so nothing is resumed or re-initialized. Every call has ended; the transport closes
   * (no DELETE: there is nothing left to delete) and later sends are refused.
   */
  private terminated(): void {
    this.closed = true;
    // As in `fail`: after the calls' endings are handed over, and after the machine's transition.
    void this.delivered().then(() => {
      this.running?.stop();
      this.notifyClosed();
    });
  }

  /** Resolves once every message handed to `enqueue` so far has reached the application (bounded). */
  private async delivered(): Promise<void> {
    for (let i = 0; i < 100 && (this.draining || this.inbox.length > 0); i++)
      await new Promise((r) => setImmediate(r));
  }

  /**
   * The machine persists after every event; a save chained per event cost two promises each. Saves go one at
   * a time, and of the records that arrive meanwhile only the newest is written (the store's contract).
   */
  private persist(record: CursorRecord | null): void {
    this.tokens.persisted(record);
    this.saving = this.saves
      .push(record)
      .catch((e) => this.report(ErrorCode.cursorStore, `cursor store: ${String(e)}`, e));
  }

  private async sendDelete(sessionId: string): Promise<void> {
    try {
      await this.deleteRequest(sessionId);
    } catch (e) {
      this.report(ErrorCode.transport, `DELETE failed: ${String(e)}`, e);
    }
  }

  private async deleteRequest(sessionId: string): Promise<Response> {
    const headers = new Headers(this.options.requestInit?.headers);
    const authorization = await this.authorization?.header();
    if (authorization) headers.set('Authorization', authorization);
    headers.set('Mcp-Session-Id', sessionId);
    const protocolVersion = this.running?.getSnapshot().context.protocolVersion;
    if (protocolVersion) headers.set('MCP-Protocol-Version', protocolVersion);
    return (this.options.fetch ?? fetch)(this.url, {
      ...this.options.requestInit,
      method: 'DELETE',
      headers,
      redirect: this.options.redirectPolicy === 'follow' ? 'follow' : 'manual',
    });
  }

  /** The `sessionId` option as a cursor record: the session is joined, not initialized. */
  private joined(): CursorRecord | undefined {
    return joinedRecord(this.url.href, this.options.sessionId);
  }

  /** The machine ended a call that never ran, for want of authorization: its `send` fails as the SDK's does. */
  private async rejectUnauthorized(message: JsonRpcMessage): Promise<void> {
    const id = 'id' in message ? message.id : null;
    const pending = id === null ? undefined : this.sends.get(id);
    if (!pending || id === null) {
      this.enqueue(message);
      return;
    }
    this.sends.delete(id);
    // Its span ends here: the answer is the rejection, never a delivered message.
    this.traces.delivered(message);
    pending.reject(await unauthorized('Authorization needed: call finishAuth(code), then send again'));
  }

  private settleSend(id: RequestId | null | undefined): void {
    if (id === null || id === undefined) return;
    const pending = this.sends.get(id);
    if (!pending) return;
    this.sends.delete(id);
    pending.resolve();
  }

  /**
   * Hands messages to the SDK in order. The SDK runs notification handlers a microtask later but settles
   * responses at once, so a progress notification followed in the same tick by its response would reach
   * a handler that was already removed. So an answer that follows notifications waits one macrotask.
   */
  private enqueue(message: JsonRpcMessage): void {
    this.inbox.push(message);
    if (!this.draining) void this.drain();
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.inbox.length > 0) {
        // One batch at a time: shift() on a long array copies it each time (quadratic).
        for (const m of this.inbox.splice(0)) {
          const isAnswer = !('method' in m);
          if (isAnswer && this.notifiedSinceYield) {
            await new Promise((r) => setImmediate(r));
            this.notifiedSinceYield = false;
          }
          if (isAnswer && this.sends.size > 0 && 'id' in m) this.settleSend(m.id);
          this.onmessage?.(untagIncoming(this.owner, m) as JSONRPCMessage);
          if ('method' in m && !('id' in m)) this.notifiedSinceYield = true;
        }
      }
    } finally {
      this.draining = false;
    }
  }

  private gap(gap: GapReport): void {
    if (this.options.onGap) this.options.onGap(gap);
    else {
      this.report(
        ErrorCode.eventsLost,
        `events lost on ${gap.streamKey}: ${gap.reason} (${gap.lostCount ?? 'unknown'} events)`,
        gap,
      );
    }
  }

  private orphan(message: JsonRpcMessage): void {
    if (this.options.onOrphanResult) this.options.onOrphanResult(message as JSONRPCMessage);
    else
      this.report(
        ErrorCode.orphanResult,
        'a replayed response to a request this process never sent',
        message,
      );
  }

  private warnIfMisconfigured(): void {
    this.warned = true;
    const a = this.assessment();
    if (a.misconfigured)
      this.report(ErrorCode.condition, `continuity is ${a.level}: ${a.reasons.join('; ')}`, a);
  }

  private report(code: ErrorCode, message: string, detail?: unknown): void {
    this.onerror?.(new ContinuityError(code, message, detail));
  }
}

/** The SDK's `UnauthorizedError` (its module is loaded only by an application that authorizes). */
async function unauthorized(message: string): Promise<Error> {
  const { UnauthorizedError } = await import('@modelcontextprotocol/sdk/client/auth.js');
  return new UnauthorizedError(message);
}
