import type { InspectionEvent } from 'xstate';
import { alreadyDelivered } from '../machines/client/absorb.js';
import { exchangeFor, type StreamContext } from '../machines/client/stream.machine.js';
import { JsonRpcCode, StopReason } from '../machines/codes.js';
import type { CloseDecision } from '../machines/decide.js';
import { isResponse, type JsonRpcMessage } from '../machines/jsonrpc.js';
import type { ResumeAnswer } from '../machines/server/retention.js';
import type { ServerObservation } from './world/server.js';

/**
 * Which decisions of machines/ the simulated worlds reach. The machines are not touched: the client's
 * decisions are read off XState inspection (transitions out of `deciding`, the session's moves, the
 * messages it hands the application), the server's off the answers its session machine emits, which the
 * world relays anyway. A decision no world reaches is one the properties cannot judge.
 */
export type Observe = (branch: string) => void;

export interface Branch {
  readonly group: string;
  readonly name: string;
  /** Why no simulated world can reach it; such a branch is listed but not required. */
  readonly notModelled?: string;
}

const b = (group: string, name: string, notModelled?: string): Branch => ({ group, name, notModelled });

/** Every branch the table lists, in order. A branch observed but missing here is listed after them. */
export const BRANCHES: readonly Branch[] = [
  b('close table', 'reset → reconnect'),
  b('close table', 'refused → reconnect'),
  b('close table', 'stall → reconnect'),
  b('close table', 'end of stream → reconnect'),
  b('close table', 'server error (5xx) → reconnect'),
  b('close table', 'timeout → reconnect', 'the simulated network never times out a connect'),
  b('close table', '408/425/429 → reconnect'),
  b('close table', '409 without a loss → reconnect', 'the simulated server never holds a stream twice'),
  b('close table', '404 → session terminated'),
  b('close table', '410 → gap, resume at the oldest retained event'),
  b('close table', '410 → gap, response evicted'),
  b('close table', '410 epoch changed → outcome unknown', 'nothing in src/ or the world sends log.reset'),
  b(
    'close table',
    '410 → gap, standalone stream starts over',
    'the simulated log never sweeps a live standalone stream',
  ),
  b(
    'close table',
    '204/405 → stop',
    'the simulated server answers a standalone GET with a stream or a 404 (the not-found rule), never 204/405',
  ),
  b('close table', 'other status → refused'),
  b('close table', '401 → authorize, then the same request again'),
  b('close table', '401, authorizations exhausted, never ran → UnauthorizedError'),
  b('close table', '401, authorizations exhausted, may have run → wait for finishAuth'),
  b('close table', 'reconnects exhausted → given up'),
  b('close table', 'event: close → closed by server'),
  b('not-found rule', 'POST 404 → session lost'),
  b('not-found rule', 'GET 404 for a stream served in this session → session lost'),
  b('not-found rule', 'standalone GET never served, 404 → not offered, session kept'),
  b(
    'not-found rule',
    'GET 404 without a session id → only the stream ends',
    'the simulated client opens every GET with its session id',
  ),
  b('POST-failure rule', 'refused → re-send'),
  b('POST-failure rule', 'may have run, re-send safe → re-send'),
  b('POST-failure rule', 'may have run, not re-send safe → outcome unknown'),
  b('POST-failure rule', 'unauthorized, authorized since → re-send (same id)'),
  b('POST-failure rule', 'unauthorized, authorized since → resume (same Last-Event-ID)'),
  b('cursor answer', 'replay'),
  b('cursor answer', '410 window exceeded, exact count'),
  b(
    'cursor answer',
    '410 window exceeded, size unknown',
    'the simulated log never sweeps a stream whole (a sweep would hide a server resuming at the head)',
  ),
  b('cursor answer', '410 epoch changed', 'nothing in src/ or the world sends log.reset'),
  b('cursor answer', '400 foreign cursor', 'simulated session ids and epochs never repeat'),
  b('cursor answer', '400 malformed cursor', 'the simulated client only sends ids it was given'),
  b('cursor answer', '404 unknown session'),
  b('admission', 'request → execute'),
  b('admission', 'request → duplicate'),
  b('admission', 'request → unknown session'),
  b('admission', 'GET → attach from start'),
  b('admission', 'GET → attach from head'),
  b('admission', 'GET → unknown session'),
  b('dedupe', 're-sent POST answered from its stream, not run'),
  b('dedupe', 're-sent POST run again (server without de-duplication)'),
  b('session', '404 → re-initialize'),
  b('session', 're-initialized'),
  b('session', 're-initialize failed → failed (the transport gives up)'),
  b('session', 'closed by server → terminated'),
  b('session', 'initialize failed'),
  b('session', '404 to a POST that never ran → re-sent on the new session'),
  b('ledger settling', 'result'),
  b('ledger settling', 'error: unexpected HTTP status'),
  b('ledger settling', 'error: session has ended'),
  b('ledger settling', 'outcome unknown: session_lost'),
  b('ledger settling', 'outcome unknown: response_evicted'),
  b('ledger settling', 'outcome unknown: reconnect_given_up'),
  b('ledger settling', 'outcome unknown: stream_unresumable'),
  b('ledger settling', 'outcome unknown: server_restarted'),
  b('ledger settling', 'outcome unknown: transport_closed'),
  b('ledger settling', 'outcome unknown: server_closed_session'),
  b('ledger settling', 'outcome unknown: epoch_changed', 'nothing in src/ or the world sends log.reset'),
  b('server timing', 'idle session sleeps'),
  b('server timing', 'sleeping session wakes past its TTL'),
  b('server timing', 'read-back finds its cursor evicted → response ends'),
  b('replay dedupe', 'overlap dropped'),
  b('replay dedupe', 'answer without a pending request → orphan'),
];

const key = (group: string, name: string) => `${group}: ${name}`;

/** The close table's row for a decision, as `classifyClose` made it. */
function closeRow(d: CloseDecision | undefined, target: string, ctx: StreamContext): string | undefined {
  if (target === 'givenUp') return 'reconnects exhausted → given up';
  if (target === 'authorizing') return '401 → authorize, then the same request again';
  if (target === 'unauthorized') return '401, authorizations exhausted, never ran → UnauthorizedError';
  if (target === 'awaitingAuthorization')
    return '401, authorizations exhausted, may have run → wait for finishAuth';
  if (target === 'closedByServer') return 'event: close → closed by server';
  if (!d) return undefined;
  switch (d.action) {
    case 'reconnect': {
      const r = d.reason as string;
      if (r === 'server_error') return 'server error (5xx) → reconnect';
      if (r === 'end_of_stream') return 'end of stream → reconnect';
      if (r === 'throttled') return '408/425/429 → reconnect';
      if (r === 'conflict') return '409 without a loss → reconnect';
      return `${r} → reconnect`;
    }
    case 'session-terminated':
      return '404 → session terminated';
    case 'events-lost':
      if (d.gap.reason === 'epoch_changed') return '410 epoch changed → outcome unknown';
      if (target === 'responseEvicted') return '410 → gap, response evicted';
      if (ctx.stream.kind === 'standalone' && d.gap.resumeAfter === undefined)
        return '410 → gap, standalone stream starts over';
      return '410 → gap, resume at the oldest retained event';
    case 'stop':
      // A stop that a 404 decided is the not-found rule's row (`notFoundRow`).
      return notFoundRow(d, ctx) ? undefined : '204/405 → stop';
    case 'refuse':
      return 'other status → refused';
  }
}

/**
 * The not-found rule's row (machines/client/not-found.ts) for a decision a 404 made. A 405 to a standalone
 * GET that never opened reads as the 404 row here; the simulated server never answers 405.
 */
function notFoundRow(d: CloseDecision | undefined, ctx: StreamContext): string | undefined {
  if (d?.action === 'session-terminated')
    return exchangeFor(ctx).method === 'POST'
      ? 'POST 404 → session lost'
      : 'GET 404 for a stream served in this session → session lost';
  if (d?.action !== 'stop') return undefined;
  if (d.reason === StopReason.notFound) return 'GET 404 without a session id → only the stream ends';
  if (d.reason !== StopReason.notOffered) return undefined;
  if (ctx.stream.sessionId === undefined) return 'GET 404 without a session id → only the stream ends';
  return ctx.stream.kind === 'standalone' && !ctx.opened
    ? 'standalone GET never served, 404 → not offered, session kept'
    : undefined;
}

/** The POST-failure rule's branch, when the stream leaving `deciding` is a request that never got an id. */
function postFailureRow(ctx: StreamContext, target: string): string | undefined {
  const d = ctx.decision;
  if (ctx.stream.kind !== 'request' || ctx.lastEventId !== undefined || d?.action !== 'reconnect') return;
  if (target === 'backoff')
    return d.reason === 'refused' ? 'refused → re-send' : 'may have run, re-send safe → re-send';
  if (target === 'unresumable') return 'may have run, not re-send safe → outcome unknown';
  return undefined;
}

const SESSION_MOVES: Record<string, string> = {
  'active→reinitializing': '404 → re-initialize',
  'reinitializing→active': 're-initialized',
  'reinitializing→failed': 're-initialize failed → failed (the transport gives up)',
  'active→terminated': 'closed by server → terminated',
  'initializing→uninitialized': 'initialize failed',
};

const machineId = (snapshot: unknown): string | undefined =>
  (snapshot as { machine?: { id?: string } }).machine?.id;

const stateKey = (node: unknown): string => (node as { key?: string } | undefined)?.key ?? '?';

/** Client-side decisions, read off inspection of the client session actor and its stream actors. */
export function inspectClient(observe: Observe): (ev: InspectionEvent) => void {
  return (ev) => {
    if (ev.type === '@xstate.microstep') {
      const id = machineId(ev.snapshot);
      for (const t of ev._transitions) {
        const from = stateKey(t.source);
        const to = stateKey(t.target?.[0]);
        if (id === 'stream') {
          const ctx = (ev.snapshot as unknown as { context: StreamContext }).context;
          if (from === 'deciding') {
            const row = closeRow(ctx.decision, to, ctx);
            if (row) observe(key('close table', row));
            const rule = postFailureRow(ctx, to);
            if (rule) observe(key('POST-failure rule', rule));
            const notFound = notFoundRow(ctx.decision, ctx);
            if (notFound) observe(key('not-found rule', notFound));
          } else if (from === 'authorizing' && to === 'connecting' && ctx.stream.kind === 'request')
            observe(
              key(
                'POST-failure rule',
                ctx.lastEventId === undefined
                  ? 'unauthorized, authorized since → re-send (same id)'
                  : 'unauthorized, authorized since → resume (same Last-Event-ID)',
              ),
            );
          else if (from === 'streaming' && to === 'responseEvicted')
            observe(key('close table', '410 → gap, response evicted'));
        } else if (id === 'client') {
          const move = SESSION_MOVES[`${from}→${to}`];
          if (move) observe(key('session', move));
        }
      }
      return;
    }
    if (ev.type === '@xstate.event') {
      const e = ev.event as { type: string; events?: Array<{ id?: string }>; id?: string };
      if (e.type === 'sse.event' || e.type === 'sse.events') {
        const snap = (ev.actorRef as { getSnapshot?: () => { context?: StreamContext } }).getSnapshot?.();
        const ctx = snap?.context;
        const events = e.type === 'sse.events' ? (e.events ?? []) : [e];
        if (ctx?.recentIds && events.some((x) => x.id !== undefined && alreadyDelivered(ctx, x.id)))
          observe(key('replay dedupe', 'overlap dropped'));
      } else if (e.type === 'stream.ended') {
        const outcome = (e as unknown as { outcome: { kind: string; neverRan?: boolean } }).outcome;
        if (outcome.kind === 'session-terminated' && outcome.neverRan)
          observe(key('session', '404 to a POST that never ran → re-sent on the new session'));
      }
      return;
    }
    if (ev.type === '@xstate.action') {
      const params = ev.action.params as { message?: JsonRpcMessage } | undefined;
      if (ev.action.type === 'deliverOrphan')
        observe(key('replay dedupe', 'answer without a pending request → orphan'));
      else if (ev.action.type === 'deliver' && params?.message && isResponse(params.message))
        observe(key('ledger settling', settleRow(params.message)));
    }
  };
}

function settleRow(message: JsonRpcMessage): string {
  if ('result' in message) return 'result';
  const error = (message as { error: { code: number; data?: { reason?: string } } }).error;
  if (error.code === JsonRpcCode.OUTCOME_UNKNOWN) return `outcome unknown: ${error.data?.reason}`;
  if (error.code === JsonRpcCode.UNEXPECTED_STATUS) return 'error: unexpected HTTP status';
  if (error.code === JsonRpcCode.REQUEST_FAILED) return 'error: session has ended';
  return `error: ${error.code}`;
}

/** The server's answer to a cursor, as a row of the table. */
export function cursorRow(answer: ResumeAnswer): string {
  switch (answer.kind) {
    case 'replay':
      return key('cursor answer', 'replay');
    case 'gone':
      if (answer.reason === 'epoch_changed') return key('cursor answer', '410 epoch changed');
      return key(
        'cursor answer',
        answer.lostCount === null ? '410 window exceeded, size unknown' : '410 window exceeded, exact count',
      );
    case 'invalid':
      return key(
        'cursor answer',
        answer.reason === 'foreign_cursor' ? '400 foreign cursor' : '400 malformed cursor',
      );
    case 'unknown-session':
      return key('cursor answer', '404 unknown session');
  }
}

export const admissionRow = (name: string): string => key('admission', name);
export const dedupeRow = (name: string): string => key('dedupe', name);

/** The rows a decision of the simulated server reached (it runs the runtime's plans: world/server.ts). */
export function serverRows(o: ServerObservation): string[] {
  switch (o.kind) {
    case 'request': {
      const kind = o.decision.kind;
      const row = admissionRow(`request → ${kind === 'unknown-session' ? 'unknown session' : kind}`);
      return kind === 'duplicate'
        ? [row, dedupeRow('re-sent POST answered from its stream, not run')]
        : [row];
    }
    case 'attach':
      return [
        admissionRow(
          o.decision.kind === 'attach' ? `GET → attach from ${o.decision.from}` : 'GET → unknown session',
        ),
      ];
    case 'resume':
      return [cursorRow(o.answer)];
    case 'ran-again':
      return [dedupeRow('re-sent POST run again (server without de-duplication)')];
    case 'sweep':
      return [
        key(
          'server timing',
          o.verdict === 'sleep' ? 'idle session sleeps' : 'sleeping session wakes past its TTL',
        ),
      ];
    case 'read-back-lost':
      return [key('server timing', 'read-back finds its cursor evicted → response ends')];
  }
}

/** How many worlds reached each branch. */
export class CoverageTally {
  worlds = 0;
  readonly counts = new Map<string, number>();

  /** Adds one world's branches (each counted once per world). */
  add(reached: ReadonlySet<string>): void {
    this.worlds++;
    for (const k of reached) this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }

  /** Modelled branches no world reached. */
  unreached(): string[] {
    return BRANCHES.filter((x) => !x.notModelled && !this.counts.get(key(x.group, x.name))).map((x) =>
      key(x.group, x.name),
    );
  }

  /** The coverage table: per branch, worlds that reached it (and the share of all worlds). */
  table(): string {
    const known = new Set(BRANCHES.map((x) => key(x.group, x.name)));
    const extra = [...this.counts.keys()].filter((k) => !known.has(k)).sort();
    const lines = [`decision branches reached, of ${this.worlds} worlds:`];
    let group = '';
    for (const x of BRANCHES) {
      if (x.group !== group) {
        group = x.group;
        lines.push(`  ${group}`);
      }
      const n = this.counts.get(key(x.group, x.name)) ?? 0;
      const note = x.notModelled
        ? `  (not modelled: ${x.notModelled})`
        : n === 0
          ? '  ← REACHED BY NONE'
          : '';
      lines.push(`    ${String(n).padStart(7)} ${pct(n, this.worlds)}  ${x.name}${note}`);
    }
    if (extra.length > 0) lines.push('  other');
    for (const k of extra)
      lines.push(
        `    ${String(this.counts.get(k)).padStart(7)} ${pct(this.counts.get(k) ?? 0, this.worlds)}  ${k}`,
      );
    return lines.join('\n');
  }
}

const pct = (n: number, of: number): string =>
  `${of === 0 ? '  -  ' : `${((100 * n) / of).toFixed(1)}%`.padStart(6)}`;
