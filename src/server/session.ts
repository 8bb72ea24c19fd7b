import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import type { Actor, InspectionEvent, Observer } from 'xstate';
import { withAdvertisement } from '../../machines/advertisement.js';
import { OutcomeUnknownReason } from '../../machines/codes.js';
import { formatEventId, STANDALONE_STREAM } from '../../machines/event-id.js';
import {
  idFromKey,
  isRequest,
  type JsonRpcMessage,
  type JsonRpcRequest,
  requestKey,
} from '../../machines/jsonrpc.js';
import { unstoredAnswerRetryMs } from '../../machines/server/deadlines.js';
import { executePlan, type PlanIo } from '../../machines/server/execute-plan.js';
import { announcesEnd, type LeaseRead } from '../../machines/server/instances.js';
import { DEFAULT_SERVER_LIMITS, LimitReason, type ServerLimits } from '../../machines/server/limits.js';
import { deleteAnswer, SESSION_NOT_FOUND } from '../../machines/server/replies.js';
import { cancelledRequest, routeInbound, tagRequestId } from '../../machines/server/routing.js';
import {
  ownsSession,
  type ServerSessionEmitted,
  type ServerSessionEvent,
  type serverSessionMachine,
  type UnansweredCause,
} from '../../machines/server/session.machine.js';
import {
  cursorStream,
  planMessage,
  planRequest,
  planResume,
  planStandalone,
  routeOutbound,
  type SessionPlan,
} from '../../machines/server/session-commands.js';
import type { ServerAdvertisement } from '../../machines/validity.js';
import type { ServerMetrics } from '../metrics/server.js';
import type { EventLog } from './event-log.js';
import { type Reply, replyWith } from './reply.js';
import { type HostListeners, SessionHost } from './session-host.js';
import { SessionReaping } from './session-reaping.js';
import { SessionStreams } from './session-streams.js';
import { type SessionOutbound, SessionTransport } from './session-transport.js';
import { SharedSync } from './shared-sync.js';
import { primingFrame, type SseSink } from './sse.js';
import type { Wake, WakePort } from './wake-port.js';
import { WriteBehind } from './write-behind.js';

export { SessionUnavailableError } from './session-host.js';

/** What `createMcpServer` is told about the session it serves. */
export interface SessionInfo {
  readonly id: string;
  /** The principal `authenticate` returned for the request that created the session. */
  readonly principal?: string;
}

/** An SDK `McpServer` or `Server`: anything that connects to a Transport and closes. */
export interface McpServerLike {
  connect(transport: Transport): Promise<void>;
  close(): Promise<void>;
}

export interface RuntimeSessionOptions {
  readonly id: string;
  readonly epoch: string;
  readonly principal?: string;
  readonly log: EventLog;
  readonly idleTtlMs: number;
  readonly heartbeatMs: number;
  readonly retryMs: number;
  readonly advertisement: ServerAdvertisement;
  readonly headers: Record<string, string>;
  readonly onEnded: (id: string) => void;
  readonly onError: (error: unknown) => void;
  /** An XState inspector for this session's machine (`ContinuityServerOptions.inspect`). */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /**
   * The client's initialize request, kept with the session on a durable log (a new process replays it
   * into a fresh SDK server). Not kept with a memory log: an idle session is smaller without it.
   */
  readonly initialize?: JsonRpcMessage;
  /** When the session was created (wall clock, ms), kept in its record for the instances restoring it. */
  readonly createdAt?: number;
  /** A persisted machine snapshot: this session is being restored by a new process. */
  readonly snapshot?: unknown;
  /** Shared store: the version of the stored record `snapshot` came from (0: a new session). */
  readonly version?: number;
  /**
   * Shared store: read attached streams this often too, in case a change report went missing
   * (`sharedPollMs`, machines/server/deadlines.ts; 0: never).
   */
  readonly pollMs?: number;
  /** The host's timer port: heartbeats, polls and the idle clock's "now" (wake-port.ts). */
  readonly wakes: WakePort;
  /** Records resumes, detaches, ended sessions (src/metrics). */
  readonly metrics?: ServerMetrics;
  /** `maxOpenRequestStreamsPerSession` and the `Retry-After` of its refusal. Default: no bound. */
  readonly limits?: Pick<ServerLimits, 'maxOpenRequestStreamsPerSession' | 'retryAfterSeconds'>;
}

/**
 * One live session: its machine decides (machines/server: the machine, and the commands its answers
 * become), its SDK server computes, its log stores, its attachments write. Every server-to-client message
 * is appended to the log before any socket sees it. The parts: hosting (session-host.ts), shared-store
 * sync (shared-sync.ts), stream command execution (session-streams.ts), reaping (session-reaping.ts).
 */
export class RuntimeSession implements HostListeners, SessionOutbound {
  readonly transport: SessionTransport;
  private readonly host: SessionHost;
  /**
   * Shared-store sync, made when first needed: only a session sharing a store, or keeping a record in a
   * durable log's registry, ever needs one (an idle session on a memory log holds none).
   */
  private syncing: SharedSync | undefined;
  private readonly streams: SessionStreams;
  /** Answers of unanswered requests to store again (`giveUp`): cancelled when the session ends here. */
  private answerRetries: Set<Wake> | undefined;
  /** The end under way (`end`): a DELETE is answered after it. */
  private ending: Promise<void> | undefined;
  private mcp: McpServerLike | undefined;
  private initializeKey: string | undefined;
  /** Stores the SDK server was not made to wait for (write-behind.ts); none while idle. */
  private writeBehind: WriteBehind | undefined;

  constructor(private readonly o: RuntimeSessionOptions) {
    // Every field is set here, in this order, for every session: one object shape (hidden class) for all.
    // The session itself is the transport's outbound and the host's listener (methods, not closures: a
    // closure and its context are kept by every idle session, docs/benchmarks.md row 4); the options
    // themselves are handed on, not copies of their keys.
    this.transport = new SessionTransport(o.id, this);
    this.host = new SessionHost(o, this);
    this.syncing = undefined;
    this.streams = new SessionStreams(o, this.host, o.pollMs ?? 0);
    this.answerRetries = undefined;
    this.ending = undefined;
    this.mcp = undefined;
    this.initializeKey = undefined;
    this.writeBehind = undefined;
  }

  private get sync(): SharedSync {
    this.syncing ??= new SharedSync(this.host, this.o.log.shared, this.o, (reason) => this.gone(reason));
    return this.syncing;
  }

  /** Reaping is stateless: made for each use, so an idle session keeps none (session-reaping.ts). */
  private get reaping(): SessionReaping {
    return new SessionReaping(this.o.id, this.o.log, this.host, this.streams, this.o.metrics);
  }

  /** @internal The machine ended the session (session-host.ts). */
  machineEnded(e: { reason: 'expired' | 'terminated' | 'shutdown' }): void {
    // Counted where the end was decided, not again by every instance that ends its copy.
    if (!this.host.endedElsewhere) this.o.metrics?.sessionEnded(this.o.id, e.reason);
    else this.o.metrics?.sessionEndedElsewhere(this.o.id);
    this.ending = this.end(e.reason);
  }

  /** @internal The machine released the session: the process stops, a durable log keeps it. */
  machineReleased(): void {
    this.release();
  }

  /** @internal The idle TTL ran out here: how long was it idle everywhere? */
  machineExpiryDue(): void {
    void this.sync.checkExpiry();
  }

  /** @internal The machine settled a request the SDK server will not answer. */
  machineUnanswered(e: {
    requestKey: string;
    stream: number;
    answer: { code: number; message: string; data?: { reason: string } } | undefined;
  }): void {
    void this.giveUp(e.requestKey, e.stream, e.answer);
  }

  /**
   * The session machine, for inspection. Replaced when a newer snapshot is adopted from a shared store,
   * and when a sleeping session wakes.
   */
  get actor(): Actor<typeof serverSessionMachine> {
    return this.host.actor;
  }

  get id(): string {
    return this.o.id;
  }

  get sleeping(): boolean {
    return this.host.sleeping;
  }

  /** Called by the server's sweep: an idle session sleeps; one asleep past its TTL wakes to expire. */
  sweep(now: number, idleForMs: number): void {
    this.host.sweep(now, idleForMs, this.busyHere);
    if (this.writeBehind?.empty) this.writeBehind = undefined;
  }

  /** What is attached or running here keeps the session alive (on every instance, sharing a store). */
  get busyHere(): boolean {
    return this.host.busy;
  }

  /** Another instance ended the session (its change report, or its record is gone). */
  gone(reason: 'expired' | 'terminated'): void {
    if (this.host.ended) return;
    this.host.endedElsewhere = true;
    this.host.send({ type: 'session.gone', reason });
  }

  /** Something changed this session's stream on another instance (or a poll): attached readers look. */
  wake(stream: number): void {
    this.streams.wake(stream);
  }

  /** Shared store: request streams attached here whose call runs on another instance: their owners. */
  foreignOwners(): string[] {
    return this.reaping.foreignOwners();
  }

  /** Shared store: whether `read` shows an instance running a call on a stream attached here gone. */
  ownerLost(read: LeaseRead): boolean {
    return this.reaping.ownerLost(read);
  }

  /**
   * Shared store: the calls on streams attached here whose instance has no lease any more get an
   * outcome-unknown answer, in this session's turn (the leases are read again there, for those streams).
   */
  reapAbandoned(): Promise<void> {
    return this.sync.inTurn(() => this.reaping.reap(this.streams.attachedStreams()));
  }

  async connect(server: McpServerLike): Promise<void> {
    this.mcp = server;
    await server.connect(this.transport);
  }

  /**
   * A new process takes over a session from a durable log: the machine forgets connections and running
   * work of the old process, the fresh SDK server is initialized as the client once did, and every
   * request that was running when the old process died gets an outcome-unknown answer in its stream,
   * so no client waits for a result that will never come.
   */
  async restore(server: McpServerLike): Promise<void> {
    this.host.send({ type: 'session.restored' });
    await this.connect(server);
    const init = this.o.initialize as JsonRpcRequest;
    this.transport.receive({ ...init, id: `mcp-continuity-restore-${init.id}` } as JSONRPCMessage, {});
    this.transport.receive({ jsonrpc: '2.0', method: 'notifications/initialized' } as JSONRPCMessage, {});
    await this.reaping.reapRestored();
  }

  /**
   * Whether `principal` may use this session. The handler asks before anything else, so a stranger's
   * request takes the same path as one naming an unknown session, and changes nothing here (the machine
   * checks again with every decision).
   */
  ownedBy(principal: string | undefined): boolean {
    return ownsSession(this.o.principal, principal);
  }

  /** A POSTed request: run it once, answer on its own stream; a repeated id gets the original stream. */
  async request(
    message: JsonRpcRequest,
    principal: string | undefined,
    extra: MessageExtraInfo,
  ): Promise<Reply> {
    const key = requestKey(message.id);
    // At most once across a crash and across instances: the request id is durable (committed over the
    // version the decision was made on) before the SDK server sees the request.
    const { decision } = await this.decide(
      { type: 'request.received', requestKey: key, principal, owner: this.o.log.shared?.instanceId },
      'decision.request',
    );
    const plan = planRequest(decision, key, this.keeping, this.o.limits ?? DEFAULT_SERVER_LIMITS);
    if (plan.kind === 'error' && decision.kind === 'limited') {
      this.o.metrics?.requestLimited(LimitReason.maxOpenRequestStreams, plan.error.status);
    }
    if (message.method === 'initialize' && plan.kind === 'stream') this.initializeKey = key;
    return this.execute(plan, principal, {
      run: (k) => {
        const cause = this.transport.receiveRequest(message as JSONRPCMessage, extra);
        if (cause) this.unanswered(k, cause);
      },
    });
  }

  /** A POSTed notification or response: hand it to the SDK server, answer 202. */
  async accept(
    message: JsonRpcMessage,
    principal: string | undefined,
    extra: MessageExtraInfo,
  ): Promise<Reply> {
    const { accepted } = await this.decide({ type: 'message.received', principal }, 'decision.message');
    return this.execute(planMessage(accepted), principal, {
      accepted: async () => {
        const shared = this.o.log.shared;
        const route = shared
          ? routeInbound(message, shared.instanceId, (key) => this.ownerOfRequest(key))
          : ({ kind: 'here', message } as const);
        if (route.kind === 'here') this.deliver(route.message, extra);
        else await shared?.forward(route.instance, this.o.id, route.message);
        return { kind: 'empty', status: 202, headers: this.o.headers };
      },
    });
  }

  /** A client message POSTed to another instance that belongs to this one's copy of the session. */
  receiveForwarded(message: JsonRpcMessage): void {
    if (!this.host.ended) this.deliver(message, {});
  }

  /** GET + Last-Event-ID: the machine answers the cursor; a replay continues live. */
  async resume(lastEventId: string, principal: string | undefined): Promise<Reply> {
    const present = this.o.log.shared ? await this.sync.sync() : !this.host.ended;
    if (!present) return replyWith(SESSION_NOT_FOUND);
    const stream = cursorStream(lastEventId, this.o.epoch);
    const window = stream === undefined ? undefined : await this.windowFor(stream);
    const { answer } = await this.decide(
      { type: 'resume.requested', lastEventId, window, principal },
      'decision.resume',
    );
    this.o.metrics?.resumeAnswered(this.o.id, answer, window);
    return this.execute(planResume(answer), principal);
  }

  /** GET without a cursor: the standalone stream, from its start the first time, else from its head. */
  async standalone(principal: string | undefined): Promise<Reply> {
    const { decision } = await this.decide({ type: 'standalone.requested', principal }, 'decision.attach');
    return this.execute(planStandalone(decision, this.keeping), principal);
  }

  async delete(principal: string | undefined): Promise<Reply> {
    const { accepted } = await this.decide({ type: 'session.delete', principal }, 'decision.delete');
    // Answered once the end is stored (announced to the other instances, dropped from the log): a request
    // the client sends after the answer must find the session gone on every instance.
    await this.ending;
    const answer = deleteAnswer(accepted);
    return 'kind' in answer ? answer : replyWith(answer);
  }

  /** Resolves once no store the SDK server was not made to wait for is under way (before the log closes). */
  async drained(): Promise<void> {
    await this.ending;
    await this.writeBehind?.drain();
  }

  /** The process is stopping; the machine decides whether the session ends or outlives it. */
  stop(): void {
    this.host.send({ type: 'server.stopping', durableLog: this.o.log.durable });
  }

  private get keeping() {
    return { sharedStore: this.o.log.shared !== undefined };
  }

  private decide<T extends ServerSessionEmitted['type']>(event: ServerSessionEvent, type: T) {
    return this.decided(() => this.host.ask(event, type));
  }

  /** A decision: committed over the shared store's record when there is one, else simply made. */
  private decided<R>(act: () => R): Promise<R> {
    return this.o.log.shared ? this.sync.decide(act) : new Promise<R>((resolve) => resolve(act()));
  }

  /**
   * The window of the stream a cursor of this epoch points into, for the machine's answer. Sharing a
   * store, a call whose instance is gone is answered for first, so the client finds its answer.
   */
  private async windowFor(stream: number) {
    if (this.o.log.shared) await this.sync.inTurn(() => this.reaping.reapIfOwnerGone(stream));
    return this.o.log.window(this.o.id, stream);
  }

  /**
   * Executes a plan (machines/server/execute-plan.ts) with this session's I/O: the log, SSE sinks, the
   * SDK server. `run` hands a request to the SDK server; `accepted` delivers a notification or response.
   */
  private execute(
    plan: SessionPlan,
    principal: string | undefined,
    handlers: { run?: (requestKey: string) => void; accepted?: () => Promise<Reply> } = {},
  ): Promise<Reply> {
    const o = this.o;
    const io: PlanIo<Reply, SseSink> = {
      epoch: o.epoch,
      recordActivity: () => {
        this.host.used();
        this.host.send({ type: 'session.activity' });
      },
      // The machine's `running` is the bookkeeping: admitted requests are in it already.
      runHere: () => undefined,
      openStream: (stream) => o.log.openStream(o.id, stream),
      persist: async () => {
        await o.log.registry?.save(this.sync.record());
      },
      unanswered: (key, cause) => this.unanswered(key, cause),
      head: async (stream) => (await o.log.window(o.id, stream))?.head ?? 0,
      reply: (error) => replyWith(error, o.headers),
      accepted: () => (handlers.accepted as () => Promise<Reply>)(),
      resume: (lastEventId) => this.resume(lastEventId, principal),
      open: (start) => ({ kind: 'sse', headers: o.headers, start }),
      prime: (sink, stream, seq) =>
        sink.write(primingFrame(formatEventId({ epoch: o.epoch, stream, seq }), o.retryMs)),
      retry: (sink) => sink.write(`retry: ${o.retryMs}\n\n`),
      readerOf: (stream) => this.streams.readerOf(stream),
      endReader: (_stream, sink) => sink.end(),
      attach: (sink, stream, afterSeq, readBack) => {
        const attachment = this.streams.attach(stream, sink, afterSeq);
        return readBack ? attachment.replay() : undefined;
      },
      execute: (key) => handlers.run?.(key),
    };
    return Promise.resolve(executePlan(plan, io));
  }

  /** The SDK server will not answer this request: the machine decides what becomes of it. */
  private unanswered(key: string, cause: UnansweredCause): void {
    this.host.send({ type: 'request.unanswered', requestKey: key, cause });
  }

  /**
   * The machine settled a request the SDK server will not answer: nothing is routed to it any more, its
   * stream gets the machine's answer (if any) and ends.
   */
  private async giveUp(
    key: string,
    stream: number,
    answer: { code: number; message: string; data?: { reason: string } } | undefined,
    attempt = 0,
  ): Promise<void> {
    try {
      // After the stream's events on their way (none lands after its answer or its end); a lost one is
      // thereby reported, so no failure is kept for a stream that is over.
      await this.writeBehind?.settled(stream).catch(() => undefined);
      if (answer) {
        await this.streams.storeFinal(stream, { jsonrpc: '2.0', id: idFromKey(key), error: answer });
        return;
      }
    } catch {
      // The log failed as well: the response ends and the client resumes; the answer is stored again when
      // the machines say (a resume then finds it), until the session ends or they give up.
      const retryMs = answer ? unstoredAnswerRetryMs(attempt, this.host.ended) : undefined;
      if (retryMs !== undefined) {
        const wake = this.o.wakes.after(retryMs, () => {
          this.answerRetries?.delete(wake);
          void this.giveUp(key, stream, answer, attempt + 1);
        });
        this.answerRetries ??= new Set();
        this.answerRetries.add(wake);
      }
    }
    this.streams.finish(stream);
  }

  /** The session ends or is released: no stored-again answer may recreate a stream of it afterwards. */
  private cancelAnswerRetries(): void {
    for (const wake of this.answerRetries ?? []) wake.cancel();
    this.answerRetries = undefined;
  }

  /**
   * Hands a notification or response to the SDK server. A cancellation of a request running here means
   * the SDK server drops that request's answer: the machine hears of it, so the request settles.
   */
  private deliver(message: JsonRpcMessage, extra: MessageExtraInfo): void {
    this.transport.receive(message as JSONRPCMessage, extra);
    const cancelled = cancelledRequest(message);
    if (cancelled !== undefined) this.unanswered(requestKey(cancelled), 'cancelled');
  }

  private ownerOfRequest(key: string): string | undefined {
    const { streams, requests } = this.host.actor.getSnapshot().context;
    const stream = requests[key];
    return stream === undefined ? undefined : streams[stream]?.owner;
  }

  /** The SDK server sends: stored in the log, then offered to the stream's reader (machines: which stream). */
  /** @internal The SDK server sends (session-transport.ts). */
  async outbound(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    let m = message as JsonRpcMessage;
    const shared = this.o.log.shared;
    // Sharing the session, this instance's request ids must not collide with another instance's, and
    // the answer must find its way back here (machines/server/routing.ts).
    if (shared && isRequest(m)) m = { ...m, id: tagRequestId(shared.instanceId, m.id) };
    const route = routeOutbound(m, options?.relatedRequestId, this.host.running());
    if (route.kind === 'drop') return;
    if (route.kind === 'final') {
      const key = route.requestKey;
      try {
        // After the stream's events on their way, and not vouched for when one of them was lost.
        await this.writeBehind?.settled(route.stream);
        // False when another instance already answered for it (it thought this one was gone).
        await this.streams.storeFinal(
          route.stream,
          key === this.initializeKey ? withAdvertisement(m, this.o.advertisement) : m,
        );
      } catch (error) {
        this.unanswered(key, 'unstored');
        this.o.metrics?.outcomeUnknown(OutcomeUnknownReason.answerUnstored);
        throw error;
      }
      this.host.used();
      this.host.send({ type: 'request.settled', requestKey: key });
      return;
    }
    // Registers the standalone stream with the machine so a cursor into it is recognised.
    if (
      route.stream === STANDALONE_STREAM &&
      !this.host.actor.getSnapshot().context.streams[STANDALONE_STREAM]
    ) {
      await this.decided(() => this.host.send({ type: 'standalone.used' }));
    }
    // A log that numbers appends in call order lets the sender go on while this is stored (write-behind.ts).
    if (!this.o.log.ordersAppends) return this.streams.store(route.stream, m);
    // The group store does not wait for a slow reader (it would hold up every stream of the session):
    // the sender waits for its own stream's reader.
    this.writeBehind ??= new WriteBehind((stream, message) =>
      this.streams.storeAndOffer(stream, message as JsonRpcMessage),
    );
    await this.writeBehind.add(route.stream, m);
    await this.streams.paced(route.stream);
  }

  private async end(reason: 'expired' | 'terminated' | 'shutdown'): Promise<void> {
    if (this.host.ended) return;
    this.host.ended = true;
    this.cancelAnswerRetries();
    this.streams.closeAll(reason);
    try {
      await this.mcp?.close();
      const shared = this.o.log.shared;
      const facts = { sharedStore: shared !== undefined, endedElsewhere: this.host.endedElsewhere, reason };
      // Decided where the end was decided: the other instances holding this session end their copies too.
      if (shared && announcesEnd(facts)) await shared.announceEnded(this.o.id, facts.reason);
      // A group stored after the drop would re-create keys nobody reclaims.
      await this.writeBehind?.drain();
      await this.o.log.dropSession(this.o.id);
    } catch (error) {
      this.o.onError(error);
    }
    this.host.stop();
    this.o.onEnded(this.o.id);
  }

  /** Durable log: end every response without `event: close`; clients resume against the next process. */
  private release(): void {
    this.host.ended = true;
    this.cancelAnswerRetries();
    this.host.released = true;
    this.streams.closeAll();
    void this.mcp?.close().catch(this.o.onError);
    this.host.stop();
    this.o.onEnded(this.o.id);
  }
}
