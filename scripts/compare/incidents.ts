import { isOutcomeUnknown } from '../../src/index.js';
import { makeStack, STACK_LABEL, type Stack, type StackConfig, type StackKind } from './stacks.js';

/** No outcome within this long counts as a hang. */
export const HANG_MS = 5_000;

export interface Row {
  readonly incident: string;
  readonly stack: string;
  readonly sideEffects: string;
  readonly delivered: string;
  readonly lostSilently: string;
  readonly gapsFlagged: string;
  readonly duplicates: string;
  readonly outcome: string;
  readonly hangs: number;
  /** Details behind the row: what the client reported, what the proxy cut, what the server did. */
  readonly notes: string[];
}

export type Outcome =
  | { kind: 'result'; ms: number; text: string }
  | { kind: 'outcome unknown'; ms: number; message: string }
  | { kind: 'error'; ms: number; message: string; code?: unknown }
  | { kind: 'hang'; ms: number };

/** Waits for a call at most HANG_MS. The call's promise is always handled, so a late rejection is harmless. */
export async function settle(call: Promise<unknown>, ms = HANG_MS): Promise<Outcome> {
  const start = performance.now();
  const elapsed = () => Math.round(performance.now() - start);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hang = new Promise<Outcome>((r) => {
    timer = setTimeout(() => r({ kind: 'hang', ms: elapsed() }), ms);
  });
  const outcome = call.then(
    (value): Outcome => ({ kind: 'result', ms: elapsed(), text: resultText(value) }),
    (error: unknown): Outcome => {
      const message = error instanceof Error ? error.message : String(error);
      return isOutcomeUnknown(error)
        ? { kind: 'outcome unknown', ms: elapsed(), message }
        : { kind: 'error', ms: elapsed(), message, code: (error as { code?: unknown }).code };
    },
  );
  const first = await Promise.race([outcome, hang]);
  clearTimeout(timer);
  return first;
}

function resultText(value: unknown): string {
  const content = (value as { content?: Array<{ text?: string }> } | undefined)?.content;
  return content?.[0]?.text ?? JSON.stringify(value);
}

export const short = (s: string, n = 90) => {
  const one = s.replace(/\s+/g, ' ');
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
};

/** An error's code and the JSON-RPC message inside an HTTP error body, if there is one. */
function errorLabel(o: Extract<Outcome, { kind: 'error' | 'outcome unknown' }>): string {
  const inner = /"message":"([^"]*)"/.exec(o.message)?.[1];
  const code = 'code' in o && o.code !== undefined ? `${o.code}: ` : '';
  return short(`${code}${inner ?? o.message}`, 60);
}

function describe(o: Outcome): string {
  switch (o.kind) {
    case 'result':
      return `result in ${o.ms} ms`;
    case 'outcome unknown':
      return `outcome unknown after ${o.ms} ms`;
    case 'error':
      return `error after ${o.ms} ms`;
    case 'hang':
      return `no outcome in ${HANG_MS / 1000} s`;
  }
}

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Duplicate call outcomes: responses the SDK Client received for a request already settled. */
const duplicateResponses = (s: Stack) =>
  s.errors.filter((e) => /response for an unknown message ID/i.test(e)).length;

/** Client errors, grouped and counted, for the notes. */
function errorSummary(errors: readonly string[]): string {
  if (errors.length === 0) return 'client onerror: none';
  const counts = new Map<string, number>();
  for (const e of errors) {
    const key = short(e.replace(/\{.*\}/s, '{…}'), 80);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return `client onerror (${errors.length}): ${[...counts].map(([k, n]) => (n > 1 ? `${n}× "${k}"` : `"${k}"`)).join('; ')}`;
}

async function withStack<T>(
  kind: StackKind,
  config: StackConfig,
  body: (s: Stack) => Promise<T>,
): Promise<T> {
  const stack = await makeStack(kind, config);
  try {
    return await body(stack);
  } finally {
    await stack.close();
  }
}

/**
 * Incident 1: a load balancer idle-times-out the call's stream during a long charge. No heartbeats, the
 * proxy cuts connections idle for 150 ms, the charge answers after 600 ms.
 */
export function incident1(kind: StackKind): Promise<Row> {
  return withStack(kind, { idleTimeoutMs: 150 }, async (s) => {
    const cuts: string[] = [];
    s.proxy.on('fault', (e) => e.type === 'cut' && cuts.push(e.label));
    const before = s.sessionId();
    const outcome = await settle(
      s.client.callTool({ name: 'charge', arguments: { key: 'card-4242', ms: 600 } }),
    );
    const charges = s.world.charges.get('card-4242') ?? 0;
    const sameSession = s.sessionId() === before;
    const postCuts = cuts.filter((l) => l.startsWith('POST')).length;
    return {
      incident: '1. LB idle timeout during a long charge',
      stack: STACK_LABEL[kind],
      sideEffects: plural(charges, 'charge'),
      delivered: '—',
      lostSilently: '—',
      gapsFlagged: '—',
      duplicates: String(duplicateResponses(s)),
      outcome: `${describe(outcome)}; ${plural(s.world.sessions, 'session')}`,
      hangs: outcome.kind === 'hang' ? 1 : 0,
      notes: [
        outcome.kind === 'result'
          ? `result "${outcome.text}"`
          : outcome.kind === 'hang'
            ? 'the call had no outcome'
            : `the call failed: "${short(outcome.message)}"`,
        `session id ${sameSession ? 'kept' : 'changed'}; the balancer cut ${plural(cuts.length, 'connection')} (${postCuts} POST)`,
        errorSummary(s.errors),
      ],
    };
  });
}

/**
 * Incident 2: a bounded buffer (100 events per stream) and a long disconnect during a chatty tool: 150
 * progress notifications 1 ms apart; the call's POST connection is cut after the third arrives, and the
 * client stays away ~700 ms.
 */
export function incident2(kind: StackKind): Promise<Row> {
  const total = 150;
  return withStack(kind, { maxEventsPerStream: 100, reconnectDelayMs: 700 }, async (s) => {
    const progress: number[] = [];
    const call = s.client.callTool(
      { name: 'chatty', arguments: { count: total, intervalMs: 1 } },
      undefined,
      {
        onprogress: (p) => progress.push(p.progress),
      },
    );
    const deadline = Date.now() + HANG_MS;
    while (progress.length < 3 && Date.now() < deadline) await sleep(1);
    const atCut = progress.length;
    const cut = s.proxy.reset((c) => c.label.startsWith('POST'));
    const outcome = await settle(call);
    await sleep(50); // notifications queued behind the result
    const unique = new Set(progress);
    const missing = Array.from({ length: total }, (_, i) => i + 1).filter((n) => !unique.has(n));
    // A report without a count covers every missing event; a count covers that many.
    const reported = s.gaps.some((g) => g.lostCount === undefined)
      ? missing.length
      : s.gaps.reduce((n, g) => n + (g.lostCount ?? 0), 0);
    const lateDropped = s.errors.filter((e) => /progress notification for an unknown token/i.test(e)).length;
    const lostSilently = Math.max(0, missing.length - reported);
    const flagged =
      s.kind === 'ours'
        ? `${plural(s.gaps.length, 'gap')}${s.gaps.length ? `, ${s.gaps.map((g) => `${g.lostCount ?? '?'} lost (${g.reason})`).join(', ')}` : ''}`
        : '0 (no gap signal)';
    return {
      incident: '2. bounded buffer (100), long disconnect, chatty tool',
      stack: STACK_LABEL[kind],
      sideEffects: plural(s.world.runs.get('chatty') ?? 0, 'chatty run'),
      delivered: `${unique.size}/${total}`,
      lostSilently: String(lostSilently),
      gapsFlagged: flagged,
      duplicates: String(progress.length - unique.size + duplicateResponses(s)),
      outcome: describe(outcome),
      hangs: outcome.kind === 'hang' ? 1 : 0,
      notes: [
        `reset ${plural(cut, 'connection')} opened by a POST (the call's among them) once ${atCut} notifications had arrived`,
        missing.length
          ? `not delivered: ${ranges(missing)}${lateDropped ? ` (${lateDropped} of them arrived after the result and were dropped by the Client as "unknown token")` : ''}`
          : 'every notification delivered',
        outcome.kind === 'result'
          ? `result "${outcome.text}"`
          : outcome.kind === 'hang'
            ? 'the call had no outcome'
            : `the call failed: "${short(outcome.message)}"`,
        ...s.serverNotes(),
        errorSummary(s.errors),
      ],
    };
  });
}

/**
 * Incident 3: the server process restarts (same port, sessions in memory gone) while a charge is in
 * flight; then a follow-up call on the same client.
 */
export function incident3(kind: StackKind): Promise<Row> {
  return withStack(kind, {}, async (s) => {
    const before = s.sessionId();
    const sessionsBefore = s.world.sessions;
    const call = settle(s.client.callTool({ name: 'charge', arguments: { key: 'card-4242', ms: 500 } }));
    await sleep(100);
    s.restart();
    const outcome = await call;
    const followUp = await settle(s.client.callTool({ name: 'echo', arguments: { text: 'follow-up' } }));
    const reinitialized = s.world.sessions > sessionsBefore;
    const charges = s.world.charges.get('card-4242') ?? 0;
    const followText =
      followUp.kind === 'result'
        ? 'ok'
        : followUp.kind === 'hang'
          ? 'hang'
          : `${followUp.kind} (${errorLabel(followUp)})`;
    return {
      incident: '3. 404 after a server restart, call in flight',
      stack: STACK_LABEL[kind],
      sideEffects: plural(charges, 'charge'),
      delivered: '—',
      lostSilently: '—',
      gapsFlagged: s.kind === 'ours' ? plural(s.gaps.length, 'gap') : '0 (no gap signal)',
      duplicates: String(duplicateResponses(s)),
      outcome: `${describe(outcome)}; re-initialized by itself: ${reinitialized ? 'yes' : 'no'}; follow-up call: ${followText}`,
      hangs: (outcome.kind === 'hang' ? 1 : 0) + (followUp.kind === 'hang' ? 1 : 0),
      notes: [
        outcome.kind === 'result'
          ? `result "${outcome.text}"`
          : outcome.kind === 'hang'
            ? 'the charge had no outcome'
            : `the charge failed: "${short(outcome.message)}"`,
        `sessions created: ${s.world.sessions}; session id ${s.sessionId() === before ? 'unchanged' : 'changed'}; follow-up: ${followText}`,
        ...s.gaps.map((g) => `gap reported: ${g.reason}, ${g.lostCount ?? 'unknown'} events`),
        errorSummary(s.errors),
      ],
    };
  });
}

/** 1,2,3,7,8 → "1–3, 7–8". */
function ranges(ns: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < ns.length; ) {
    let j = i;
    while (j + 1 < ns.length && (ns[j + 1] as number) === (ns[j] as number) + 1) j++;
    out.push(i === j ? `${ns[i]}` : `${ns[i]}–${ns[j]}`);
    i = j + 1;
  }
  return `${ns.length} (${out.join(', ')})`;
}
