import { HANG_MS, type Outcome, plural, settle, short } from './incidents.js';
import type { ModernStack, ModernStackConfig, ModernStackFactory } from './modern-stacks.js';

/**
 * The 2026-07-28 faults of issue 17 (item 5), run the same way on every stack of `MODERN_STACKS`:
 * 1. a balancer cuts connections idle for 300 ms during a 1.5 s charge;
 * 2. the same, the charge sending one progress notification first (the stream has bytes when it is cut);
 * 3. the server process is replaced on the same port 300 ms into a 1.5 s charge, then a follow-up call.
 */

export const CHARGE_MS = 1_500;
export const IDLE_CUT_MS = 300;
export const RESTART_AFTER_MS = 300;

export interface ModernRow {
  readonly incident: string;
  readonly stack: string;
  readonly charges: string;
  readonly got: string;
  /** From the call to its outcome, and from the fault to the outcome. */
  readonly time: string;
  readonly hangs: number;
  readonly notes: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function got(o: Outcome): string {
  switch (o.kind) {
    case 'result':
      return `result "${short(o.text, 40)}"`;
    case 'outcome unknown':
      return `outcome unknown (${short(o.message, 60)})`;
    case 'error':
      return `error: ${short(o.message, 60)}`;
    case 'hang':
      return `nothing (no outcome in ${HANG_MS / 1000} s)`;
  }
}

function time(o: Outcome, faultAt: number | undefined, callAt: number): string {
  if (o.kind === 'hang') return `> ${HANG_MS / 1000} s`;
  const afterFault =
    faultAt === undefined ? '' : `, ${Math.round(callAt + o.ms - faultAt)} ms after the fault`;
  return `${o.ms} ms${afterFault}`;
}

function errorSummary(errors: readonly string[]): string {
  if (errors.length === 0) return 'client onerror: none';
  const counts = new Map<string, number>();
  for (const e of errors) counts.set(short(e, 80), (counts.get(short(e, 80)) ?? 0) + 1);
  return `client onerror (${errors.length}): ${[...counts].map(([k, n]) => (n > 1 ? `${n}× "${k}"` : `"${k}"`)).join('; ')}`;
}

async function withStack<T>(
  factory: ModernStackFactory,
  config: ModernStackConfig,
  body: (s: ModernStack) => Promise<T>,
): Promise<T> {
  const stack = await factory(config);
  try {
    return await body(stack);
  } finally {
    await stack.close();
  }
}

/**
 * Watches the proxy's cuts (the balancer's idle timeout). The fault a call's outcome answers is the last
 * cut before that outcome: an idle keep-alive connection left from connecting may be cut first.
 */
function cuts(s: ModernStack): { before: (t: number) => number | undefined; count: () => number } {
  const at: number[] = [];
  s.proxy.on('fault', (e) => {
    if (e.type === 'cut') at.push(performance.now());
  });
  return {
    before: (t) => at.filter((x) => x <= t).at(-1),
    count: () => at.length,
  };
}

async function idleCut(factory: ModernStackFactory, progress: boolean): Promise<ModernRow> {
  return withStack(factory, { idleTimeoutMs: IDLE_CUT_MS }, async (s) => {
    const cut = cuts(s);
    const seen: number[] = [];
    const callAt = performance.now();
    const outcome = await settle(
      s.call('charge', { key: 'card-4242', ms: CHARGE_MS, progress }, { onprogress: (p) => seen.push(p) }),
    );
    const charges = s.world.charges.get('card-4242') ?? 0;
    return {
      incident: progress
        ? `2. idle cut (${IDLE_CUT_MS} ms) after a progress notification, ${CHARGE_MS / 1000} s charge`
        : `1. idle cut (${IDLE_CUT_MS} ms) during a ${CHARGE_MS / 1000} s charge`,
      stack: s.label,
      charges: plural(charges, 'charge'),
      got: got(outcome),
      time: time(outcome, cut.before(callAt + outcome.ms), callAt),
      hangs: outcome.kind === 'hang' ? 1 : 0,
      notes: [
        `the balancer cut ${plural(cut.count(), 'connection')}; ${plural(seen.length, 'progress notification')} delivered`,
        ...s.notes(),
        errorSummary(s.errors),
      ],
    };
  });
}

/** 1. A balancer's idle cut during a long charge. */
export const modernIncident1 = (f: ModernStackFactory) => idleCut(f, false);
/** 2. The same cut after the call's stream carried a progress notification. */
export const modernIncident2 = (f: ModernStackFactory) => idleCut(f, true);

/** 3. The instance restarts during the charge; then a follow-up call on the same client. */
export function modernIncident3(factory: ModernStackFactory): Promise<ModernRow> {
  return withStack(factory, {}, async (s) => {
    const callAt = performance.now();
    const call = settle(s.call('charge', { key: 'card-4242', ms: CHARGE_MS }));
    await sleep(RESTART_AFTER_MS);
    const restartAt = performance.now();
    s.restart();
    const outcome = await call;
    const followUp = await settle(s.call('echo', { text: 'follow-up' }));
    const charges = s.world.charges.get('card-4242') ?? 0;
    return {
      incident: `3. instance restart ${RESTART_AFTER_MS} ms into a ${CHARGE_MS / 1000} s charge`,
      stack: s.label,
      charges: plural(charges, 'charge'),
      got: `${got(outcome)}; follow-up: ${followUp.kind === 'result' ? 'ok' : got(followUp)}`,
      time: time(outcome, restartAt, callAt),
      hangs: (outcome.kind === 'hang' ? 1 : 0) + (followUp.kind === 'hang' ? 1 : 0),
      notes: [...s.notes(), errorSummary(s.errors)],
    };
  });
}

export const MODERN_INCIDENTS = [modernIncident1, modernIncident2, modernIncident3];
