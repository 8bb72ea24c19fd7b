import { type Actor, createActor } from 'xstate';
import { JsonRpcCode, OutcomeUnknownReason } from '../../machines/codes.js';
import { formatEventId, parseEventId, STANDALONE_STREAM } from '../../machines/event-id.js';
import {
  isRequest,
  type JsonRpcMessage,
  type JsonRpcRequest,
  type RequestId,
  requestKey,
} from '../../machines/jsonrpc.js';
import {
  appendToWindow,
  EMPTY_WINDOW,
  evictWindow,
  finishWindow,
  RESUME_STATUS,
  type ResumeAnswer,
  type RetentionPolicy,
  type StreamWindow,
} from '../../machines/server/retention.js';
import { type ServerSessionEmitted, serverSessionMachine } from '../../machines/server/session.machine.js';
import type { ServerAdvertisement } from '../../machines/validity.js';
import type { VirtualClock } from './clock.js';
import type { SimConnection, SimNetwork } from './network.js';
import type { Recorder } from './recorder.js';
import { TOOLS, type ToolName } from './tools.js';

/**
 * A simulated MCP Streamable HTTP server: the server session machine decides, this file does what the
 * runtime will do (store then send, replay, heartbeats) on the simulated network and virtual clock.
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
}

interface StreamLog {
  window: StreamWindow;
  readonly messages: Map<number, JsonRpcMessage>;
  readonly streamKey: string;
  readonly callKey?: string;
  readonly requestId?: RequestId;
  conn?: SimConnection;
}

interface SimSession {
  readonly id: string;
  actor: Actor<typeof serverSessionMachine>;
  readonly epoch: string;
  readonly logs: Map<number, StreamLog>;
  /** Requests running in this incarnation: request key → stream. */
  readonly running: Map<string, number>;
  standaloneCount: number;
}

type Machine = typeof serverSessionMachine;

export class SimServer {
  readonly sessions = new Map<string, SimSession>();
  private incarnation = 0;
  private sessionCount = 0;
  /** Requests to answer with 503 before serving normally again. */
  failNext = 0;

  constructor(
    private readonly clock: VirtualClock,
    private readonly net: SimNetwork,
    private readonly recorder: Recorder,
    private readonly config: SimServerConfig,
    private readonly machine: Machine = serverSessionMachine,
  ) {
    this.startHeartbeat();
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
    return !s || s.actor.getSnapshot().matches('ended');
  }

  serve(conn: SimConnection): void {
    const ex = conn.exchange;
    if (this.failNext > 0) {
      this.failNext--;
      conn.send({ type: 'http.response', status: 503 });
      return;
    }
    if (
      ex.method === 'POST' &&
      ex.body &&
      isRequest(ex.body) &&
      ex.body.method === 'initialize' &&
      !ex.sessionId
    ) {
      this.initialize(conn, ex.body);
      return;
    }
    const session = ex.sessionId === undefined ? undefined : this.sessions.get(ex.sessionId);
    if (!session) {
      conn.send({ type: 'http.response', status: ex.sessionId === undefined ? 400 : 404 });
      return;
    }
    session.actor.send({ type: 'session.activity' });
    if (ex.method === 'POST') {
      if (ex.body && isRequest(ex.body)) this.request(session, conn, ex.body);
      else conn.send({ type: 'http.response', status: 202 });
      return;
    }
    if (ex.lastEventId !== undefined) this.resume(session, conn, ex.lastEventId);
    else this.attachStandalone(session, conn);
  }

  private initialize(conn: SimConnection, request: JsonRpcRequest): void {
    const id = `s${++this.sessionCount}`;
    const epoch = `e${this.sessionCount}x${this.incarnation}`;
    const actor = createActor(this.machine, {
      clock: this.clock,
      input: { sessionId: id, epoch, idleTtlMs: this.config.idleTtlMs },
    });
    const session: SimSession = { id, actor, epoch, logs: new Map(), running: new Map(), standaloneCount: 0 };
    this.watchEnd(session);
    actor.start();
    this.sessions.set(id, session);
    this.recorder.sessionsCreated.push(id);
    this.request(session, conn, request);
  }

  private watchEnd(session: SimSession): void {
    session.actor.on('session.ended', (e) => {
      for (const log of session.logs.values()) {
        const c = log.conn;
        if (!c) continue;
        log.conn = undefined;
        c.send({ type: 'sse.event', event: 'close', data: e.reason });
        c.send({ type: 'net.ended' });
      }
    });
  }

  private ask<T extends ServerSessionEmitted['type']>(
    session: SimSession,
    event: Parameters<SimSession['actor']['send']>[0],
    type: T,
  ): Extract<ServerSessionEmitted, { type: T }> {
    let answer: Extract<ServerSessionEmitted, { type: T }> | undefined;
    const sub = session.actor.on(type, (e) => {
      answer = e as Extract<ServerSessionEmitted, { type: T }>;
    });
    session.actor.send(event);
    sub.unsubscribe();
    if (!answer) throw new Error(`server session machine gave no ${type} for ${event.type}`);
    return answer;
  }

  private request(session: SimSession, conn: SimConnection, request: JsonRpcRequest): void {
    // A server that does not de-duplicate admits every POST as new: it is keyed per connection.
    const key = this.config.dedupe ? requestKey(request.id) : `${requestKey(request.id)}@${conn.id}`;
    const { decision } = this.ask(session, { type: 'request.received', requestKey: key }, 'decision.request');
    if (decision.kind === 'unknown-session') {
      conn.send({ type: 'http.response', status: 404 });
      return;
    }
    if (decision.kind === 'limited') {
      // Not reached: the simulated sessions have no bound on running requests (no `maxInFlight`).
      conn.send({ type: 'http.response', status: 429 });
      return;
    }
    if (decision.kind === 'duplicate') {
      // Never run twice: answer with the original stream, replayed from its start.
      this.resume(session, conn, formatEventId({ epoch: session.epoch, stream: decision.stream, seq: 0 }));
      return;
    }
    const callKey = (request.params?.arguments as { callKey?: string } | undefined)?.callKey;
    session.logs.set(decision.stream, {
      window: EMPTY_WINDOW,
      messages: new Map(),
      streamKey: requestKey(request.id),
      callKey,
      requestId: request.id,
    });
    session.running.set(key, decision.stream);
    this.recorder.countRun(session.id, requestKey(request.id), decision.stream);
    this.openStream(session, conn, decision.stream, 0);
    this.execute(session, decision.stream, request, key);
  }

  private openStream(session: SimSession, conn: SimConnection, stream: number, primeSeq: number): void {
    conn.send({ type: 'http.stream', sessionId: session.id, advertisement: this.advertisement });
    conn.send({ type: 'sse.retry', ms: this.config.retryMs });
    conn.send({
      type: 'sse.event',
      id: formatEventId({ epoch: session.epoch, stream, seq: primeSeq }),
      data: '',
    });
    this.attach(session, stream, conn);
  }

  private attach(session: SimSession, stream: number, conn: SimConnection): void {
    const log = session.logs.get(stream);
    if (!log) return;
    const previous = log.conn;
    if (previous && previous !== conn) {
      log.conn = undefined;
      previous.send({ type: 'net.ended' });
    }
    log.conn = conn;
    session.actor.send({ type: 'stream.attached' });
    conn.onGone = () => {
      if (log.conn === conn) log.conn = undefined;
      session.actor.send({ type: 'stream.detached' });
    };
  }

  private resume(session: SimSession, conn: SimConnection, lastEventId: string): void {
    const cursor = parseEventId(lastEventId);
    const log = cursor && cursor.epoch === session.epoch ? session.logs.get(cursor.stream) : undefined;
    if (log) this.evict(log);
    const { answer } = this.ask(
      session,
      { type: 'resume.requested', lastEventId, window: log?.window },
      'decision.resume',
    );
    if (answer.kind !== 'replay') {
      conn.send({ type: 'http.response', status: RESUME_STATUS[answer.kind], body: resumeErrorBody(answer) });
      return;
    }
    const target = session.logs.get(answer.stream);
    if (!target) {
      conn.send({ type: 'http.response', status: 500 });
      return;
    }
    conn.send({ type: 'http.stream', sessionId: session.id, advertisement: this.advertisement });
    conn.send({ type: 'sse.retry', ms: this.config.retryMs });
    const from = Math.max(answer.afterSeq + 1 - this.config.replayOverlap, target.window.oldest);
    for (let seq = from; seq <= target.window.head; seq++) {
      const message = target.messages.get(seq);
      if (message) conn.send({ type: 'sse.event', id: this.idOf(session, answer.stream, seq), message });
    }
    if (target.window.finished) conn.send({ type: 'net.ended' });
    else this.attach(session, answer.stream, conn);
  }

  private attachStandalone(session: SimSession, conn: SimConnection): void {
    const { decision } = this.ask(session, { type: 'standalone.requested' }, 'decision.attach');
    if (decision.kind === 'unknown-session') {
      conn.send({ type: 'http.response', status: 404 });
      return;
    }
    if (!session.logs.has(STANDALONE_STREAM)) {
      session.logs.set(STANDALONE_STREAM, {
        window: EMPTY_WINDOW,
        messages: new Map(),
        streamKey: 'standalone',
      });
    }
    const log = session.logs.get(STANDALONE_STREAM) as StreamLog;
    const from = decision.from === 'start' ? 0 : log.window.head;
    if (decision.from === 'head') this.recorder.headAttaches.push({ sessionId: session.id, head: from });
    this.openStream(session, conn, STANDALONE_STREAM, from);
    for (let seq = Math.max(from + 1, log.window.oldest); seq <= log.window.head; seq++) {
      const message = log.messages.get(seq);
      if (message) conn.send({ type: 'sse.event', id: this.idOf(session, STANDALONE_STREAM, seq), message });
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
  append(session: SimSession, stream: number, message: JsonRpcMessage, uid: string): void {
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
    log.conn?.send({ type: 'sse.event', id: this.idOf(session, stream, seq), message });
  }

  /** The response was appended: the stream is complete, the request no longer in flight. */
  finish(session: SimSession, stream: number, key: string): void {
    const log = session.logs.get(stream);
    if (!log) return;
    log.window = finishWindow(log.window);
    session.running.delete(key);
    session.actor.send({ type: 'request.settled', requestKey: key });
    const c = log.conn;
    log.conn = undefined;
    c?.send({ type: 'net.ended' });
  }

  private execute(session: SimSession, stream: number, request: JsonRpcRequest, key: string): void {
    const incarnation = this.incarnation;
    const alive = () => this.incarnation === incarnation && this.sessions.get(session.id) === session;
    const respond = (result: Record<string, unknown>) => {
      if (!alive() || !session.running.has(key)) return;
      const uid = `${session.id}/${stream}/response`;
      this.append(
        session,
        stream,
        { jsonrpc: '2.0', id: request.id, result: { ...result, _meta: { uid } } },
        uid,
      );
      this.finish(session, stream, key);
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
        if (!alive() || !session.running.has(key)) return;
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
      () => respond({ content: [{ type: 'text', text: `${name} done` }] }),
      tool.durationMs,
    );
  }

  /** DELETE: the session machine decides; attached streams get `event: close` (see watchEnd). */
  delete(sessionId: string): void {
    this.sessions.get(sessionId)?.actor.send({ type: 'session.delete' });
  }

  /** A server-initiated notification on the standalone stream of every session that opened one. */
  notifyStandalone(): void {
    for (const session of this.sessions.values()) {
      if (!session.logs.has(STANDALONE_STREAM)) continue;
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
   * sessions and their events survive, and each interrupted request gets an outcome-unknown answer.
   */
  restart(durable: boolean): void {
    for (const conn of this.net.list()) conn.reset();
    this.incarnation++;
    if (!durable) {
      for (const s of this.sessions.values()) s.actor.stop();
      this.sessions.clear();
      this.startHeartbeat();
      return;
    }
    for (const session of this.sessions.values()) {
      const snapshot = session.actor.getPersistedSnapshot();
      session.actor.stop();
      session.actor = createActor(this.machine, {
        clock: this.clock,
        snapshot,
        input: { sessionId: session.id, epoch: session.epoch, idleTtlMs: this.config.idleTtlMs },
      });
      this.watchEnd(session);
      session.actor.start();
      for (const [key, stream] of [...session.running]) {
        const uid = `${session.id}/${stream}/response`;
        const id = session.logs.get(stream)?.requestId ?? null;
        this.append(
          session,
          stream,
          {
            jsonrpc: '2.0',
            id,
            error: {
              code: JsonRpcCode.OUTCOME_UNKNOWN,
              message: 'interrupted by a server restart',
              data: { reason: OutcomeUnknownReason.serverRestarted, uid },
            },
          },
          uid,
        );
        this.finish(session, stream, key);
      }
      // Restored `after` timers are not re-armed (XState): activity re-enters idle and arms the TTL.
      session.actor.send({ type: 'session.activity' });
    }
    this.startHeartbeat();
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

function resumeErrorBody(answer: Exclude<ResumeAnswer, { kind: 'replay' }>): unknown {
  const data = answer.kind === 'unknown-session' ? { reason: 'unknown_session' } : answer;
  return {
    jsonrpc: '2.0',
    id: null,
    error: { code: JsonRpcCode.RESUME_REJECTED, message: 'cannot resume', data },
  };
}
