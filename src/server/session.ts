import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import { type Actor, createActor } from 'xstate';
import { ADVERTISEMENT_CAPABILITY } from '../../machines/advertisement.js';
import { outcomeUnknownError } from '../../machines/client/ledger.js';
import { JsonRpcCode, OutcomeUnknownReason } from '../../machines/codes.js';
import { formatEventId, parseEventId, STANDALONE_STREAM } from '../../machines/event-id.js';
import {
  idFromKey,
  isResponse,
  type JsonRpcMessage,
  type JsonRpcRequest,
  requestKey,
} from '../../machines/jsonrpc.js';
import { interruptedRequests, RESUME_STATUS, type StreamWindow } from '../../machines/server/retention.js';
import {
  type ServerSessionEmitted,
  type ServerSessionEvent,
  serverSessionMachine,
} from '../../machines/server/session.machine.js';
import type { ServerAdvertisement } from '../../machines/validity.js';
import { Attachment } from './attachment.js';
import type { EventLog } from './event-log.js';
import { errorReply, type Reply } from './reply.js';
import { SessionTransport } from './session-transport.js';
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
  /** The client's initialize request (kept with the session on a durable log). */
  readonly initialize: JsonRpcMessage;
  /** A persisted machine snapshot: this session is being restored by a new process. */
  readonly snapshot?: unknown;
}

/**
 * One live session: its machine decides, its SDK server computes, its log stores, its attachments write.
 * Every server-to-client message is appended to the log before any socket sees it.
 */
export class RuntimeSession {
  readonly actor: Actor<typeof serverSessionMachine>;
  readonly transport: SessionTransport;
  private mcp: McpServerLike | undefined;
  private readonly attachments = new Map<number, Attachment>();
  /** Requests still running: request key → stream. Routes the SDK's answers and related notifications. */
  private readonly running = new Map<string, number>();
  private initializeKey: string | undefined;
  private ended = false;

  constructor(private readonly o: RuntimeSessionOptions) {
    this.transport = new SessionTransport(o.id, (m, opts) => this.outbound(m, opts));
    this.actor = createActor(serverSessionMachine, {
      input: { sessionId: o.id, epoch: o.epoch, idleTtlMs: o.idleTtlMs, principal: o.principal },
      ...(o.snapshot ? { snapshot: o.snapshot as never } : {}),
    });
    this.actor.on('session.ended', (e) => void this.end(e.reason));
    this.actor.on('session.released', () => this.release());
    this.actor.start();
  }

  get id(): string {
    return this.o.id;
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
    this.actor.send({ type: 'session.restored' });
    await this.connect(server);
    const init = this.o.initialize as JsonRpcRequest;
    this.transport.receive({ ...init, id: `mcp-continuity-restore-${init.id}` } as JSONRPCMessage, {});
    this.transport.receive({ jsonrpc: '2.0', method: 'notifications/initialized' } as JSONRPCMessage, {});
    const { streams } = this.actor.getSnapshot().context;
    const windows = new Map<number, StreamWindow | undefined>();
    for (const n of Object.keys(streams).map(Number)) windows.set(n, await this.o.log.window(this.o.id, n));
    for (const { stream, requestKey } of interruptedRequests(streams, (n) => windows.get(n))) {
      await this.store(
        stream,
        outcomeUnknownError(idFromKey(requestKey), OutcomeUnknownReason.serverRestarted),
      );
      await this.o.log.finish(this.o.id, stream);
    }
  }

  /** Writes the session to a durable log's registry (a no-op on the memory log). */
  async persist(): Promise<void> {
    await this.o.log.registry?.save({
      id: this.o.id,
      epoch: this.o.epoch,
      principal: this.o.principal,
      initialize: this.o.initialize,
      snapshot: this.actor.getPersistedSnapshot(),
    });
  }

  private ask<T extends ServerSessionEmitted['type']>(event: ServerSessionEvent, type: T) {
    let answer: Extract<ServerSessionEmitted, { type: T }> | undefined;
    const sub = this.actor.on(type, (e) => {
      answer = e as Extract<ServerSessionEmitted, { type: T }>;
    });
    this.actor.send(event);
    sub.unsubscribe();
    if (!answer) throw new Error(`session machine gave no ${type} for ${event.type}`);
    return answer;
  }

  private idOf(stream: number, seq: number): string {
    return formatEventId({ epoch: this.o.epoch, stream, seq });
  }

  private notFound(): Reply {
    return errorReply(404, JsonRpcCode.SESSION_NOT_FOUND, 'Session not found', undefined, {});
  }

  /** A POSTed request: run it once, answer on its own stream; a repeated id gets the original stream. */
  async request(
    message: JsonRpcRequest,
    principal: string | undefined,
    extra: MessageExtraInfo,
  ): Promise<Reply> {
    this.actor.send({ type: 'session.activity' });
    const key = requestKey(message.id);
    const { decision } = this.ask(
      { type: 'request.received', requestKey: key, principal },
      'decision.request',
    );
    if (decision.kind === 'unknown-session') return this.notFound();
    if (decision.kind === 'duplicate') return this.resume(this.idOf(decision.stream, 0), principal);
    const stream = decision.stream;
    this.running.set(key, stream);
    if (message.method === 'initialize') this.initializeKey = key;
    await this.o.log.openStream(this.o.id, stream);
    // At most once across a crash: the request id is durable before the SDK server sees the request.
    await this.persist();
    return {
      kind: 'sse',
      headers: this.o.headers,
      start: (sink) => {
        sink.write(primingFrame(this.idOf(stream, 0), this.o.retryMs));
        this.attach(stream, sink, 0).live();
        this.transport.receive(message as JSONRPCMessage, extra);
      },
    };
  }

  /** A POSTed notification or response: hand it to the SDK server, answer 202. */
  accept(message: JsonRpcMessage, principal: string | undefined, extra: MessageExtraInfo): Reply {
    const { accepted } = this.ask({ type: 'message.received', principal }, 'decision.message');
    if (!accepted) return this.notFound();
    this.actor.send({ type: 'session.activity' });
    this.transport.receive(message as JSONRPCMessage, extra);
    return { kind: 'empty', status: 202, headers: this.o.headers };
  }

  /** GET + Last-Event-ID: the machine answers the cursor; a replay continues live. */
  async resume(lastEventId: string, principal: string | undefined): Promise<Reply> {
    this.actor.send({ type: 'session.activity' });
    const cursor = parseEventId(lastEventId);
    const window =
      cursor && cursor.epoch === this.o.epoch ? await this.o.log.window(this.o.id, cursor.stream) : undefined;
    const { answer } = this.ask(
      { type: 'resume.requested', lastEventId, window, principal },
      'decision.resume',
    );
    if (answer.kind === 'unknown-session') return this.notFound();
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
        await this.attach(answer.stream, sink, answer.afterSeq).replay(this.o.log);
      },
    };
  }

  /** GET without a cursor: the standalone stream, from its start the first time, else from its head. */
  async standalone(principal: string | undefined): Promise<Reply> {
    this.actor.send({ type: 'session.activity' });
    const { decision } = this.ask({ type: 'standalone.requested', principal }, 'decision.attach');
    if (decision.kind === 'unknown-session') return this.notFound();
    await this.o.log.openStream(this.o.id, STANDALONE_STREAM);
    await this.persist();
    const from =
      decision.from === 'start' ? 0 : ((await this.o.log.window(this.o.id, STANDALONE_STREAM))?.head ?? 0);
    return {
      kind: 'sse',
      headers: this.o.headers,
      start: async (sink) => {
        sink.write(primingFrame(this.idOf(STANDALONE_STREAM, from), this.o.retryMs));
        await this.attach(STANDALONE_STREAM, sink, from).replay(this.o.log);
      },
    };
  }

  delete(principal: string | undefined): Reply {
    const { accepted } = this.ask({ type: 'session.delete', principal }, 'decision.delete');
    return accepted ? { kind: 'empty', status: 200 } : this.notFound();
  }

  /** The process is stopping; the machine decides whether the session ends or outlives it. */
  stop(): void {
    this.actor.send({ type: 'server.stopping', durableLog: this.o.log.durable });
  }

  private attach(stream: number, sink: SseSink, lastSent: number): Attachment {
    const previous = this.attachments.get(stream);
    if (previous && previous.sink !== sink) previous.sink.end();
    const attachment = new Attachment(sink, this.o.id, this.o.epoch, stream, lastSent, this.o.heartbeatMs);
    this.attachments.set(stream, attachment);
    this.actor.send({ type: 'stream.attached' });
    sink.onClose(() => {
      if (this.attachments.get(stream) === attachment) this.attachments.delete(stream);
      if (!this.ended) this.actor.send({ type: 'stream.detached' });
    });
    return attachment;
  }

  /** The SDK server sends: store in the log, then offer to the attached stream, if any. */
  private async outbound(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const m = message as JsonRpcMessage;
    if (isResponse(m)) {
      const key = m.id === null ? undefined : requestKey(m.id);
      const stream = key === undefined ? undefined : this.running.get(key);
      if (key === undefined || stream === undefined) return;
      this.running.delete(key);
      await this.store(stream, key === this.initializeKey ? this.advertiseIn(m) : m);
      await this.o.log.finish(this.o.id, stream);
      this.actor.send({ type: 'request.settled', requestKey: key });
      this.attachments.get(stream)?.finish();
      return;
    }
    const related = options?.relatedRequestId;
    let stream = related === undefined ? undefined : this.running.get(requestKey(related));
    if (stream === undefined) {
      stream = STANDALONE_STREAM;
      // Registers the standalone stream with the machine so a cursor into it is recognised.
      this.actor.send({ type: 'standalone.used' });
    }
    await this.store(stream, m);
  }

  private async store(stream: number, message: JsonRpcMessage): Promise<void> {
    const seq = await this.o.log.append(this.o.id, stream, message);
    this.attachments.get(stream)?.offer({ seq, message });
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
    this.attachments.clear();
    try {
      await this.mcp?.close();
      await this.o.log.dropSession(this.o.id);
    } catch (error) {
      this.o.onError(error);
    }
    this.actor.stop();
    this.o.onEnded(this.o.id);
  }

  /** Durable log: end every response without `event: close`; clients resume against the next process. */
  private release(): void {
    this.ended = true;
    for (const a of this.attachments.values()) a.sink.end();
    this.attachments.clear();
    void this.mcp?.close().catch(this.o.onError);
    this.actor.stop();
    this.o.onEnded(this.o.id);
  }
}
