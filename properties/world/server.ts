import { type Actor, createActor } from 'xstate';
import { formatEventId, STANDALONE_STREAM } from '../../machines/event-id.js';
import {
  type JsonRpcMessage,
  type JsonRpcRequest,
  type RequestId,
  requestKey,
} from '../../machines/jsonrpc.js';
import { type Admission, admitBody, admitHttp } from '../../machines/server/admission.js';
import { routeCall } from '../../machines/server/call-routing.js';
import {
  logSweepPeriodMs,
  sleptFor,
  sweepPeriodMs,
  sweepVerdict,
  unstoredAnswerRetryMs,
} from '../../machines/server/deadlines.js';
import { askMachine, executePlan, type PlanIo } from '../../machines/server/execute-plan.js';
import { abandonedCalls, isOwnerAlive } from '../../machines/server/instances.js';
import { DEFAULT_SERVER_LIMITS } from '../../machines/server/limits.js';
import {
  deleteAnswer,
  type ErrorReply,
  errorBody,
  SESSION_NOT_FOUND,
} from '../../machines/server/replies.js';
import type { ResumeAnswer } from '../../machines/server/retention.js';
import {
  appendToWindow,
  EMPTY_WINDOW,
  evictWindow,
  finishWindow,
  forgottenBySweep,
  type RetentionPolicy,
  type StreamWindow,
} from '../../machines/server/retention.js';
import {
  type AttachDecision,
  ownsSession,
  type RequestDecision,
  type ServerSessionEmitted,
  type ServerSessionEvent,
  serverSessionMachine,
} from '../../machines/server/session.machine.js';
import {
  cursorStream,
  planMessage,
  planRequest,
  planResume,
  planStandalone,
  replayStep,
  type SessionPlan,
} from '../../machines/server/session-commands.js';
import { SleepingMachine } from '../../machines/server/sleeping-machine.js';
import type { ServerAdvertisement } from '../../machines/validity.js';
import type { VirtualClock } from './clock.js';
import type { SimConnection, SimNetwork } from './network.js';
import type { Recorder } from './recorder.js';
import { resultText, TOOLS, type ToolName } from './tools.js';

/**
 * A simulated MCP Streamable HTTP server. Every decision is the runtime's: the same admission, call
 * routing, session machine, session commands (machines/server/session-commands.ts), replay rule and
 * restart reaping (machines/server/instances.ts); this file only executes them on the simulated
 * network, an in-memory log and the virtual clock, and plays the SDK server's part with simulated tools.
 */
export interface SimServerConfig {
  readonly retention: RetentionPolicy;
  readonly idleTtlMs: number;
  /** 0: no heartbeat comments. */
  readonly heartbeatMs: number;
  readonly retryMs: number;
  /** Request ids are remembered and never run twice (and the advertisement says so). */
  readonly dedupe: boolean;
  /** A resume starts this many events before the cursor (the client already has them). */
  readonly replayOverlap: number;
  /**
   * The server offers no standalone stream: it answers a GET without a cursor 404 while it serves the
   * session's POSTs, as a server that routes only POST does (the conformance suite's; issue 22).
   */
  readonly standaloneNotFound?: boolean;
  /**
   * A finished response is left open, not ended (the SDK server keeps a stream open after a replay, a
   * proxy may hold a connection): only the client's drain deadline lets the connection go.
   */
  readonly lingers?: boolean;
}

/** A decision the simulated server took, for whoever counts what the model reaches (coverage). */
export type ServerObservation =
  | { readonly kind: 'request'; readonly decision: RequestDecision }
  | { readonly kind: 'attach'; readonly decision: AttachDecision }
  | { readonly kind: 'resume'; readonly answer: ResumeAnswer }
  /** A server without de-duplication ran a request id a second time. */
  | { readonly kind: 'ran-again' }
  /** The sweep slept or woke a session (machines/server/deadlines.ts `sweepVerdict`). */
  | { readonly kind: 'sweep'; readonly verdict: 'sleep' | 'wake' }
  /** A reader's read-back found events after its cursor evicted (`lostWhileAttached`): its response ended. */
  | { readonly kind: 'read-back-lost' };

interface StreamLog {
  window: StreamWindow;
  readonly messages: Map<number, JsonRpcMessage>;
  readonly streamKey: string;
  readonly callKey?: string;
  readonly requestId?: RequestId;
  conn?: SimConnection;
  /**
   * The reader whose read-back of the log is still to come: as at run time (src/server/attachment.ts),
   * the read happens after the attach, and what is appended meanwhile is written by the read, not live.
   */
  readingBack?: SimConnection;
}

type Machine = typeof serverSessionMachine;
type SessionActor = Actor<Machine>;

/**
 * The decisions of machines/ the simulated server executes, as the runtime does (src/server). A mutant
 * (properties/mutants.ts) swaps one for a deliberately wrong one.
 */
export interface ServerRules {
  /** When the sweep sleeps or wakes a session (machines/server/sleeping-machine.ts). */
  readonly sweepVerdict: typeof sweepVerdict;
  /** How long a woken session was idle, for its machine (`session.woken`). */
  readonly sleptFor: typeof sleptFor;
  /** Which streams a log's sweep forgets (src/server/memory-event-log.ts). */
  readonly forgotten: typeof forgottenBySweep;
  /** What a DELETE is answered (src/server/session.ts). */
  readonly deleteAnswer: typeof deleteAnswer;
  /** What a reader's read-back writes, and whether its response ends (src/server/attachment.ts). */
  readonly replayStep: typeof replayStep;
  /** Whether a caller may use a session: the handler's look-up (src/server/handler.ts `session`). */
  readonly ownsSession: typeof ownsSession;
  /** When an unanswered request's answer the log refused is stored again (src/server/session.ts `giveUp`). */
  readonly unstoredAnswerRetryMs: typeof unstoredAnswerRetryMs;
}

export const RUNTIME_RULES: ServerRules = {
  sweepVerdict,
  sleptFor,
  forgotten: forgottenBySweep,
  deleteAnswer,
  replayStep,
  ownsSession,
  unstoredAnswerRetryMs,
};

/**
 * Who the application's own requests come from: every session is created for it. Another principal (a
 * stranger who learned a session id) names itself on its exchange.
 */
export const OWNER = 'app';

/**
 * One simulated session, hosted as the runtime hosts one: its machine in the runtime's
 * `SleepingMachine` (machines/server/sleeping-machine.ts), asleep while idle (only its persisted
 * snapshot), woken by anything that reaches for its machine and told how long it slept.
 */
export class SimSession {
  standaloneCount = 0;
  /** A GET without a cursor was answered before in this session. */
  attachedBefore?: boolean;
  private readonly machine: SleepingMachine;

  constructor(
    readonly id: string,
    readonly epoch: string,
    readonly logs: Map<number, StreamLog>,
    spawn: (snapshot: unknown) => SessionActor,
    clock: VirtualClock,
    rules: ServerRules,
    private readonly observe: (observation: ServerObservation) => void,
  ) {
    this.machine = new SleepingMachine(spawn, undefined, () => clock.now(), rules);
  }

  /** The machine, woken first if the session sleeps. */
  get actor(): SessionActor {
    return this.machine.actor;
  }

  get sleeping(): boolean {
    return this.machine.sleeping;
  }

  /** When the session was last used: its idle clock. */
  get lastUsed(): number {
    return this.machine.lastUsedAt;
  }

  /** The session was used just now (src/server/session-host.ts `used`). */
  used(): void {
    this.machine.used();
  }

  /** The machine's state, without waking it (a sleeping session reads as its persisted snapshot). */
  peek(): Pick<ReturnType<SessionActor['getSnapshot']>, 'value' | 'context'> {
    return (this.machine.sleeping ? this.machine.persisted() : this.machine.actor.getSnapshot()) as never;
  }

  /** The sweep came by (src/server/handler.ts): the runtime's sleeping machine sleeps, wakes or stays. */
  sweep(now: number, idleForMs: number, idleTtlMs: number): void {
    const snapshot = this.machine.sleeping ? undefined : this.machine.actor.getSnapshot();
    if (snapshot?.matches('ended')) return;
    const c = snapshot?.context;
    // As the runtime's host counts it: what is attached or running here (a sleeping machine has none).
    const busy = c !== undefined && (c.attached > 0 || Object.keys(c.running ?? {}).length > 0);
    const verdict = this.machine.sweep(now, idleForMs, idleTtlMs, busy);
    if (verdict !== 'stay') this.observe({ kind: 'sweep', verdict });
  }

  /** A new process restores the session from its persisted snapshot (a durable restart). */
  restore(): void {
    this.machine.replace(this.machine.persisted());
    this.machine.used();
  }

  stop(): void {
    this.machine.stop();
  }
}

/** What the real client transport sends with every call; the world's exchanges carry only what varies. */
const CLIENT_HEADERS = { accept: 'application/json, text/event-stream', host: '127.0.0.1', origin: null };
const POLICY = { maxBodyBytes: 4 * 1024 * 1024 };
/** A log read takes a moment (at run time it is awaited): what is appended or evicted meanwhile, it finds. */
const READ_BACK_MS = 1;

export class SimServer {
  readonly sessions = new Map<string, SimSession>();
  private incarnation = 0;
  private sessionCount = 0;
  /** Requests to answer with 503 before serving normally again. */
  failNext = 0;
  /** How many of the next writes of a call's answer the log refuses (the store is down for them). */
  failWrites = 0;
  /** The status those requests get: 503 unless a schedule says otherwise (429, 502, a refusal such as 403). */
  failStatus = 503;

  constructor(
    private readonly clock: VirtualClock,
    private readonly net: SimNetwork,
    private readonly recorder: Recorder,
    private readonly config: SimServerConfig,
    private readonly machine: Machine = serverSessionMachine,
    private readonly observe: (observation: ServerObservation) => void = () => undefined,
    private readonly rules: ServerRules = RUNTIME_RULES,
  ) {
    this.startTimers();
  }

  get advertisement(): ServerAdvertisement {
    return {
      retentionMs: this.config.retention.retentionMs,
      maxEventsPerStream: this.config.retention.maxEventsPerStream,
      idleTtlMs: this.config.idleTtlMs,
      gapSignalling: true,
      duplicateRequestProtection: this.config.dedupe,
    };
  }

  /** True when the server no longer has this session (404 from now on). */
  isGone(sessionId: string): boolean {
    const s = this.sessions.get(sessionId);
    // A sleeping session is held (its machine has not ended it): asking must not wake it.
    return !s || (!s.sleeping && s.actor.getSnapshot().matches('ended'));
  }

  /** One call: admitted, routed and answered as the runtime's handler does (src/server/handler.ts). */
  serve(conn: SimConnection): void {
    const ex = conn.exchange;
    if (this.failNext > 0) {
      this.failNext--;
      // A fault the schedule asked for earlier lands now: on whatever request comes (an initialize too).
      const now = this.clock.now();
      this.recorder.faultSpans.push({ from: now, until: now });
      conn.send({ type: 'http.response', status: this.failStatus });
      return;
    }
    const sessionId = ex.sessionId ?? null;
    const headers = admitHttp(
      {
        ...CLIENT_HEADERS,
        method: ex.method,
        contentType: ex.method === 'POST' ? 'application/json' : null,
        protocolVersion: ex.protocolVersion ?? null,
        sessionId,
        localBind: true,
      },
      POLICY,
    );
    if (!headers.ok) {
      this.refuse(conn, headers);
      return;
    }
    let posted: ReturnType<typeof admitBody> | undefined;
    if (ex.method === 'POST') {
      posted = admitBody(ex.body, true, sessionId, DEFAULT_SERVER_LIMITS);
      if ('ok' in posted) {
        this.refuse(conn, posted);
        return;
      }
    }
    const kind = posted && !('ok' in posted) ? posted.kind : undefined;
    const principal = ex.principal ?? OWNER;
    // As the runtime's handler looks a session up: another principal's session is not found.
    const held = sessionId === null ? undefined : this.sessions.get(sessionId);
    const session = held && this.rules.ownsSession(OWNER, principal) ? held : undefined;
    const route = routeCall({
      method: ex.method,
      posted: kind,
      sessionFound: session !== undefined,
      lastEventId: ex.lastEventId ?? null,
    });
    switch (route.kind) {
      case 'create-session':
        this.initialize(conn, ex.body as JsonRpcRequest);
        return;
      case 'not-found':
        this.reply(conn, SESSION_NOT_FOUND);
        return;
      case 'request':
        this.request(session as SimSession, conn, ex.body as JsonRpcRequest);
        return;
      case 'accept': {
        const { accepted } = this.ask(
          session as SimSession,
          { type: 'message.received' },
          'decision.message',
        );
        this.execute(session as SimSession, conn, planMessage(accepted));
        return;
      }
      case 'delete': {
        // The runtime's answer (src/server/session.ts): 200 when the machine ended it, else 404.
        const answer = this.rules.deleteAnswer(this.terminate(session, principal));
        if ('kind' in answer) conn.send({ type: 'http.response', status: answer.status });
        else this.reply(conn, answer);
        return;
      }
      case 'standalone': {
        if (this.config.standaloneNotFound) {
          conn.send({ type: 'http.response', status: 404 });
          return;
        }
        const s = session as SimSession;
        const { decision } = this.ask(s, { type: 'standalone.requested' }, 'decision.attach');
        this.observe({ kind: 'attach', decision });
        this.noteHeadAttach(s, decision);
        this.execute(s, conn, planStandalone(decision, { sharedStore: false }));
        return;
      }
      case 'resume':
        this.resume(session as SimSession, conn, route.lastEventId);
        return;
    }
  }

  /**
   * The open finding excused in checks.ts: events a GET without a cursor never offers, nor reports lost: a
   * later GET starts at the head. (A first GET at the head is not excused: that is a wrong decision.) A
   * first GET whose start was evicted is not excused either: its read-back finds the loss
   * (`lostWhileAttached`), the response ends, and the client's resume from the priming cursor is told the
   * exact count (410), as at run time.
   */
  private noteHeadAttach(session: SimSession, decision: AttachDecision): void {
    if (decision.kind !== 'attach') return;
    const window = session.logs.get(STANDALONE_STREAM)?.window ?? EMPTY_WINDOW;
    if (decision.from === 'head' && session.attachedBefore)
      this.recorder.headAttaches.push({ sessionId: session.id, head: window.head });
    session.attachedBefore = true;
  }

  private refuse(conn: SimConnection, refusal: Exclude<Admission, { ok: true }>): void {
    this.reply(conn, refusal);
  }

  private reply(conn: SimConnection, error: ErrorReply): void {
    conn.send({
      type: 'http.response',
      status: error.status,
      body: errorBody(error.code, error.message, error.data),
    });
  }

  private initialize(conn: SimConnection, request: JsonRpcRequest): void {
    const id = `s${++this.sessionCount}`;
    const epoch = `e${this.sessionCount}x${this.incarnation}`;
    const logs = new Map<number, StreamLog>();
    const spawn = (snapshot: unknown): SessionActor => {
      const actor = createActor(this.machine, {
        clock: this.clock,
        ...(snapshot ? { snapshot: snapshot as never } : {}),
        input: { sessionId: id, epoch, idleTtlMs: this.config.idleTtlMs, principal: OWNER },
      });
      actor.on('session.ended', (e) => {
        // What was attached or running when it ended, counted before watchEnd closes the streams.
        const running = Object.keys(
          (actor.getSnapshot().context as { running?: object }).running ?? {},
        ).length;
        this.recorder.sessionEnded({
          sessionId: id,
          at: this.clock.now(),
          cause: e.reason,
          inUse: [...logs.values()].filter((l) => l.conn).length + running,
          unusedForMs: this.clock.now() - (this.sessions.get(id)?.lastUsed ?? this.clock.now()),
          idleTtlMs: this.config.idleTtlMs,
        });
      });
      this.watchEnd(actor, logs);
      // As the runtime's `giveUp`: the machine's answer for an unanswered request is written to its
      // stream when the log takes it; otherwise the stream just ends and the client resumes.
      actor.on('decision.unanswered', (e) => this.storeUnanswered(id, logs, e.stream, e.answer, 0));
      actor.start();
      return actor;
    };
    const session = new SimSession(id, epoch, logs, spawn, this.clock, this.rules, this.observe);
    this.sessions.set(id, session);
    this.recorder.sessionsCreated.push(id);
    this.request(session, conn, request);
  }

  /**
   * An ended session's streams get `event: close`, then end; a released one's (the process stops with a
   * durable log: src/server/session.ts `release`) end without it, so clients resume against the next.
   */
  private watchEnd(actor: SessionActor, logs: Map<number, StreamLog>): void {
    const endAll = (reason?: string) => {
      for (const log of logs.values()) {
        const c = log.conn;
        if (!c) continue;
        log.conn = undefined;
        if (reason !== undefined) c.send({ type: 'sse.event', event: 'close', data: reason });
        c.send({ type: 'net.ended' });
      }
    };
    actor.on('session.ended', (e) => endAll(e.reason));
    actor.on('session.released', () => endAll());
  }

  private ask<T extends ServerSessionEmitted['type']>(
    session: SimSession,
    event: ServerSessionEvent,
    type: T,
  ): Extract<ServerSessionEmitted, { type: T }> {
    return askMachine(session.actor, event, type);
  }

  private request(session: SimSession, conn: SimConnection, request: JsonRpcRequest): void {
    // A server that does not de-duplicate admits every POST as new: it is keyed per connection.
    const key = this.config.dedupe ? requestKey(request.id) : `${requestKey(request.id)}@${conn.id}`;
    const { decision } = this.ask(session, { type: 'request.received', requestKey: key }, 'decision.request');
    this.observe({ kind: 'request', decision });
    // The simulated sessions have no bound on running requests (no `maxInFlight`).
    this.execute(
      session,
      conn,
      planRequest(decision, key, { sharedStore: false }, DEFAULT_SERVER_LIMITS),
      request,
    );
  }

  private resume(session: SimSession, conn: SimConnection, lastEventId: string): void {
    const stream = cursorStream(lastEventId, session.epoch);
    const log = stream === undefined ? undefined : session.logs.get(stream);
    if (log) this.evict(log);
    const { answer } = this.ask(
      session,
      { type: 'resume.requested', lastEventId, window: log?.window },
      'decision.resume',
    );
    this.observe({ kind: 'resume', answer });
    this.execute(session, conn, planResume(answer));
  }

  /** Executes a plan as src/server/session.ts does: its bookkeeping, then the error or the open stream. */
  /**
   * Executes a plan with the simulated I/O, through the runtime's executor (machines/server/execute-plan.ts):
   * the network, the in-memory log, and the simulated SDK server's tools.
   */
  private execute(
    session: SimSession,
    conn: SimConnection,
    plan: SessionPlan,
    request?: JsonRpcRequest,
  ): void {
    const io: PlanIo<void, SimConnection> = {
      epoch: session.epoch,
      recordActivity: () => {
        session.used();
        session.actor.send({ type: 'session.activity' });
      },
      runHere: (_key, stream) => {
        // The machine's `running` is the bookkeeping, as at run time.
        const runs = this.recorder.countRun(session.id, requestKey((request as JsonRpcRequest).id), stream);
        if (runs > 1) this.observe({ kind: 'ran-again' });
      },
      openStream: (stream) => this.openStream(session, stream, request),
      // The simulated log is its own registry: a durable restart keeps `sessions`.
      persist: () => undefined,
      unanswered: (key, cause) => session.actor.send({ type: 'request.unanswered', requestKey: key, cause }),
      head: (stream) => session.logs.get(stream)?.window.head ?? 0,
      reply: (error) => this.reply(conn, error),
      accepted: () => conn.send({ type: 'http.response', status: 202 }),
      resume: (lastEventId) => this.resume(session, conn, lastEventId),
      open: (start) => {
        conn.send({ type: 'http.stream', sessionId: session.id, advertisement: this.advertisement });
        start(conn);
      },
      prime: (c, stream, seq) => {
        c.send({ type: 'sse.retry', ms: this.config.retryMs });
        c.send({ type: 'sse.event', id: this.idOf(session, stream, seq), data: '' });
      },
      retry: (c) => c.send({ type: 'sse.retry', ms: this.config.retryMs }),
      readerOf: (stream) => session.logs.get(stream)?.conn,
      endReader: (stream, c) => {
        const log = session.logs.get(stream);
        if (log?.conn === c) log.conn = undefined;
        c.send({ type: 'net.ended' });
      },
      attach: (c, stream, afterSeq, readBack) => this.attach(session, c, stream, afterSeq, readBack),
      execute: (key) => {
        const stream = runningIn(session)[key] as number;
        this.run(session, stream, request as JsonRpcRequest, key);
      },
    };
    executePlan(plan, io);
  }

  private openStream(session: SimSession, stream: number, request?: JsonRpcRequest): void {
    if (session.logs.has(stream)) return;
    const standalone = stream === STANDALONE_STREAM;
    session.logs.set(stream, {
      window: EMPTY_WINDOW,
      messages: new Map(),
      streamKey: standalone || !request ? 'standalone' : requestKey(request.id),
      callKey: standalone
        ? undefined
        : (request?.params?.arguments as { callKey?: string } | undefined)?.callKey,
      requestId: standalone ? undefined : request?.id,
    });
  }

  /** The connection becomes the stream's reader (the previous one was ended), then reads back the log. */
  private attach(
    session: SimSession,
    conn: SimConnection,
    stream: number,
    afterSeq: number,
    readBack: boolean,
  ): void {
    const log = session.logs.get(stream);
    if (!log) return;
    log.conn = conn;
    session.actor.send({ type: 'stream.attached' });
    conn.onGone = () => {
      if (log.conn === conn) log.conn = undefined;
      if (log.readingBack === conn) log.readingBack = undefined;
      if (session.actor.getSnapshot().matches('ended')) return;
      session.used();
      session.actor.send({ type: 'stream.detached' });
    };
    if (!readBack) return;
    // The log is read after the attach, as at run time: events appended or evicted meanwhile are what
    // the read finds (a reader whose cursor was evicted meanwhile ends: `lostWhileAttached`).
    log.readingBack = conn;
    this.clock.setTimeout(() => this.readBack(session, log, conn, stream, afterSeq), READ_BACK_MS);
  }

  private readBack(
    session: SimSession,
    log: StreamLog,
    conn: SimConnection,
    stream: number,
    afterSeq: number,
  ): void {
    if (log.readingBack !== conn) return;
    log.readingBack = undefined;
    if (log.conn !== conn) return;
    this.evict(log);
    // This server may start a replay before the cursor (the client already has those events), never
    // before what it still holds, and never after the cursor.
    const lastSent = Math.min(
      afterSeq,
      Math.max(afterSeq - this.config.replayOverlap, log.window.oldest - 1),
    );
    const events: Array<{ seq: number; message: JsonRpcMessage }> = [];
    for (let seq = log.window.oldest; seq <= log.window.head; seq++) {
      const message = log.messages.get(seq);
      if (message) events.push({ seq, message });
    }
    const step = this.rules.replayStep(log.window, events, lastSent);
    for (const e of step.write)
      conn.send({ type: 'sse.event', id: this.idOf(session, stream, e.seq), message: e.message });
    if (step.end === 'lost') this.observe({ kind: 'read-back-lost' });
    if (step.end) {
      log.conn = undefined;
      conn.send({ type: 'net.ended' });
    }
  }

  private idOf(session: SimSession, stream: number, seq: number): string {
    return formatEventId({ epoch: session.epoch, stream, seq });
  }

  private evict(log: StreamLog): void {
    const before = log.window.oldest;
    log.window = evictWindow(log.window, this.clock.now(), this.config.retention);
    for (let seq = before; seq < log.window.oldest; seq++) log.messages.delete(seq);
  }

  /** Store, then send: the event is in the log before any socket sees it. */
  private append(session: SimSession, stream: number, message: JsonRpcMessage, uid: string): void {
    const log = session.logs.get(stream);
    if (!log || session.actor.getSnapshot().matches('ended')) return;
    const before = log.window.oldest;
    const { window, seq } = appendToWindow(log.window, this.clock.now(), this.config.retention);
    log.window = window;
    for (let s = before; s < window.oldest; s++) log.messages.delete(s);
    log.messages.set(seq, message);
    this.recorder.appended.push({
      uid,
      sessionId: session.id,
      stream,
      seq,
      callKey: log.callKey,
      streamKey: log.streamKey,
    });
    // A reader whose read-back is still to come gets this event from that read.
    if (log.conn !== log.readingBack)
      log.conn?.send({ type: 'sse.event', id: this.idOf(session, stream, seq), message });
  }

  /** A call's answer: appended once, then the stream is finished and its reader ends. */
  private appendFinal(session: SimSession, stream: number, message: JsonRpcMessage, uid: string): boolean {
    const log = session.logs.get(stream);
    if (!log || log.window.finished) return false;
    this.append(session, stream, message, uid);
    log.window = finishWindow(log.window);
    const c = log.conn;
    // The read-back to come writes the answer and ends the response.
    if (c !== undefined && c === log.readingBack) return true;
    log.conn = undefined;
    if (c && this.config.lingers) c.lingering = true;
    else c?.send({ type: 'net.ended' });
    return true;
  }

  /**
   * As the runtime's `giveUp`: the machine's answer for an unanswered request is written to its stream
   * when the log takes it; otherwise the stream ends (the client resumes) and the answer is stored again
   * when `unstoredAnswerRetryMs` says, while this incarnation still has the session.
   */
  private storeUnanswered(
    id: string,
    logs: Map<number, StreamLog>,
    stream: number,
    answer: { code: number; message: string; data?: { reason: string } } | undefined,
    attempt: number,
  ): void {
    const log = logs.get(stream);
    if (answer && this.failWrites <= 0) {
      const uid = `${id}/${stream}/response`;
      const error = { ...answer, data: { ...answer.data, uid } };
      this.appendFinal(
        this.sessions.get(id) as SimSession,
        stream,
        { jsonrpc: '2.0', id: log?.requestId ?? null, error } as JsonRpcMessage,
        uid,
      );
      return;
    }
    if (answer && this.failWrites > 0) this.failWrites--;
    const c = log?.conn;
    if (log && c) {
      log.conn = undefined;
      c.send({ type: 'net.ended' });
    }
    const session = this.sessions.get(id);
    const incarnation = this.incarnation;
    const ended = () => this.incarnation !== incarnation || this.sessions.get(id) !== session;
    const retryMs = answer ? this.rules.unstoredAnswerRetryMs(attempt, ended()) : undefined;
    if (retryMs !== undefined)
      this.clock.setTimeout(() => {
        if (!ended()) this.storeUnanswered(id, logs, stream, answer, attempt + 1);
      }, retryMs);
  }

  /** The simulated SDK server runs the request; its answer settles it in the machine. */
  private run(session: SimSession, stream: number, request: JsonRpcRequest, key: string): void {
    const incarnation = this.incarnation;
    const alive = () => this.incarnation === incarnation && this.sessions.get(session.id) === session;
    const respond = (result: Record<string, unknown>) => {
      if (!alive() || runningIn(session)[key] === undefined) return;
      if (this.failWrites > 0 && request.method === 'tools/call') {
        // The tool ran; the log refuses its answer (the runtime's `outbound` catch).
        this.failWrites--;
        const callKey = (request.params?.arguments as { callKey?: string } | undefined)?.callKey;
        if (callKey !== undefined) this.recorder.unstoredAnswers.add(callKey);
        // A fault while the call runs: it was not made in quiet times.
        this.recorder.faultsEndAt = Math.max(this.recorder.faultsEndAt, this.clock.now());
        session.actor.send({ type: 'request.unanswered', requestKey: key, cause: 'unstored' });
        return;
      }
      const uid = `${session.id}/${stream}/response`;
      this.appendFinal(
        session,
        stream,
        { jsonrpc: '2.0', id: request.id, result: { ...result, _meta: { uid } } },
        uid,
      );
      session.used();
      session.actor.send({ type: 'request.settled', requestKey: key });
    };
    if (request.method === 'initialize') {
      respond({
        protocolVersion: '2025-11-25',
        capabilities: { tools: {} },
        serverInfo: { name: 'sim', version: '0' },
      });
      return;
    }
    if (request.method === 'tools/list') {
      respond({ tools: Object.entries(TOOLS).map(([name, t]) => ({ name, annotations: t.annotations })) });
      return;
    }
    if (request.method !== 'tools/call') {
      respond({});
      return;
    }
    const name = request.params?.name as ToolName;
    const tool = TOOLS[name];
    const callKey = String((request.params?.arguments as { callKey?: string } | undefined)?.callKey);
    this.recorder.countExecution(callKey);
    if (tool.sideEffect === 'once') this.recorder.countSideEffect(callKey);
    for (let n = 1; n <= tool.notifications; n++) {
      this.clock.setTimeout(() => {
        if (!alive() || runningIn(session)[key] === undefined) return;
        const uid = `${session.id}/${stream}/${n}`;
        this.append(
          session,
          stream,
          { jsonrpc: '2.0', method: 'notifications/progress', params: { callKey, n, uid } },
          uid,
        );
      }, tool.stepMs * n);
    }
    this.clock.setTimeout(
      () => respond({ content: [{ type: 'text', text: resultText(name) }] }),
      tool.durationMs,
    );
  }

  /**
   * DELETE: the session machine decides (true: it ended the session); attached streams get
   * `event: close` (see watchEnd). A session this server does not have was not ended by it.
   */
  private terminate(session: SimSession | undefined, principal: string): boolean {
    return session
      ? this.ask(session, { type: 'session.delete', principal }, 'decision.delete').accepted
      : false;
  }

  /** A server-initiated notification on the standalone stream of every session that opened one. */
  notifyStandalone(): void {
    // A server without a standalone stream has nowhere to send it.
    if (this.config.standaloneNotFound) return;
    for (const session of this.sessions.values()) {
      if (session.actor.getSnapshot().matches('ended')) continue;
      // Before the client's first GET the message is kept for it, as the runtime does (`standalone.used`).
      if (!session.logs.has(STANDALONE_STREAM)) {
        this.openStream(session, STANDALONE_STREAM);
        session.actor.send({ type: 'standalone.used' });
      }
      const n = ++session.standaloneCount;
      const uid = `${session.id}/0/${n}`;
      this.append(
        session,
        STANDALONE_STREAM,
        { jsonrpc: '2.0', method: 'notifications/message', params: { n, uid } },
        uid,
      );
    }
  }

  /**
   * The process restarts. Every connection resets and running tools die with it. With a durable log the
   * sessions and their events survive; each is restored as the runtime restores it (`session.restored`)
   * and every call whose answer was never written gets the runtime's outcome-unknown answer.
   */
  restart(durable: boolean, graceful = false): void {
    // A graceful stop tells every session, as the runtime's `close()` does: without a durable log each
    // ends (attached streams get `event: close`); with one each is released (streams end without it).
    if (graceful)
      for (const s of this.sessions.values()) s.actor.send({ type: 'server.stopping', durableLog: durable });
    for (const conn of this.net.list()) conn.reset();
    this.incarnation++;
    if (!durable) {
      for (const s of this.sessions.values()) s.stop();
      this.sessions.clear();
      this.startTimers();
      return;
    }
    for (const session of this.sessions.values()) {
      session.restore();
      session.actor.send({ type: 'session.restored' });
      const { streams } = session.actor.getSnapshot().context;
      const abandoned = abandonedCalls(
        streams,
        (n) => session.logs.get(n)?.window,
        (owner) => isOwnerAlive(owner, undefined, new Set()),
        false,
      );
      for (const call of abandoned) {
        const uid = `${session.id}/${call.stream}/response`;
        const answer = call.answer as { error: { data?: object } };
        // The world tags every message with a uid, and keys requests per connection without de-duplication.
        const id = session.logs.get(call.stream)?.requestId ?? null;
        const tagged = {
          ...call.answer,
          id,
          error: { ...answer.error, data: { ...answer.error.data, uid } },
        };
        this.appendFinal(session, call.stream, tagged as JsonRpcMessage, uid);
      }
    }
    this.startTimers();
  }

  /** This incarnation's periodic work, at the runtime's periods (machines/server/deadlines.ts). */
  private startTimers(): void {
    this.startHeartbeat();
    const incarnation = this.incarnation;
    const every = (periodMs: number, fn: () => void) => {
      const tick = () => {
        if (this.incarnation !== incarnation) return;
        fn();
        this.clock.setTimeout(tick, periodMs);
      };
      this.clock.setTimeout(tick, periodMs);
    };
    // The session sweep: idle sessions sleep, sleeping ones past their TTL wake to expire.
    const sweepMs = sweepPeriodMs(this.config.idleTtlMs);
    every(sweepMs, () => {
      for (const s of this.sessions.values()) s.sweep(this.clock.now(), sweepMs, this.config.idleTtlMs);
    });
    // The memory log's sweep: every stream aged, finished ones with nothing left forgotten.
    every(logSweepPeriodMs(this.config.retention.retentionMs, undefined), () => {
      for (const s of this.sessions.values()) {
        for (const [n, log] of s.logs) {
          this.evict(log);
          if (this.rules.forgotten(log.window)) s.logs.delete(n);
        }
      }
    });
  }

  private startHeartbeat(): void {
    if (this.config.heartbeatMs <= 0) return;
    const incarnation = this.incarnation;
    const beat = () => {
      if (this.incarnation !== incarnation) return;
      for (const session of this.sessions.values()) {
        for (const log of session.logs.values()) log.conn?.send({ type: 'sse.activity' });
      }
      this.clock.setTimeout(beat, this.config.heartbeatMs);
    };
    this.clock.setTimeout(beat, this.config.heartbeatMs);
  }
}

/** The requests running on the session's server, as its machine counts them. */
const runningIn = (session: SimSession): Readonly<Record<string, number>> =>
  session.actor.getSnapshot().context.running ?? {};
