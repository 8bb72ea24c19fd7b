import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import { type Actor, createActor, type InspectionEvent, type Observer } from 'xstate';
import { ADVERTISEMENT_CAPABILITY } from '../../machines/advertisement.js';
import { outcomeUnknownError } from '../../machines/client/ledger.js';
import { JsonRpcCode, OutcomeUnknownReason } from '../../machines/codes.js';
import { formatEventId, parseEventId, STANDALONE_STREAM } from '../../machines/event-id.js';
import {
  idFromKey,
  isRequest,
  isResponse,
  type JsonRpcMessage,
  type JsonRpcRequest,
  requestKey,
} from '../../machines/jsonrpc.js';
import {
  DEFAULT_SERVER_LIMITS,
  type LimitRefusal,
  type ServerLimits,
  tooManyOpenRequests,
} from '../../machines/server/limits.js';
import { interruptedRequests, RESUME_STATUS, type StreamWindow } from '../../machines/server/retention.js';
import { cancelledRequest, routeInbound, tagRequestId } from '../../machines/server/routing.js';
import {
  ownsSession,
  type ServerSessionEmitted,
  type ServerSessionEvent,
  serverSessionMachine,
  sharedFacts,
  type UnansweredCause,
} from '../../machines/server/session.machine.js';
import type { ServerAdvertisement } from '../../machines/validity.js';
import type { ServerMetrics } from '../metrics/server.js';
import { Attachment } from './attachment.js';
import type { EventLog, SharedSessionStore } from './event-log.js';
import { errorReply, type Reply, sessionNotFound } from './reply.js';
import { SessionTransport } from './session-transport.js';
import { SleepingMachine } from './sleeping-machine.js';
import { closeFrame, primingFrame, type SseSink } from './sse.js';

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
  /** A persisted machine snapshot: this session is being restored by a new process. */
  readonly snapshot?: unknown;
  /** Shared store: the version of the stored record `snapshot` came from (0: a new session). */
  readonly version?: number;
  /** Shared store: read attached streams this often too, in case a change report went missing. */
  readonly pollMs?: number;
  /** Records resumes, detaches, ended sessions (src/metrics). */
  readonly metrics?: ServerMetrics;
  /** `maxOpenRequestStreamsPerSession` and the `Retry-After` of its refusal. Default: no bound. */
  readonly limits?: Pick<ServerLimits, 'maxOpenRequestStreamsPerSession' | 'retryAfterSeconds'>;
}

/**
 * One live session: its machine decides, its SDK server computes, its log stores, its attachments write.
 * Every server-to-client message is appended to the log before any socket sees it.
 */
export class RuntimeSession {
  /** The session machine; it sleeps while the session is idle (src/server/sleeping-machine.ts). */
  private readonly host: SleepingMachine;
  readonly transport: SessionTransport;
  private mcp: McpServerLike | undefined;
  /**
   * Streams attached here, and requests running here (request key → stream). Each map exists only while
   * it holds something: two empty Maps are ~400 bytes, a tenth of an idle session.
   */
  private attachedHere: Map<number, Attachment> | undefined;
  /** Requests still running: request key → stream. Routes the SDK's answers and related notifications. */
  private runningHere: Map<string, number> | undefined;
  private initializeKey: string | undefined;
  private ended = false;
  private get attachments(): ReadonlyMap<number, Attachment> {
    return this.attachedHere ?? NOTHING;
  }

  private get running(): ReadonlyMap<string, number> {
    return this.runningHere ?? NOTHING;
  }

  /** Shared store only: the stored record's version this machine reflects. */
  private version: number;
  /** Shared store only: decisions of this session on this instance, one at a time. */
  private turn: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: RuntimeSessionOptions) {
    this.transport = new SessionTransport(o.id, (m, opts) => this.outbound(m, opts));
    this.version = o.version ?? 0;
    this.host = new SleepingMachine((snapshot) => this.spawn(snapshot), o.snapshot);
  }

  /**
   * The session machine, for inspection. Replaced when a newer snapshot is adopted from a shared store,
   * and when a sleeping session wakes.
   */
  get actor(): Actor<typeof serverSessionMachine> {
    return this.machine;
  }

  /** The machine, woken first if the session sleeps. */
  private get machine(): Actor<typeof serverSessionMachine> {
    return this.host.actor;
  }

  /** Called by the server's sweep: an idle session sleeps; one asleep past its TTL wakes to expire. */
  sweep(now: number, idleForMs: number): void {
    if (this.ended) return;
    this.host.sweep(now, idleForMs, this.o.idleTtlMs, this.busyHere);
  }

  get sleeping(): boolean {
    return this.host.sleeping;
  }

  get id(): string {
    return this.o.id;
  }

  private get shared(): SharedSessionStore | undefined {
    return this.o.log.shared;
  }

  private spawn(snapshot: unknown): Actor<typeof serverSessionMachine> {
    const o = this.o;
    const actor = createActor(serverSessionMachine, {
      input: {
        sessionId: o.id,
        epoch: o.epoch,
        idleTtlMs: o.idleTtlMs,
        principal: o.principal,
        sharedStore: o.log.shared !== undefined,
        maxInFlight: o.limits?.maxOpenRequestStreamsPerSession,
      },
      ...(snapshot ? { snapshot: snapshot as never } : {}),
      inspect: o.inspect,
    });
    actor.on('session.ended', (e) => void this.end(e.reason));
    // Counted where the end was decided, not again by every instance that ends its copy.
    actor.on('session.ended', (e) => {
      if (!this.endedElsewhere) o.metrics?.sessionEnded(o.id, e.reason);
    });
    actor.on('session.released', () => this.release());
    actor.on('expiry.due', () => void this.checkExpiry());
    actor.on('decision.unanswered', (e) => void this.giveUp(e.requestKey, e.stream, e.answer));
    actor.start();
    return actor;
  }

  /**
   * Shared store: another instance moved the session on; adopt its snapshot. What is attached and
   * running here is this instance's own fact, so it is restated to the new machine.
   */
  private adopt(snapshot: unknown, version: number): void {
    this.host.replace(snapshot);
    this.version = version;
    this.send({
      type: 'session.synced',
      attached: this.attachments.size,
      running: Object.fromEntries(this.running),
    });
  }

  /** Shared store: brings the machine up to the stored record. False when the session is gone. */
  private async sync(): Promise<boolean> {
    const shared = this.shared;
    if (!shared || this.ended) return !this.ended;
    if ((await shared.version(this.o.id)) === this.version) return true;
    const stored = await shared.load(this.o.id);
    // A new session is stored by its first commit (its initialize request).
    if (!stored && this.version === 0) return true;
    if (!stored) {
      this.gone('terminated');
      return false;
    }
    if (stored.version !== this.version) this.adopt(stored.record.snapshot, stored.version);
    return true;
  }

  /**
   * Asks the machine. With a shared store the decision is made on the newest stored record and, when it
   * changed what every instance must see (a request id admitted, a stream numbered), written back over
   * exactly the version it was made on; when another instance wrote first, the decision is made again on
   * theirs. Decisions of one session on one instance take turns, so they never conflict with each other.
   */
  private decide<T extends ServerSessionEmitted['type']>(event: ServerSessionEvent, type: T) {
    return this.decideWith(() => this.ask(event, type));
  }

  private async decideWith<R>(act: () => R): Promise<R> {
    const shared = this.shared;
    if (!shared) return act();
    const run = this.turn.then(async () => {
      for (let attempt = 0; attempt < 32; attempt++) {
        await this.sync();
        const before = this.version;
        const facts = sharedFacts(this.machine.getSnapshot());
        const answer = act();
        if (this.ended || sharedFacts(this.machine.getSnapshot()) === facts) {
          if (!this.ended) await shared.touch([this.o.id]);
          return answer;
        }
        if (await shared.commit(this.record(), before)) {
          this.version = before + 1;
          return answer;
        }
        // Another instance wrote first: this decision is discarded with the machine it was made on.
        this.version = -1;
      }
      throw new Error(`session ${this.o.id}: the shared store kept changing under every decision`);
    });
    this.turn = run.catch(() => {});
    return run;
  }

  private record() {
    return {
      id: this.o.id,
      epoch: this.o.epoch,
      principal: this.o.principal,
      initialize: this.o.initialize as JsonRpcMessage,
      snapshot: this.host.persisted(),
    };
  }

  /** Shared store: the idle TTL ran out here; the machine decides on how long it was idle everywhere. */
  private async checkExpiry(): Promise<void> {
    try {
      const idleMs = await this.shared?.idleFor(this.o.id);
      if (this.ended) return;
      if (idleMs === undefined) return this.gone('expired');
      // Used elsewhere since: its idle clock here restarts from then, so a sleeping copy does not wake to
      // ask again at every sweep.
      this.host.usedAt(Date.now() - idleMs);
      this.send({ type: 'expiry.checked', idleMs });
    } catch (error) {
      this.o.onError(error);
      // Unable to ask: assume it is in use somewhere and look again after a full TTL.
      if (!this.ended) this.send({ type: 'expiry.checked', idleMs: 0 });
    }
  }

  /** Another instance ended the session (its change report, or its record is gone). */
  gone(reason: 'expired' | 'terminated'): void {
    if (this.ended) return;
    this.endedElsewhere = true;
    this.send({ type: 'session.gone', reason });
  }

  private endedElsewhere = false;
  /** Ended because the process stops with a durable log: the session lives on for the next process. */
  private released = false;

  /** Something changed this session's stream on another instance (or a poll): attached readers look. */
  wake(stream: number): void {
    this.attachments.get(stream)?.wake();
  }

  /** Shared store: what is attached or running here keeps the session alive on every instance. */
  get busyHere(): boolean {
    return this.attachments.size > 0 || this.running.size > 0;
  }

  attachedStreams(): ReadonlySet<number> {
    return new Set(this.attachments.keys());
  }

  /** Request streams attached here whose call runs on another instance: their owners, to check. */
  foreignOwners(): string[] {
    const { streams } = this.machine.getSnapshot().context;
    const owners: string[] = [];
    for (const n of this.attachments.keys()) {
      const owner = streams[n]?.owner;
      if (owner !== undefined && owner !== this.shared?.instanceId) owners.push(owner);
    }
    return owners;
  }

  /**
   * The calls whose instance is gone (restarted, or its lease ran out) and whose answer was never
   * written get an outcome-unknown answer. `appendFinal` makes it exactly one answer per call even when
   * the instance running it is merely slow, or several instances reap at once.
   */
  async reapAbandoned(
    isOwnerAlive: (owner: string | undefined) => boolean,
    only?: ReadonlySet<number>,
  ): Promise<void> {
    const { streams } = this.machine.getSnapshot().context;
    const candidates = only
      ? Object.fromEntries(Object.entries(streams).filter(([n]) => only.has(Number(n))))
      : streams;
    const windows = new Map<number, StreamWindow | undefined>();
    for (const n of Object.keys(candidates).map(Number)) {
      windows.set(n, await this.o.log.window(this.o.id, n));
    }
    const restarted = this.shared === undefined;
    const reason = restarted ? OutcomeUnknownReason.serverRestarted : OutcomeUnknownReason.instanceLost;
    for (const { stream, requestKey } of interruptedRequests(
      candidates,
      (n) => windows.get(n),
      isOwnerAlive,
    )) {
      if (await this.storeFinal(stream, outcomeUnknownError(idFromKey(requestKey), reason))) {
        this.o.metrics?.outcomeUnknown(reason);
      }
    }
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
    this.send({ type: 'session.restored' });
    await this.connect(server);
    const init = this.o.initialize as JsonRpcRequest;
    this.transport.receive({ ...init, id: `mcp-continuity-restore-${init.id}` } as JSONRPCMessage, {});
    this.transport.receive({ jsonrpc: '2.0', method: 'notifications/initialized' } as JSONRPCMessage, {});
    // Alone (a restart), every old call is abandoned; sharing, only those whose instance is gone.
    const shared = this.shared;
    let alive: ReadonlySet<string> = new Set();
    if (shared) {
      const { streams } = this.machine.getSnapshot().context;
      const owners = Object.values(streams).flatMap((r) => (r.owner ? [r.owner] : []));
      alive = await shared.alive(owners);
    }
    await this.reapAbandoned((owner) => owner !== undefined && alive.has(owner));
  }

  /**
   * Writes the session to a durable log's registry (a no-op on the memory log). With a shared store a
   * new session is committed as version 1; later changes are committed by `decide`.
   */
  async persist(): Promise<void> {
    const shared = this.shared;
    if (shared) {
      if (this.version === 0 && (await shared.commit(this.record(), 0))) this.version = 1;
      return;
    }
    await this.o.log.registry?.save(this.record());
  }

  /** Events after the session ended (here, or released by a stopping process) have no machine to go to. */
  private send(event: ServerSessionEvent): void {
    if (!this.ended) this.machine.send(event);
  }

  private ask<T extends ServerSessionEmitted['type']>(event: ServerSessionEvent, type: T) {
    if (this.ended) throw new SessionUnavailableError(this.released);
    let answer: Extract<ServerSessionEmitted, { type: T }> | undefined;
    const sub = this.machine.on(type, (e) => {
      answer = e as Extract<ServerSessionEmitted, { type: T }>;
    });
    this.machine.send(event);
    sub.unsubscribe();
    if (!answer) throw new Error(`session machine gave no ${type} for ${event.type}`);
    return answer;
  }

  private idOf(stream: number, seq: number): string {
    return formatEventId({ epoch: this.o.epoch, stream, seq });
  }

  private notFound(): Reply {
    return sessionNotFound();
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
      { type: 'request.received', requestKey: key, principal, owner: this.shared?.instanceId },
      'decision.request',
    );
    if (decision.kind === 'unknown-session') return this.notFound();
    if (decision.kind === 'limited') {
      return this.limited(tooManyOpenRequests(this.o.limits ?? DEFAULT_SERVER_LIMITS));
    }
    this.host.used();
    this.send({ type: 'session.activity' });
    if (decision.kind === 'duplicate') return this.resume(this.idOf(decision.stream, 0), principal);
    const stream = decision.stream;
    this.runningHere ??= new Map();
    this.runningHere.set(key, stream);
    if (message.method === 'initialize') this.initializeKey = key;
    try {
      await this.o.log.openStream(this.o.id, stream);
      if (!this.shared || this.version === 0) await this.persist();
    } catch (error) {
      // Admitted but never handed to the SDK server: the machine settles it, or it would pin the session.
      this.unanswered(key, 'failed');
      throw error;
    }
    return {
      kind: 'sse',
      headers: this.o.headers,
      start: (sink) => {
        sink.write(primingFrame(this.idOf(stream, 0), this.o.retryMs));
        this.attach(stream, sink, 0);
        const cause = this.transport.receiveRequest(message as JSONRPCMessage, extra);
        if (cause) this.unanswered(key, cause);
      },
    };
  }

  private limited(refusal: LimitRefusal): Reply {
    this.o.metrics?.requestLimited(refusal.reason, refusal.status);
    return errorReply(refusal.status, refusal.code, refusal.message, undefined, {
      ...this.o.headers,
      'Retry-After': String(refusal.retryAfterSeconds),
    });
  }

  /** The SDK server will not answer this request: the machine decides what becomes of it. */
  private unanswered(key: string, cause: UnansweredCause): void {
    this.send({ type: 'request.unanswered', requestKey: key, cause });
  }

  /**
   * The machine settled a request the SDK server will not answer: nothing is routed to it any more, its
   * stream gets the machine's answer (if any) and ends.
   */
  private async giveUp(
    key: string,
    stream: number,
    answer: { code: number; message: string } | undefined,
  ): Promise<void> {
    this.runningHere?.delete(key);
    if (this.runningHere?.size === 0) this.runningHere = undefined;
    try {
      if (answer) {
        await this.storeFinal(stream, { jsonrpc: '2.0', id: idFromKey(key), error: answer });
        return;
      }
    } catch {
      // The log failed as well: the client resumes, or its call times out; the session is free either way.
    }
    this.attachments.get(stream)?.finish();
  }

  /** A POSTed notification or response: hand it to the SDK server, answer 202. */
  async accept(
    message: JsonRpcMessage,
    principal: string | undefined,
    extra: MessageExtraInfo,
  ): Promise<Reply> {
    const { accepted } = await this.decide({ type: 'message.received', principal }, 'decision.message');
    if (!accepted) return this.notFound();
    this.host.used();
    this.send({ type: 'session.activity' });
    const shared = this.shared;
    const route = shared
      ? routeInbound(message, shared.instanceId, (key) => this.ownerOfRequest(key))
      : ({ kind: 'here', message } as const);
    if (route.kind === 'here') this.deliver(route.message, extra);
    else await shared?.forward(route.instance, this.o.id, route.message);
    return { kind: 'empty', status: 202, headers: this.o.headers };
  }

  /** A client message POSTed to another instance that belongs to this one's copy of the session. */
  receiveForwarded(message: JsonRpcMessage): void {
    if (this.ended) return;
    this.deliver(message, {});
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
    const { streams, requests } = this.machine.getSnapshot().context;
    const stream = requests[key];
    return stream === undefined ? undefined : streams[stream]?.owner;
  }

  /** GET + Last-Event-ID: the machine answers the cursor; a replay continues live. */
  async resume(lastEventId: string, principal: string | undefined): Promise<Reply> {
    const cursor = parseEventId(lastEventId);
    if (!(await this.sync())) return this.notFound();
    if (cursor && cursor.epoch === this.o.epoch && this.shared) await this.reapIfOwnerGone(cursor.stream);
    const window =
      cursor && cursor.epoch === this.o.epoch ? await this.o.log.window(this.o.id, cursor.stream) : undefined;
    const { answer } = await this.decide(
      { type: 'resume.requested', lastEventId, window, principal },
      'decision.resume',
    );
    this.o.metrics?.resumeAnswered(this.o.id, answer, window);
    if (answer.kind === 'unknown-session') return this.notFound();
    this.host.used();
    this.send({ type: 'session.activity' });
    if (answer.kind !== 'replay') {
      const message =
        answer.kind === 'gone'
          ? `Cannot resume: ${answer.reason} (${answer.lostCount ?? 'unknown'} events lost)`
          : `Cannot resume: ${answer.reason}`;
      return errorReply(
        RESUME_STATUS[answer.kind],
        JsonRpcCode.RESUME_REJECTED,
        message,
        answer,
        this.o.headers,
      );
    }
    return {
      kind: 'sse',
      headers: this.o.headers,
      start: async (sink) => {
        sink.write(`retry: ${this.o.retryMs}\n\n`);
        await this.attach(answer.stream, sink, answer.afterSeq).replay();
      },
    };
  }

  /** GET without a cursor: the standalone stream, from its start the first time, else from its head. */
  async standalone(principal: string | undefined): Promise<Reply> {
    const { decision } = await this.decide({ type: 'standalone.requested', principal }, 'decision.attach');
    if (decision.kind === 'unknown-session') return this.notFound();
    this.host.used();
    this.send({ type: 'session.activity' });
    await this.o.log.openStream(this.o.id, STANDALONE_STREAM);
    if (!this.shared) await this.persist();
    const from =
      decision.from === 'start' ? 0 : ((await this.o.log.window(this.o.id, STANDALONE_STREAM))?.head ?? 0);
    return {
      kind: 'sse',
      headers: this.o.headers,
      start: async (sink) => {
        sink.write(primingFrame(this.idOf(STANDALONE_STREAM, from), this.o.retryMs));
        await this.attach(STANDALONE_STREAM, sink, from).replay();
      },
    };
  }

  async delete(principal: string | undefined): Promise<Reply> {
    const { accepted } = await this.decide({ type: 'session.delete', principal }, 'decision.delete');
    return accepted ? { kind: 'empty', status: 200 } : this.notFound();
  }

  /** The process is stopping; the machine decides whether the session ends or outlives it. */
  stop(): void {
    this.send({ type: 'server.stopping', durableLog: this.o.log.durable });
  }

  /** Shared store: a client resumes a call running elsewhere; if that instance is gone, answer for it. */
  private async reapIfOwnerGone(stream: number): Promise<void> {
    const owner = this.machine.getSnapshot().context.streams[stream]?.owner;
    if (!this.shared || owner === undefined || owner === this.shared.instanceId) return;
    const alive = await this.shared.alive([owner]);
    if (!alive.has(owner)) await this.reapAbandoned(() => false, new Set([stream]));
  }

  private attach(stream: number, sink: SseSink, lastSent: number): Attachment {
    const previous = this.attachments.get(stream);
    if (previous && previous.sink !== sink) previous.sink.end();
    const attachment = new Attachment(
      sink,
      this.o.log,
      this.o.id,
      this.o.epoch,
      stream,
      lastSent,
      this.o.heartbeatMs,
      this.shared ? (this.o.pollMs ?? 1000) : 0,
    );
    this.attachedHere ??= new Map();
    this.attachedHere.set(stream, attachment);
    this.send({ type: 'stream.attached' });
    sink.onClose(() => {
      if (this.attachedHere?.get(stream) === attachment) this.attachedHere.delete(stream);
      if (this.attachedHere?.size === 0) this.attachedHere = undefined;
      if (this.ended) return;
      this.host.used();
      this.send({ type: 'stream.detached' });
      this.o.metrics?.streamDetached(this.o.id, stream);
    });
    return attachment;
  }

  /** The SDK server sends: store in the log, then offer to the attached stream, if any. */
  private async outbound(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    let m = message as JsonRpcMessage;
    // Sharing the session, this instance's request ids must not collide with another instance's, and
    // the answer must find its way back here (machines/server/routing.ts).
    if (this.shared && isRequest(m)) m = { ...m, id: tagRequestId(this.shared.instanceId, m.id) };
    if (isResponse(m)) {
      const key = m.id === null ? undefined : requestKey(m.id);
      const stream = key === undefined ? undefined : this.running.get(key);
      if (key === undefined || stream === undefined) return;
      this.runningHere?.delete(key);
      if (this.runningHere?.size === 0) this.runningHere = undefined;
      try {
        // Undefined when another instance already answered for it (it thought this one was gone).
        await this.storeFinal(stream, key === this.initializeKey ? this.advertiseIn(m) : m);
      } catch (error) {
        this.unanswered(key, 'failed');
        throw error;
      }
      this.host.used();
      this.send({ type: 'request.settled', requestKey: key });
      return;
    }
    const related = options?.relatedRequestId;
    let stream = related === undefined ? undefined : this.running.get(requestKey(related));
    if (stream === undefined) {
      stream = STANDALONE_STREAM;
      // Registers the standalone stream with the machine so a cursor into it is recognised.
      if (!this.machine.getSnapshot().context.streams[STANDALONE_STREAM]) {
        await this.decideWith(() => this.send({ type: 'standalone.used' }));
      }
    }
    await this.store(stream, m);
  }

  /**
   * Stores, offers to the attached stream, then waits while its reader is far behind (`whenWritable`): a
   * tool awaiting its sends goes at its reader's pace instead of outrunning it until the reader is cut.
   */
  private async store(stream: number, message: JsonRpcMessage): Promise<void> {
    const seq = await this.o.log.append(this.o.id, stream, message);
    const attachment = this.attachments.get(stream);
    attachment?.offer({ seq, message });
    await attachment?.sink.whenWritable?.();
  }

  /** A call's answer: written once, then the stream is finished. False when one was written already. */
  private async storeFinal(stream: number, message: JsonRpcMessage): Promise<boolean> {
    const seq = await this.o.log.appendFinal(this.o.id, stream, message);
    const attachment = this.attachments.get(stream);
    if (seq !== undefined) attachment?.offer({ seq, message });
    attachment?.finish();
    return seq !== undefined;
  }

  /** The initialize result also carries the retention promise, as an experimental capability. */
  private advertiseIn(m: JsonRpcMessage): JsonRpcMessage {
    if (!('result' in m)) return m;
    const capabilities = (m.result.capabilities ?? {}) as Record<string, unknown>;
    const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
    return {
      ...m,
      result: {
        ...m.result,
        capabilities: {
          ...capabilities,
          experimental: { ...experimental, [ADVERTISEMENT_CAPABILITY]: this.o.advertisement },
        },
      },
    };
  }

  private async end(reason: string): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    for (const a of this.attachments.values()) {
      a.sink.write(closeFrame(reason));
      a.sink.end();
    }
    this.attachedHere = undefined;
    try {
      await this.mcp?.close();
      // Decided here: the other instances holding this session end their copies too.
      if (this.shared && !this.endedElsewhere && reason !== 'shutdown') {
        await this.shared.announceEnded(this.o.id, reason as 'expired' | 'terminated');
      }
      await this.o.log.dropSession(this.o.id);
    } catch (error) {
      this.o.onError(error);
    }
    this.host.stop();
    this.o.onEnded(this.o.id);
  }

  /** Durable log: end every response without `event: close`; clients resume against the next process. */
  private release(): void {
    this.ended = true;
    this.released = true;
    for (const a of this.attachments.values()) a.sink.end();
    this.attachedHere = undefined;
    void this.mcp?.close().catch(this.o.onError);
    this.host.stop();
    this.o.onEnded(this.o.id);
  }
}

const NOTHING: ReadonlyMap<never, never> = new Map<never, never>();

/**
 * A request reached a session that ended while it was on its way: 404 if the session is gone, 503 if this
 * process released it (it is stopping; the session lives on in a durable log and another process serves it).
 */
export class SessionUnavailableError extends Error {
  constructor(readonly released: boolean) {
    super(released ? 'the session was released by a stopping server' : 'the session has ended');
    this.name = 'SessionUnavailableError';
  }
}
