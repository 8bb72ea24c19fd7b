import { ContinuityMeta } from '../../machines/continuity-extension.js';
import type { CallAttemptView, ModernView } from './wire.js';

/**
 * What the page shows of a 2026-07-28 machine, kept by the hub per actor from what its feed sends: the
 * snapshots (the machine's own context), the events it took and the few actions the feed forwards. Only
 * reads: every fact here is one the machine already holds or was told.
 *
 * - `modernCall` (the client's call): one row per attempt — its id, the HTTP status and bytes it got,
 *   how it ended and what the machine decided on that end.
 * - `keyedRequest` (the server's work for one key): the attempts that reached it and what each was
 *   answered, and how many bodies it started (the "one charge").
 * - `listen` (a `subscriptions/listen` stream): its position, re-opens and each gap (exact or unknown).
 */
export interface ModernTracker {
  /** Each returns true when the view changed. */
  snapshot(value: unknown, status: string, context: unknown): boolean;
  event(event: Obj, bytes: number | undefined): boolean;
  /** An action the feed forwarded (`xstate.emit`, with its event in `params.event`). */
  action(type: string, params: unknown): boolean;
  view(): ModernView;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined =>
  typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined;
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** The machine ids (`createMachine({ id })`) of the 2026 machines the page draws with their own facts. */
export const MODERN_MACHINES = ['modernCall', 'keyedRequest', 'listen'] as const;

/** What the machines emit that the page needs (`xstate.emit` actions): the feed forwards only these. */
const FORWARDED_EMITS = new Set(['keyed.start', 'keyed.answer', 'listen.gap']);

/** True for an `xstate.emit` action carrying one of the events above. */
export function isForwardedEmit(action: { type: string; params?: unknown }): boolean {
  return action.type === 'xstate.emit' && FORWARDED_EMITS.has(String(obj(obj(action.params).event).type));
}

export function trackerFor(machine: string): ModernTracker | undefined {
  if (machine === 'modernCall') return new CallTracker();
  if (machine === 'keyedRequest') return new KeyedTracker();
  if (machine === 'listen') return new ListenTracker();
  return undefined;
}

/**
 * `memoKey(principal, key)` is `<principal length>:<principal>|<key>`: read back into its parts, so the
 * server's key is matched with the client's call.
 */
export function splitMemoKey(memoKey: string): { principal: string; key: string } | undefined {
  const colon = memoKey.indexOf(':');
  const length = Number(memoKey.slice(0, colon));
  if (colon < 1 || !Number.isInteger(length) || length < 0) return undefined;
  const bar = colon + 1 + length;
  if (memoKey[bar] !== '|') return undefined;
  return { principal: memoKey.slice(colon + 1, bar), key: memoKey.slice(bar + 1) };
}

/** Only the attempts a page can read: the newest ones of a call that was re-issued without end. */
const MAX_ATTEMPTS = 50;

class CallTracker implements ModernTracker {
  private requestId = '?';
  private tool: string | undefined;
  private key: string | undefined;
  private readonly attempts: CallAttemptView[] = [];
  /** The attempt events are counted against (the machine's `attempts`, last seen in a snapshot). */
  private current = 0;
  /** The current attempt got a response: its status was 200 unless its end names another. */
  private responded = false;
  private outcome: string | undefined;
  private reason: string | undefined;

  snapshot(value: unknown, status: string, context: unknown): boolean {
    const c = obj(context);
    const request = obj(c.request);
    this.requestId = str(request.id) ?? this.requestId;
    this.tool = str(obj(request.params).name) ?? this.tool;
    this.key = str(c.idempotencyKey) ?? this.key;
    const n = num(c.attempts);
    if (n === undefined) return true;
    if (n !== this.current) this.responded = false;
    this.current = n;
    const sent = obj(c.current);
    const meta = obj(obj(sent.params)._meta);
    // The attempt's row exists from its first snapshot: its messages are counted as they come.
    const row = this.row(n, str(sent.id) ?? '?');
    this.put(
      n,
      n > 0 && ContinuityMeta.lastEventId in meta
        ? { ...row, lastEventId: str(meta[ContinuityMeta.lastEventId]) ?? null }
        : row,
    );
    const end = obj(c.end);
    const decision = obj(c.decision);
    if (typeof end.kind === 'string' && typeof decision.action === 'string') {
      const status = num(end.status) ?? (this.responded ? 200 : undefined);
      this.put(n, {
        ...this.row(n, row.id),
        end: end.kind === 'http-status' ? `HTTP ${status}` : end.kind,
        decision: decision.action,
        ...(str(decision.reason) ? { reason: str(decision.reason) } : {}),
        ...(num(decision.delayMs) !== undefined ? { delayMs: num(decision.delayMs) } : {}),
        ...(status !== undefined ? { status } : {}),
      });
    }
    if (status === 'done' && typeof value === 'string') {
      this.outcome = value;
      this.reason = str(decision.reason);
    }
    return true;
  }

  event(event: Obj, bytes: number | undefined): boolean {
    const row = this.attempts.find((a) => a.n === this.current);
    // A response arrived; which status is known at the attempt's end (only a 200 is read as a stream).
    if (event.type === 'attempt.activity') {
      this.responded = true;
      return false;
    }
    if (event.type !== 'attempt.message' || !row) return false;
    const size = bytes ?? JSON.stringify(event.message ?? null).length;
    this.put(row.n, { ...row, messages: row.messages + 1, bytes: row.bytes + size });
    return true;
  }

  action(): boolean {
    return false;
  }

  view(): ModernView {
    return {
      kind: 'call',
      requestId: this.requestId,
      ...(this.tool !== undefined ? { tool: this.tool } : {}),
      ...(this.key !== undefined ? { key: this.key } : {}),
      attempts: [...this.attempts],
      ...(this.outcome !== undefined ? { outcome: this.outcome } : {}),
      ...(this.reason !== undefined ? { reason: this.reason } : {}),
    };
  }

  private row(n: number, id: string): CallAttemptView {
    return this.attempts.find((a) => a.n === n) ?? { n, id, messages: 0, bytes: 0 };
  }

  private put(n: number, row: CallAttemptView): void {
    const i = this.attempts.findIndex((a) => a.n === n);
    if (i >= 0) this.attempts[i] = row;
    else {
      this.attempts.push(row);
      if (this.attempts.length > MAX_ATTEMPTS) this.attempts.shift();
    }
  }
}

/** The answers `keyedRequestMachine` gives an attempt (`keyed.answer`), as the page words them. */
const ANSWER_WORDS: Record<string, string> = {
  attach: 'attached to the running work',
  recorded: 'got the recorded outcome',
  outcome: 'answered with the outcome',
  refused: 'refused: key reused with other arguments',
  cancelled: 'cancelled',
  'outcome-unknown': 'outcome unknown',
  'start-over': 'runs again (the earlier attempt was refused before it ran)',
  evicted: 'refused: events evicted (410)',
  'invalid-cursor': 'refused: unknown last event id',
};

/** How an attempt is worded until its answer is known. */
const ARRIVED = new Set(['sent first', 're-issue arrived']);

class KeyedTracker implements ModernTracker {
  private key = '?';
  private principal = '';
  private state = 'running';
  private executions = 0;
  private readonly attempts: { id: string; answer: string }[] = [];

  snapshot(value: unknown, _status: string, context: unknown): boolean {
    const c = obj(context);
    const parts = typeof c.memoKey === 'string' ? splitMemoKey(c.memoKey) : undefined;
    if (parts) ({ key: this.key, principal: this.principal } = parts);
    // `finished.committed` is shown as the memo stores it: `committed`.
    this.state = typeof value === 'string' ? value : (str(obj(value).finished) ?? this.state);
    // The first attempt is the input's attacher: it is in `attached` before any event names it.
    const first = Array.isArray(c.attached) ? str(c.attached[0]) : undefined;
    // The body starts on entry, so `keyed.start` may come before the first snapshot names the attempt.
    if (this.attempts.length === 0 && first !== undefined)
      this.attempt(first, this.executions > 0 ? 'started the body' : 'sent first');
    return true;
  }

  event(event: Obj): boolean {
    if (event.type !== 'reissue.arrived') return false;
    this.attempt(str(event.attacher) ?? '?', 're-issue arrived');
    return true;
  }

  action(type: string, params: unknown): boolean {
    if (type !== 'xstate.emit') return false;
    const e = obj(obj(params).event);
    if (e.type === 'keyed.start') {
      this.executions++;
      const first = this.attempts[0];
      if (first && ARRIVED.has(first.answer)) first.answer = 'started the body';
      return true;
    }
    if (e.type !== 'keyed.answer') return false;
    const kind = String(obj(e.answer).kind);
    this.attempt(str(e.attacher) ?? '?', ANSWER_WORDS[kind] ?? kind);
    return true;
  }

  view(): ModernView {
    return {
      kind: 'keyed',
      key: this.key,
      principal: this.principal,
      state: this.state,
      executions: this.executions,
      attempts: this.attempts.map((a) => ({ ...a })),
    };
  }

  /**
   * An attempt seen again keeps its place, and is worded by its first answer: the one it got when it
   * arrived. (The outcome later sent to every watcher of the work also names streams long cut: the
   * runtime tells the machine only whether someone watches, not who.)
   */
  private attempt(id: string, answer: string): void {
    const known = this.attempts.find((a) => a.id === id);
    if (known) {
      if (ARRIVED.has(known.answer)) known.answer = answer;
    } else {
      this.attempts.push({ id, answer });
      if (this.attempts.length > MAX_ATTEMPTS) this.attempts.shift();
    }
  }
}

/** Gaps kept per listen stream: the newest. */
const MAX_GAPS = 50;

class ListenTracker implements ModernTracker {
  private subscriptionId = '?';
  private currentId = '?';
  private position: string | undefined;
  private reopens = 0;
  private readonly gaps: { missed: number | null; attempts: number }[] = [];

  snapshot(_value: unknown, _status: string, context: unknown): boolean {
    const c = obj(context);
    this.subscriptionId = str(obj(c.request).id) ?? this.subscriptionId;
    this.currentId = str(c.currentId) ?? this.currentId;
    this.position = str(c.lastPosition) ?? this.position;
    this.reopens = num(c.reopens) ?? this.reopens;
    return true;
  }

  event(): boolean {
    return false;
  }

  action(type: string, params: unknown): boolean {
    const e = obj(obj(params).event);
    if (type !== 'xstate.emit' || e.type !== 'listen.gap') return false;
    const gap = obj(e.gap);
    const missed = obj(gap.missed);
    this.gaps.push({
      missed: missed.kind === 'exact' ? (num(missed.count) ?? null) : null,
      attempts: num(gap.attempts) ?? 0,
    });
    if (this.gaps.length > MAX_GAPS) this.gaps.shift();
    return true;
  }

  view(): ModernView {
    return {
      kind: 'listen',
      subscriptionId: this.subscriptionId,
      currentId: this.currentId,
      ...(this.position !== undefined ? { position: this.position } : {}),
      reopens: this.reopens,
      gaps: [...this.gaps],
    };
  }
}
