import { type Actor, type AnyStateMachine, createActor } from 'xstate';
import type { IoEvent } from '../../machines/client/io.js';
import {
  CONTINUITY_ERROR_STATUS,
  type ContinuitySettings,
  memoKey,
  readContinuityMeta,
  requestFingerprint,
} from '../../machines/continuity-extension.js';
import { formatEventId } from '../../machines/event-id.js';
import type { JsonRpcMessage, JsonRpcRequest, RequestId } from '../../machines/jsonrpc.js';
import {
  admitUnknownKey,
  type KeyedAnswer,
  type KeyedRequestEmitted,
  keyedRequestMachine,
  keyedResume,
  type RecordedOutcome,
} from '../../machines/server/keyed-request.machine.js';
import {
  appendToWindow,
  EMPTY_WINDOW,
  evictWindow,
  finishWindow,
  type RetentionPolicy,
  type StreamWindow,
} from '../../machines/server/retention.js';
import type { VirtualClock } from '../world/clock.js';
import type { SimConnection, SimNetwork } from '../world/network.js';
import type { Recorder2026 } from './recorder.js';
import { TOOLS_2026, type Tool2026 } from './tools.js';

/**
 * A simulated MCP 2026-07-28 server: one or more instances behind a balancer, with or without the
 * continuity extension. Every decision about a keyed request is the real `keyedRequestMachine`'s (work
 * state) and the real `admitUnknownKey` / `keyedResume` / `readContinuityMeta` / `requestFingerprint`
 * (what a request is, whether an unknown key may run, what a cursor gets). This file executes those
 * decisions on the simulated network, a per-key event log and the virtual clock, and plays the SDK's part
 * with simulated tools. Without the extension (or for an unkeyed request) it is the spec's server: every
 * request runs, and its stream closing cancels it.
 */
export interface SimServer2026Config {
  /** The server advertises and serves the continuity extension. */
  readonly extension: boolean;
  readonly settings: ContinuitySettings;
  /** `durable`: the memo and the key logs survive restarts and are shared by the instances (SQLite, Redis). */
  readonly memo: 'memory' | 'durable';
  /** Instances behind the balancer (more than one only with a durable, shared memo: the fleet rule). */
  readonly instances: number;
  /** SSE comments on every open stream every this many ms (0: none). */
  readonly heartbeatMs: number;
  /**
   * A response's status line goes out as soon as the request is taken. Off: only with its first event or
   * answer (as the official v2 server does), so a cut before then is a cut before any response byte.
   */
  readonly headersEarly: boolean;
}

/** What the simulated server decided, for the coverage table. */
export type ServerObservation2026 =
  | { readonly kind: 'admit'; readonly decision: 'execute' | 'outcome-unknown' }
  | { readonly kind: 'answer'; readonly answer: KeyedAnswer['kind'] }
  | { readonly kind: 'state'; readonly from: string; readonly to: string }
  | { readonly kind: 'unkeyed'; readonly event: 'run' | 'cancelled-by-close' };

interface Watcher {
  readonly conn: SimConnection;
  readonly requestId: RequestId;
  /** Its response stream has begun (later answers go inside it). */
  streaming: boolean;
}

interface MemoEntry {
  readonly actor: Actor<typeof keyedRequestMachine>;
  readonly epoch: string;
  window: StreamWindow;
  readonly messages: Map<number, JsonRpcMessage>;
  /** The instance running the body, and its incarnation. */
  owner: { instance: number; incarnation: number };
  readonly watchers: Map<string, Watcher>;
  readonly callKey: string;
  readonly execution: string;
  aborted: boolean;
  lastState: string;
}

interface Instance {
  readonly id: number;
  incarnation: number;
  startedAt: number;
  /** A memory memo lives in its instance and dies with it. */
  memo: Map<string, MemoEntry>;
}

const PRINCIPAL = 'app';

export class SimServer2026 {
  private readonly instances: Instance[] = [];
  private readonly shared = new Map<string, MemoEntry>();
  private rr = 0;
  private epochs = 0;
  private executions = 0;
  /** Requests to answer with `failStatus` before serving normally. */
  failNext = 0;
  failStatus = 503;
  /** Open unkeyed streams (for heartbeats). */
  private readonly open = new Set<SimConnection>();
  /** Which instance took each connection (an instance's death resets its connections). */
  private readonly servedBy = new Map<SimConnection, number>();

  constructor(
    private readonly clock: VirtualClock,
    private readonly net: SimNetwork,
    private readonly recorder: Recorder2026,
    readonly config: SimServer2026Config,
    private readonly machine: AnyStateMachine = keyedRequestMachine,
    private readonly observe: (o: ServerObservation2026) => void = () => undefined,
  ) {
    for (let i = 0; i < Math.max(1, config.instances); i++)
      this.instances.push({ id: i, incarnation: 0, startedAt: 0, memo: new Map() });
    if (config.heartbeatMs > 0) this.heartbeat();
  }

  private get retention(): RetentionPolicy {
    return {
      maxEventsPerStream: this.config.settings.maxEventsPerRequest,
      retentionMs: this.config.settings.eventRetentionMs,
    };
  }

  private memoOf(instance: Instance): Map<string, MemoEntry> {
    return this.config.memo === 'durable' ? this.shared : instance.memo;
  }

  /** One POST, routed by the balancer to the next instance. */
  serve(conn: SimConnection): void {
    if (this.failNext > 0) {
      this.failNext--;
      this.recorder.faultedConns.add(conn.id);
      conn.send({ type: 'http.response', status: this.failStatus });
      return;
    }
    const instance = this.instances[this.rr++ % this.instances.length] as Instance;
    this.servedBy.set(conn, instance.id);
    const request = conn.exchange.body as JsonRpcRequest;
    const reading = this.config.extension
      ? readContinuityMeta(request.params, this.config.settings.maxKeyLength, request.method)
      : ({ kind: 'unkeyed' } as const);
    if (reading.kind === 'invalid') {
      conn.send({ type: 'http.response', status: 400, body: errorBody(request.id, -32602, reading.why) });
      return;
    }
    if (reading.kind === 'unkeyed') {
      this.runUnkeyed(instance, conn, request);
      return;
    }
    const memo = this.memoOf(instance);
    const mk = memoKey(PRINCIPAL, reading.key);
    const fingerprint = requestFingerprint(request.method, request.params);
    const attacher = `a${conn.id}`;
    const entry = memo.get(mk);
    if (!entry) {
      const completeFor =
        this.config.memo === 'durable' ? Number.POSITIVE_INFINITY : this.clock.now() - instance.startedAt;
      const admitted = admitUnknownKey(reading.reissue, completeFor, this.config.settings.memoWindowMs);
      this.observe({ kind: 'admit', decision: admitted.kind });
      if (admitted.kind !== 'execute') {
        conn.send({
          type: 'http.response',
          status: CONTINUITY_ERROR_STATUS[admitted.code],
          body: errorBody(request.id, admitted.code, 'outcome unknown'),
        });
        return;
      }
      this.start(instance, memo, mk, fingerprint, attacher, conn, request);
      return;
    }
    entry.window = evictWindow(entry.window, this.clock.now(), this.retention);
    const resume = keyedResume(reading.lastEventId, { epoch: entry.epoch, stream: 1, window: entry.window });
    entry.watchers.set(attacher, { conn, requestId: request.id, streaming: false });
    entry.actor.send({ type: 'reissue.arrived', attacher, fingerprint, resume });
    // An attempt the machine answered with something other than "watch" is no watcher.
    const w = entry.watchers.get(attacher);
    if (w && !w.streaming) entry.watchers.delete(attacher);
  }

  /** A first attempt: the entry is created and the machine starts the body on this instance. */
  private start(
    instance: Instance,
    memo: Map<string, MemoEntry>,
    mk: string,
    fingerprint: string,
    attacher: string,
    conn: SimConnection,
    request: JsonRpcRequest,
  ): void {
    const actor = createActor(this.machine, {
      clock: this.clock,
      input: { memoKey: mk, fingerprint, attacher },
    }) as Actor<typeof keyedRequestMachine>;
    const entry: MemoEntry = {
      actor,
      epoch: `k${++this.epochs}`,
      window: EMPTY_WINDOW,
      messages: new Map(),
      owner: { instance: instance.id, incarnation: instance.incarnation },
      watchers: new Map(),
      callKey: callKeyOf(request),
      execution: `x${++this.executions}`,
      aborted: false,
      lastState: '',
    };
    memo.set(mk, entry);
    const watcher: Watcher = { conn, requestId: request.id, streaming: false };
    entry.watchers.set(attacher, watcher);
    actor.on('*', (e) => this.onEmitted(memo, mk, entry, e as KeyedRequestEmitted, request));
    actor.subscribe((s) => {
      const state = typeof s.value === 'string' ? s.value : JSON.stringify(s.value);
      if (entry.lastState && state !== entry.lastState)
        this.observe({ kind: 'state', from: entry.lastState, to: state });
      entry.lastState = state;
    });
    // The first attempt's stream opens at once (the machine tells only later attempts to attach).
    this.openStream(entry, attacher, watcher, 0);
    actor.start();
  }

  private onEmitted(
    memo: Map<string, MemoEntry>,
    mk: string,
    entry: MemoEntry,
    e: KeyedRequestEmitted,
    request: JsonRpcRequest,
  ): void {
    switch (e.type) {
      case 'keyed.start':
        this.runKeyed(entry, request);
        return;
      case 'keyed.abort':
        entry.aborted = true;
        return;
      case 'keyed.memo-armed': {
        // The runtime owns the memo's clock (an XState timer does not survive a restored snapshot).
        this.clock.setTimeout(() => {
          if (memo.get(mk) === entry) entry.actor.send({ type: 'memo.expired' });
        }, this.config.settings.memoWindowMs);
        return;
      }
      case 'keyed.forget':
        if (memo.get(mk) === entry) memo.delete(mk);
        this.recorder.forgotten.push(this.clock.now());
        return;
      case 'keyed.answer':
        this.answer(entry, e.attacher, e.answer);
        return;
    }
  }

  /** Writes one answer of the machine to the attempt it is for. */
  private answer(entry: MemoEntry, attacher: string, a: KeyedAnswer): void {
    this.observe({ kind: 'answer', answer: a.kind });
    const w = entry.watchers.get(attacher);
    if (!w) return;
    switch (a.kind) {
      case 'attach':
        this.openStream(entry, attacher, w, a.afterSeq);
        return;
      case 'recorded':
        entry.watchers.delete(attacher);
        this.replay(entry, w.conn, a.afterSeq);
        write(w.conn, { type: 'sse.event', message: outcomeMessage(w.requestId, a.outcome) });
        w.conn.send({ type: 'net.ended' });
        return;
      case 'outcome':
        entry.watchers.delete(attacher);
        write(w.conn, { type: 'sse.event', message: outcomeMessage(w.requestId, a.outcome) });
        w.conn.send({ type: 'net.ended' });
        return;
      case 'evicted': {
        entry.watchers.delete(attacher);
        const { kind: _, ...data } = a.resume;
        w.conn.send({
          type: 'http.response',
          status: CONTINUITY_ERROR_STATUS[a.code],
          body: errorBody(w.requestId, a.code, 'events evicted', data),
        });
        return;
      }
      case 'refused':
      case 'invalid-cursor':
      case 'cancelled':
      case 'outcome-unknown': {
        entry.watchers.delete(attacher);
        const status = a.kind === 'invalid-cursor' ? 400 : CONTINUITY_ERROR_STATUS[a.code];
        const body = errorBody(w.requestId, a.code, a.kind);
        if (w.streaming) {
          write(w.conn, { type: 'sse.event', message: body as JsonRpcMessage });
          w.conn.send({ type: 'net.ended' });
        } else w.conn.send({ type: 'http.response', status, body });
        return;
      }
    }
  }

  /** The attempt watches the work: the log after `afterSeq`, then live events, then the outcome. */
  private openStream(entry: MemoEntry, attacher: string, w: Watcher, afterSeq: number): void {
    w.streaming = true;
    if (this.config.headersEarly) write(w.conn, { type: 'sse.activity' });
    this.replay(entry, w.conn, afterSeq);
    w.conn.onGone = () => {
      if (entry.watchers.get(attacher) !== w) return;
      entry.watchers.delete(attacher);
      // A transport fact for a keyed request, not a cancellation (the machine decides what it means).
      entry.actor.send({ type: 'stream.closed', attacher });
    };
  }

  private replay(entry: MemoEntry, conn: SimConnection, afterSeq: number): void {
    for (let seq = Math.max(afterSeq + 1, entry.window.oldest); seq <= entry.window.head; seq++) {
      const message = entry.messages.get(seq);
      if (message)
        write(conn, {
          type: 'sse.event',
          id: formatEventId({ epoch: entry.epoch, stream: 1, seq }),
          message,
        });
    }
  }

  private alive(owner: { instance: number; incarnation: number }): boolean {
    return this.instances[owner.instance]?.incarnation === owner.incarnation;
  }

  /** The tool body of a keyed request: progress into the key's log (then to watchers), then the outcome. */
  private runKeyed(entry: MemoEntry, request: JsonRpcRequest): void {
    const { tool, callKey } = this.begin(request, entry.execution);
    this.recorder.keyedExecutions.set(callKey, [
      ...(this.recorder.keyedExecutions.get(callKey) ?? []),
      entry.execution,
    ]);
    const owner = { ...entry.owner };
    const live = () => this.alive(owner) && !entry.aborted && entry.actor.getSnapshot().value === 'running';
    for (let n = 1; n <= tool.progress; n++) {
      this.clock.setTimeout(() => {
        if (!live()) return;
        const message = this.progressMessage(callKey, entry.execution, n);
        const { window, seq } = appendToWindow(entry.window, this.clock.now(), this.retention);
        for (let s = entry.window.oldest; s < window.oldest; s++) entry.messages.delete(s);
        entry.window = window;
        entry.messages.set(seq, message);
        const id = formatEventId({ epoch: entry.epoch, stream: 1, seq });
        for (const w of entry.watchers.values())
          if (w.streaming) write(w.conn, { type: 'sse.event', id, message });
      }, tool.stepMs * n);
    }
    this.clock.setTimeout(() => {
      if (!live()) return;
      this.complete(callKey, entry.execution);
      entry.window = finishWindow(entry.window);
      const outcome: RecordedOutcome = { kind: 'result', result: resultOf(entry.execution) };
      entry.actor.send({ type: 'tool.finished', outcome });
    }, tool.durationMs);
  }

  /** The spec's request: it runs; closing its stream cancels it. */
  private runUnkeyed(instance: Instance, conn: SimConnection, request: JsonRpcRequest): void {
    const execution = `x${++this.executions}`;
    const owner = { instance: instance.id, incarnation: instance.incarnation };
    this.observe({ kind: 'unkeyed', event: 'run' });
    const { tool, callKey } = this.begin(request, execution);
    let cancelled = false;
    if (this.config.headersEarly) write(conn, { type: 'sse.activity' });
    this.open.add(conn);
    conn.onGone = () => {
      this.open.delete(conn);
      if (!cancelled) this.observe({ kind: 'unkeyed', event: 'cancelled-by-close' });
      cancelled = true;
    };
    const live = () => this.alive(owner) && !cancelled && conn.open;
    for (let n = 1; n <= tool.progress; n++) {
      this.clock.setTimeout(() => {
        if (live()) write(conn, { type: 'sse.event', message: this.progressMessage(callKey, execution, n) });
      }, tool.stepMs * n);
    }
    this.clock.setTimeout(() => {
      if (!live()) return;
      this.complete(callKey, execution);
      cancelled = true;
      this.open.delete(conn);
      write(conn, {
        type: 'sse.event',
        message: outcomeMessage(request.id, { kind: 'result', result: resultOf(execution) }),
      });
      conn.send({ type: 'net.ended' });
    }, tool.durationMs);
  }

  private begin(request: JsonRpcRequest, execution: string) {
    const tool = TOOLS_2026[request.params?.name as Tool2026];
    const callKey = callKeyOf(request);
    this.recorder.count(this.recorder.executions, callKey);
    if (tool.sideEffect === 'once') this.recorder.count(this.recorder.sideEffects, callKey);
    return { tool, callKey, execution };
  }

  private complete(callKey: string, execution: string): void {
    this.recorder.completed.set(callKey, [...(this.recorder.completed.get(callKey) ?? []), execution]);
  }

  private progressMessage(callKey: string, execution: string, n: number): JsonRpcMessage {
    const uid = `${execution}/${n}`;
    this.recorder.emitted({ uid, callKey, execution, n });
    return { jsonrpc: '2.0', method: 'notifications/progress', params: { progress: n, uid } };
  }

  /**
   * One instance dies and is replaced at once (a restart; with several instances, the others go on
   * serving). Its connections reset and its bodies stop. A memory memo dies with it. With a durable memo
   * its running entries are found running by no live owner: the machine is told the instance died.
   */
  instanceDies(pick: number): void {
    const instance = this.instances[pick % this.instances.length] as Instance;
    this.recorder.deaths.push(this.clock.now());
    for (const c of this.net.list()) if (this.servedBy.get(c) === instance.id) c.reset();
    const memo = this.memoOf(instance);
    for (const entry of [...memo.values()]) {
      if (entry.owner.instance !== instance.id || entry.owner.incarnation !== instance.incarnation) continue;
      if (this.config.memo === 'durable') entry.actor.send({ type: 'instance.died' });
    }
    if (this.config.memo === 'memory') {
      for (const entry of instance.memo.values()) entry.actor.stop();
      instance.memo = new Map();
    }
    instance.incarnation++;
    instance.startedAt = this.clock.now();
  }

  private heartbeat(): void {
    const beat = () => {
      for (const c of this.open) write(c, { type: 'sse.activity' });
      for (const memo of [this.shared, ...this.instances.map((i) => i.memo)])
        for (const e of memo.values())
          for (const w of e.watchers.values()) if (w.streaming) write(w.conn, { type: 'sse.activity' });
      this.clock.setTimeout(beat, this.config.heartbeatMs);
    };
    this.clock.setTimeout(beat, this.config.heartbeatMs);
  }

  stop(): void {
    for (const memo of [this.shared, ...this.instances.map((i) => i.memo)])
      for (const e of memo.values()) e.actor.stop();
  }
}

/** Writes to a response stream, its status line first if it has not gone out yet. */
function write(conn: SimConnection, event: IoEvent): void {
  if (!conn.started) conn.send({ type: 'http.stream' });
  conn.send(event);
}

function callKeyOf(request: JsonRpcRequest): string {
  return String((request.params?.arguments as { callKey?: string } | undefined)?.callKey);
}

function resultOf(execution: string): unknown {
  return {
    resultType: 'complete',
    content: [{ type: 'text', text: 'done' }],
    _meta: { uid: `${execution}/result` },
  };
}

function outcomeMessage(id: RequestId, outcome: RecordedOutcome): JsonRpcMessage {
  return outcome.kind === 'result'
    ? ({ jsonrpc: '2.0', id, result: outcome.result } as JsonRpcMessage)
    : ({ jsonrpc: '2.0', id, error: outcome.error } as JsonRpcMessage);
}

function errorBody(id: RequestId, code: number, message: string, data?: unknown): object {
  return { jsonrpc: '2.0', id, error: { code, message, ...(data === undefined ? {} : { data }) } };
}
