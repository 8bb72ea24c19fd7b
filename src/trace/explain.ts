import {
  type ActorStarted,
  type EventReceived,
  type StateReached,
  stateName,
  type TraceRecord,
} from './record.js';

/**
 * `mcp-continuity explain`: a trace told as a person reads an incident. Per machine actor (a 2025 session
 * and its streams, a 2026-07-28 call, a listen stream, a keyed request): how it ended and the chain that
 * led there, each wire fact (a status, a cut, a refused connection, an event id) beside the state it moved
 * the machine to and the decision the machine took. Pure: records in, lines out.
 */

/** One actor's story. */
export interface ActorStory {
  readonly actor: string;
  readonly machine: string;
  readonly id: string;
  readonly parent?: string;
  /** `answered`, `outcome-unknown (reason)`, `still active`… */
  readonly ending: string;
  /** The last wire fact and decision before the ending: the cause, in one line. */
  readonly why: string;
  readonly steps: readonly string[];
}

/** Events that only say bytes arrived: counted, not listed one by one. */
export const QUIET: ReadonlySet<string> = new Set(['sse.activity', 'attempt.activity']);

export function explainTrace(records: readonly TraceRecord[]): ActorStory[] {
  const actors = new Map<string, ActorStarted>();
  for (const r of records) if (r.k === 'actor' && r.machine) actors.set(r.a, r);
  const names = new Map<string, string>();
  for (const r of records) if (r.k === 'actor') names.set(r.a, r.id);
  const stories: ActorStory[] = [];
  for (const actor of actors.values()) {
    const mine = records.filter(
      (r): r is EventReceived | StateReached => (r.k === 'event' || r.k === 'state') && r.a === actor.a,
    );
    const steps: string[] = [];
    let quiet = 0;
    let lastFact = '';
    let lastDecision = '';
    let state = '';
    let ending = 'still active when the trace ends';
    let pending: EventReceived | undefined;
    for (const r of mine) {
      if (r.k === 'event') {
        if (QUIET.has(r.e.type)) {
          quiet++;
          continue;
        }
        pending = r;
        const fact = wireFact(r.e);
        if (fact) lastFact = `${fact} at ${seconds(r.t)}`;
        continue;
      }
      const next = stateName(r.value);
      const decision = r.decision !== undefined ? describeDecision(r.decision) : '';
      const moved = next !== state;
      const decided = decision !== '' && decision !== lastDecision;
      if (pending && (moved || decided || wireFact(pending.e))) {
        if (quiet > 0) steps.push(`          (${quiet} × bytes arrived)`);
        quiet = 0;
        const from =
          pending.from && pending.from !== actor.a ? ` from ${names.get(pending.from) ?? pending.from}` : '';
        const parts = [`${seconds(pending.t).padStart(9)}  ${describeEvent(pending.e)}${from}`];
        if (moved) parts.push(`→ ${next}`);
        if (decided) parts.push(`(decision: ${decision})`);
        steps.push(parts.join(' '));
      }
      if (decided) lastDecision = decision;
      state = next;
      pending = undefined;
      if (r.status === 'done') ending = describeOutput(r.output, next);
      else if (r.status === 'stopped') ending = `stopped in ${next}`;
    }
    if (quiet > 0) steps.push(`          (${quiet} × bytes arrived)`);
    const why = [lastFact && `last wire fact: ${lastFact}`, lastDecision && `decision: ${lastDecision}`]
      .filter(Boolean)
      .join('; ');
    stories.push({
      actor: actor.a,
      machine: actor.machine as string,
      id: actor.id,
      ...(actor.parent ? { parent: actor.parent } : {}),
      ending,
      why: why || 'no wire fact recorded',
      steps,
    });
  }
  return stories;
}

/** What the application was told about one request: its answer, and the cause of an outcome unknown. */
export interface CallTold {
  readonly t: number;
  /** The request's id as the application knows it. */
  readonly id: unknown;
  /** `result`, `error <code>`, `outcome unknown (<reason>)`. */
  readonly answer: string;
  /** For anything but a result: the last wire fact and decision before it, on any machine. */
  readonly cause?: string;
}

/** OUTCOME_UNKNOWN (machines/codes.ts), as the application receives it. */
const OUTCOME_UNKNOWN = -32050;

/** Every answer a machine delivered to the application, in order, each error with what led to it. */
export function callsTold(records: readonly TraceRecord[]): CallTold[] {
  const names = new Map<string, string>();
  for (const r of records) if (r.k === 'actor') names.set(r.a, r.id);
  const told: CallTold[] = [];
  let lastFact = '';
  let factAt = -1;
  // The decision the fact led to: its actor's next state (recorded once the actor's step is over, which
  // may be after the parent it told has already answered the application).
  const decisionAfter = (index: number): string | undefined => {
    const actor = records[index]?.a;
    for (let i = index + 1; i < records.length; i++) {
      const r = records[i] as TraceRecord;
      if (r.k === 'state' && r.a === actor)
        return r.decision !== undefined ? describeDecision(r.decision) : undefined;
    }
    return undefined;
  };
  for (const [index, r] of records.entries()) {
    if (r.k === 'event') {
      const fact = wireFact(r.e);
      if (fact) {
        lastFact = `${fact} on ${names.get(r.a) ?? r.a} at ${seconds(r.t)}`;
        factAt = index;
      }
      continue;
    }
    if (r.k !== 'action') continue;
    const message = (r.params as { message?: Record<string, unknown> } | undefined)?.message;
    if (!message || !('id' in message) || !('result' in message || 'error' in message)) continue;
    if ('result' in message) {
      told.push({ t: r.t, id: message.id, answer: 'result' });
      continue;
    }
    const error = message.error as { code?: unknown; data?: { reason?: unknown } } | undefined;
    const reason = typeof error?.data?.reason === 'string' ? error.data.reason : undefined;
    const answer =
      error?.code === OUTCOME_UNKNOWN
        ? `outcome unknown${reason ? ` (${reason})` : ''}`
        : `error ${String(error?.code)}${reason ? ` (${reason})` : ''}`;
    const decision = factAt >= 0 ? decisionAfter(factAt) : undefined;
    const cause = [lastFact && `after ${lastFact}`, decision && `its decision: ${decision}`]
      .filter(Boolean)
      .join('; ');
    told.push({ t: r.t, id: message.id, answer, ...(cause ? { cause } : {}) });
  }
  return told;
}

/** The calls' answers, then the machines' stories (children under their parent), as text. */
export function explainText(records: readonly TraceRecord[]): string {
  const calls = callsTold(records).map(
    (c) =>
      `${seconds(c.t).padStart(9)}  request ${String(c.id)}: ${c.answer}${c.cause ? ` — ${c.cause}` : ''}`,
  );
  return [
    ...(calls.length > 0 ? ['what the application was told:', ...calls, ''] : []),
    storiesText(records),
  ].join('\n');
}

function storiesText(records: readonly TraceRecord[]): string {
  const stories = explainTrace(records);
  const byParent = new Map<string | undefined, ActorStory[]>();
  const known = new Set(stories.map((s) => s.actor));
  for (const s of stories) {
    const p = s.parent && known.has(s.parent) ? s.parent : undefined;
    byParent.set(p, [...(byParent.get(p) ?? []), s]);
  }
  const out: string[] = [];
  const tell = (s: ActorStory, depth: number) => {
    const pad = '  '.repeat(depth);
    out.push(`${pad}${s.machine} ${s.id}: ${s.ending}`);
    out.push(`${pad}  why: ${s.why}`);
    for (const step of s.steps) out.push(`${pad}  ${step}`);
    for (const child of byParent.get(s.actor) ?? []) tell(child, depth + 1);
  };
  for (const s of byParent.get(undefined) ?? []) tell(s, 0);
  return out.join('\n');
}

/** What an event says about the network, if anything: a status, a cut, an end, an event id. */
export function wireFact(e: EventReceived['e']): string | undefined {
  switch (e.type) {
    case 'http.response':
      return `HTTP ${e.status}`;
    case 'http.stream':
      return 'event stream opened';
    case 'net.failed':
      return `connection ${e.fault === 'refused' ? 'refused' : e.fault === 'timeout' ? 'timed out' : 'reset'}`;
    case 'net.ended':
      return 'the stream ended without its answer';
    case 'attempt.ended': {
      const end = e.end as { kind?: string; status?: number } | undefined;
      return end?.kind === 'http-status'
        ? `attempt answered HTTP ${end.status}`
        : `attempt ended: ${end?.kind}`;
    }
    default:
      return undefined;
  }
}

/** A recorded event in a few words: its wire fact when it is one, else what it carried. */
export function describeEvent(e: EventReceived['e']): string {
  const fact = wireFact(e);
  if (fact) return fact;
  if (e.type === 'sse.event') return `event ${typeof e.id === 'string' ? e.id : '(no id)'}`;
  if (e.type === 'sse.events') {
    const events = (e.events as { id?: string }[] | undefined) ?? [];
    const last = [...events].reverse().find((x) => typeof x.id === 'string')?.id;
    return `${events.length} event(s)${last ? `, last id ${last}` : ''}`;
  }
  if (e.type === 'attempt.message')
    return `message${typeof e.eventId === 'string' ? ` (event ${e.eventId})` : ''}`;
  if (e.type.startsWith('xstate.after.')) return `timer ${e.type.split('.')[2] ?? ''} fired`;
  if (e.type.startsWith('xstate.done.actor')) return 'a child finished';
  const outcome = e.outcome as { kind?: unknown; reason?: unknown } | undefined;
  if (typeof outcome?.kind === 'string')
    return `${e.type} (${outcome.kind}${typeof outcome.reason === 'string' ? `: ${outcome.reason}` : ''})`;
  const message = e.message as { method?: unknown } | undefined;
  if (typeof message?.method === 'string') return `${e.type} ${message.method}`;
  return e.type;
}

function describeDecision(d: unknown): string {
  if (d === null || typeof d !== 'object') return String(d);
  const o = d as Record<string, unknown>;
  const head = [o.action, o.kind].find((x) => typeof x === 'string');
  const reason = typeof o.reason === 'string' ? o.reason : undefined;
  return [head, reason && `reason ${reason}`].filter(Boolean).join(', ') || JSON.stringify(d);
}

function describeOutput(output: unknown, state: string): string {
  if (output === null || typeof output !== 'object') return `ended in ${state}`;
  const o = output as Record<string, unknown>;
  const outcome = typeof o.outcome === 'string' ? o.outcome : state;
  const reason = typeof o.reason === 'string' ? ` (${o.reason})` : '';
  const attempts = typeof o.attempts === 'number' ? ` after ${o.attempts} attempt(s)` : '';
  return `${outcome}${reason}${attempts}`;
}

/** A trace time (ms since it began) as `12.301 s`. */
export function seconds(t: number): string {
  return `${(t / 1000).toFixed(3)} s`;
}
