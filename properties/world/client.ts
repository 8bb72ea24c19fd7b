import { type Actor, createActor, createMachine, fromCallback, sendParent } from 'xstate';
import type { ReconnectPolicy } from '../../machines/backoff.js';
import type { AuthorizationResult } from '../../machines/client/authorization.js';
import { deletesOnClose } from '../../machines/client/closing.js';
import type { CursorRecord } from '../../machines/client/cursor.js';
import {
  EXCHANGE_RULES,
  EXCHANGE_START,
  type ExchangeFact,
  type ExchangeRules,
  exchangeStep,
  stopPlan,
} from '../../machines/client/exchange-core.js';
import type { Exchange, IoEvent, SseEvent } from '../../machines/client/io.js';
import type { RetryPolicy } from '../../machines/client/ledger.js';
import { clientSessionMachine } from '../../machines/client/session.machine.js';
import { streamMachine } from '../../machines/client/stream.machine.js';
import { JsonRpcCode } from '../../machines/codes.js';
import { isResponse, type JsonRpcMessage, requestKey } from '../../machines/jsonrpc.js';
import { inspectClient, type Observe } from '../coverage.js';
import type { VirtualClock } from './clock.js';
import type { CursorFileRules, CursorStore } from './cursor-file.js';
import { sendDelete } from './delete.js';
import type { SimNetwork, WireEvent } from './network.js';
import type { Recorder } from './recorder.js';
import type { SimServer } from './server.js';
import type { ToolName } from './tools.js';
import { wireBytes } from './wire-size.js';

/**
 * A client process: the client session machine with simulated I/O, and a tiny application on top that
 * behaves like the SDK `Client` (initialize, initialized, tools/list, then calls).
 */
export interface ClientVariant {
  readonly name: string;
  readonly sessionMachine: typeof clientSessionMachine;
  readonly streamMachine: typeof streamMachine;
  readonly retryPolicy?: RetryPolicy;
  /**
   * What the application is handed instead of what the machine delivered (mutants only: a client that
   * words its outcomes wrongly). Absent: exactly what the machine delivered.
   */
  readonly distort?: (message: JsonRpcMessage) => JsonRpcMessage;
  /** The exchange core's rules (mutants only; absent: the runtime's `EXCHANGE_RULES`). */
  readonly exchangeRules?: ExchangeRules;
  /** The exchange core's step (mutants only: a wrapped step; absent: the runtime's `exchangeStep`). */
  readonly exchangeStep?: typeof exchangeStep;
  /** Whether closing sends DELETE (mutants only; absent: the runtime's `deletesOnClose`). */
  readonly deletesOnClose?: typeof deletesOnClose;
  /** How a restarted process reads its cursor file (mutants only; absent: the runtime's checks). */
  readonly cursorFile?: CursorFileRules;
}

export const CORRECT_CLIENT: ClientVariant = {
  name: 'mcp-continuity',
  sessionMachine: clientSessionMachine,
  streamMachine,
};

export interface ClientSettings {
  readonly policy: ReconnectPolicy;
  readonly stallTimeoutMs: number;
}

/** Where the cursor record lives. `durable` survives a process restart; otherwise it dies with it. */
/** A token refresh (the provider's `auth()`) takes this long, and always succeeds. */
const REFRESH_MS = 20;
/** When authorization needs the user, the application calls `finishAuth` this much later. */
const USER_AUTHORIZES_MS = 2_000;

/**
 * The application's OAuth provider, on the virtual clock: a refresh that succeeds after `REFRESH_MS`
 * (the stream machine's `authorize` actor); the user authorizing after `USER_AUTHORIZES_MS` (its
 * `awaitAuthorization` actor). Machines, not promises: the world runs synchronously on its clock.
 */
const simAuthorize = createMachine({
  initial: 'refreshing',
  states: { refreshing: { after: { [REFRESH_MS]: 'done' } }, done: { type: 'final' } },
  output: (): AuthorizationResult => 'authorized',
});
const simAwaitAuthorization = createMachine({
  initial: 'waiting',
  states: {
    waiting: {
      after: { [USER_AUTHORIZES_MS]: { target: 'granted', actions: sendParent({ type: 'auth.granted' }) } },
    },
    granted: {},
  },
});

export class SimClientProcess {
  readonly actor: Actor<typeof clientSessionMachine>;
  private ready = false;
  /** The id of its `tools/list`: once answered, the transport knows the tools' annotations. */
  private listId: number | undefined;
  /** connect() rejected: like the SDK Client, every later call fails at once. */
  private connectFailed = false;
  private readonly waiting: Array<{ tool: ToolName; callKey: string; id: number }> = [];
  private readonly idToCall = new Map<number, string>();
  private lastSessionId: string | undefined;
  private lastState = '';

  constructor(
    readonly pid: number,
    private readonly deps: {
      clock: VirtualClock;
      net: SimNetwork;
      server: SimServer;
      recorder: Recorder;
      store: CursorStore;
      nextId: () => number;
      observe?: Observe;
    },
    variant: ClientVariant,
    settings: ClientSettings,
    restored: CursorRecord | null,
  ) {
    const { net, server, recorder } = deps;
    recorder.connectStartedAt.set(pid, deps.clock.now());
    // The runtime's exchange core (machines/client/exchange-core.ts) between the network and the machine:
    // what arrived, as facts, becomes the machine's events the way it does in src/client/exchange.ts, and
    // a stopped exchange is abandoned when the core's `stopPlan` says (a POST's stream drained a while).
    const rules = variant.exchangeRules ?? EXCHANGE_RULES;
    const step = variant.exchangeStep ?? exchangeStep;
    const exchange = fromCallback<IoEvent, Exchange>(({ input, sendBack }) => {
      let state = EXCHANGE_START;
      let stopped = false;
      // A client that resumes a stream from its answer's id never learned that the stream had ended.
      if (input.method === 'GET' && input.lastEventId && recorder.answerEventIds.has(input.lastEventId))
        recorder.resumesFromAnswer.push(`${input.lastEventId} at ${deps.clock.now()} (process ${pid})`);
      const hear = (event: WireEvent) => {
        noteAnswers(event, recorder.answerEventIds);
        for (const fact of factsOf(event)) {
          const next = step(state, fact, rules);
          state = next.state;
          if (!stopped) for (const e of next.events) sendBack(e);
        }
        // A drained body ended: nothing is left to abandon.
        if (stopped && state.finished) net.abandon(conn);
      };
      const conn = net.connect(
        input,
        hear,
        (c) => server.serve(c),
        (bytes) => hear({ type: 'wire.bytes', bytes }),
      );
      return () => {
        stopped = true;
        conn.stoppedByClient = true;
        // A connection the server still serves, healthy, and not one it finished and left open: the client
        // cut a live stream (checks-connections.ts judges when that may happen). The world's end stops all.
        if (!recorder.worldStopped && conn.open && !conn.blackholed && !conn.lingering)
          recorder.liveCuts.push(deps.clock.now());
        const plan = stopPlan(state, input.method, rules);
        if (plan.kind === 'drain') deps.clock.setTimeout(() => net.abandon(conn), plan.wakeInMs);
        else net.abandon(conn);
      };
    });
    // The provider's actors stand in for the runtime's (src/client/authorization.ts): types differ (machines
    // on the virtual clock, not promises), behaviour is the same contract.
    const authorization = {
      authorize: simAuthorize,
      awaitAuthorization: simAwaitAuthorization,
    } as unknown as Record<'authorize' | 'awaitAuthorization', never>;
    const machine = variant.sessionMachine.provide({
      actors: { stream: variant.streamMachine.provide({ actors: { exchange, ...authorization } }) },
      actions: {
        deliver: (_, { message }) => this.onMessage(variant.distort ? variant.distort(message) : message),
        // The call's `send` rejects with UnauthorizedError: to the application, a definite failure.
        rejectUnauthorized: (_, { message }) =>
          this.onMessage(variant.distort ? variant.distort(message) : message),
        deliverOrphan: (_, { message }) => this.recordUid(message),
        notifyGap: (_, gap) =>
          recorder.gaps.push({
            process: pid,
            streamKey: gap.streamKey,
            sessionId: gap.sessionId,
            reason: gap.reason,
            lostCount: gap.lostCount,
            sessionGone: gap.sessionId === undefined || server.isGone(gap.sessionId),
          }),
        // As the runtime's transport: the application left `deleteOnClose` at its default, and never ended
        // the session itself (`terminateSession`).
        sendDelete: (_, { sessionId }) => {
          if ((variant.deletesOnClose ?? deletesOnClose)(undefined, false))
            sendDelete(net, server, recorder, sessionId);
        },
        persistCursor: (_, { record }) => {
          deps.store.record = record;
        },
      },
    });
    this.actor = createActor(machine, {
      clock: deps.clock,
      inspect: deps.observe ? inspectClient(deps.observe) : undefined,
      input: {
        policy: settings.policy,
        stallTimeoutMs: settings.stallTimeoutMs,
        seed: pid * 101,
        retryPolicy: variant.retryPolicy,
        restored: restored ?? undefined,
        // The application gave an OAuth provider: a 401 is answered by authorizing.
        authorization: true,
      },
    });
    this.actor.subscribe((snap) => this.watch(snap.value, snap.context.sessionId));
    this.actor.start();
    if (restored) this.ready = true;
    else
      this.send({
        jsonrpc: '2.0',
        id: deps.nextId(),
        method: 'initialize',
        params: { protocolVersion: '2025-11-25' },
      });
  }

  /** "Session survives transport": the client may leave a session only when the server no longer has it. */
  private watch(value: unknown, sessionId: string | undefined): void {
    const state = typeof value === 'string' ? value : JSON.stringify(value);
    // Any change or end of the session id, and any end of the session, while the server still holds it.
    const last = this.lastSessionId;
    if (last !== undefined && state !== 'closed' && !this.deps.server.isGone(last)) {
      if (sessionId !== last)
        this.deps.recorder.sessionLeftLive.push(`${last} → ${sessionId ?? 'none'} (${state})`);
      else if (state === 'terminated' && this.lastState !== 'terminated')
        this.deps.recorder.sessionLeftLive.push(`${last} ended (terminated)`);
    }
    // The server ended the session (`event: close`): the application is told the session is over.
    if (state === 'terminated' && this.lastState !== 'terminated' && this.lastSessionId)
      this.deps.recorder.endedSessions.add(this.lastSessionId);
    this.lastState = state;
    this.lastSessionId = sessionId;
    if (sessionId !== undefined) this.deps.recorder.adoptedSessions.add(sessionId);
  }

  call(tool: ToolName, callKey: string): void {
    const id = this.deps.nextId();
    this.deps.recorder.calls.set(callKey, {
      callKey,
      tool,
      id,
      process: this.pid,
      outcomes: 0,
      at: this.deps.clock.now(),
    });
    this.idToCall.set(id, callKey);
    if (this.connectFailed) this.failCall(callKey);
    else if (!this.ready) this.waiting.push({ tool, callKey, id });
    else this.sendCall(tool, callKey, id);
  }

  stop(): void {
    this.actor.stop();
  }

  /** The application closes the transport: DELETE, and every pending call is settled. */
  close(): void {
    this.actor.send({ type: 'app.close' });
  }

  private failCall(callKey: string): void {
    const call = this.deps.recorder.calls.get(callKey);
    if (!call) return;
    call.outcomes++;
    call.outcome = 'error';
    call.reason = 'connect_failed';
  }

  private sendCall(tool: ToolName, callKey: string, id: number): void {
    this.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: { callKey } } });
  }

  private send(message: JsonRpcMessage): void {
    this.actor.send({ type: 'app.send', message });
  }

  private onMessage(message: JsonRpcMessage): void {
    this.recordUid(message);
    if (!isResponse(message)) return;
    // Any request of the transport's user (tools/list too): an outcome-unknown answer covers its stream.
    if ('error' in message && message.error.code === JsonRpcCode.OUTCOME_UNKNOWN && message.id !== null)
      this.deps.recorder.unknownRequests.add(requestKey(message.id));
    if (message.id === this.listId && 'result' in message)
      this.deps.recorder.annotationsKnownAt.set(this.pid, this.deps.clock.now());
    const callKey = typeof message.id === 'number' ? this.idToCall.get(message.id) : undefined;
    if (callKey) {
      const call = this.deps.recorder.calls.get(callKey);
      if (!call) return;
      call.outcomes++;
      call.settledAt ??= this.deps.clock.now();
      if ('result' in message) {
        call.outcome = 'result';
        return;
      }
      const unknown = message.error.code === JsonRpcCode.OUTCOME_UNKNOWN;
      call.outcome = unknown ? 'unknown' : 'error';
      const data = message.error.data as { reason?: unknown } | undefined;
      call.reason = unknown
        ? String(data?.reason)
        : message.error.code === JsonRpcCode.REQUEST_FAILED
          ? 'session_ended'
          : `code ${message.error.code}`;
      return;
    }
    if (!this.ready && 'error' in message) {
      // connect() rejected, as the SDK Client's would: the calls waiting for it fail.
      this.connectFailed = true;
      this.deps.recorder.connectFailedAt.set(this.pid, this.deps.clock.now());
      for (const w of this.waiting.splice(0)) this.failCall(w.callKey);
      return;
    }
    if (!this.ready && 'result' in message && 'protocolVersion' in message.result) {
      // What the SDK Client does after initialize: announce, then learn the tools (and their annotations).
      this.ready = true;
      this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      this.listId = this.deps.nextId();
      this.send({ jsonrpc: '2.0', id: this.listId, method: 'tools/list' });
      for (const w of this.waiting.splice(0)) this.sendCall(w.tool, w.callKey, w.id);
    }
  }

  private recordUid(message: JsonRpcMessage): void {
    const uid = uidOf(message);
    if (uid) this.deps.recorder.recordDelivery(uid);
  }
}

/**
 * What the simulated network delivered, as the facts the runtime's reader would have observed: a response's
 * headers (and a body's end), each chunk of an event stream with the units it completed, the end, a failure.
 */
function factsOf(event: WireEvent): readonly ExchangeFact[] {
  switch (event.type) {
    case 'wire.bytes':
      return [{ kind: 'chunk', bytes: event.bytes }];
    case 'http.stream':
      return [
        {
          kind: 'headers',
          status: 200,
          contentType: 'text/event-stream',
          sessionId: event.sessionId,
          advertisement: event.advertisement,
        },
      ];
    case 'http.response':
      return [
        {
          kind: 'headers',
          status: event.status,
          contentType: 'application/json',
          sessionId: event.sessionId,
          wwwAuthenticate: event.wwwAuthenticate,
          advertisement: event.advertisement,
        },
        { kind: 'body', body: event.body },
      ];
    case 'sse.event':
      return [{ kind: 'chunk', bytes: bytesOf([event]), events: [event] }];
    case 'sse.events':
      return [{ kind: 'chunk', bytes: bytesOf(event.events), events: event.events, retryMs: event.retryMs }];
    case 'sse.retry':
      return [{ kind: 'chunk', bytes: 12, retryMs: event.ms }];
    case 'sse.activity':
      return [{ kind: 'chunk', bytes: 3, comment: true }];
    case 'net.ended':
      return [{ kind: 'ended' }];
    case 'net.failed':
      return [{ kind: 'failed', failure: { kind: 'network', fault: event.fault } }];
  }
}

/** Remembers the ids of events that carried a response (a request's answer). */
function noteAnswers(event: WireEvent, ids: Set<string>): void {
  const events = event.type === 'sse.event' ? [event] : event.type === 'sse.events' ? event.events : [];
  for (const e of events)
    if (e.id !== undefined && e.message !== undefined && isResponse(e.message)) ids.add(e.id);
}

/** About the size of events on the wire (the progress rule counts bytes). */
const bytesOf = (events: readonly SseEvent[]): number => events.reduce((n, e) => n + wireBytes(e), 0);

function uidOf(message: JsonRpcMessage): string | undefined {
  const m = message as {
    params?: { uid?: unknown };
    result?: { _meta?: { uid?: unknown } };
    error?: { data?: { uid?: unknown } };
  };
  const uid = m.params?.uid ?? m.result?._meta?.uid ?? m.error?.data?.uid;
  return typeof uid === 'string' ? uid : undefined;
}
