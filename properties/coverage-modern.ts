import {
  caseOf,
  type ModernCallCase,
  type ModernCallContext,
  type ModernCallDecision,
  type ModernCallStreamEnd,
} from '../machines/client/modern-call-decide.js';
import type { ModernServerObservation } from './world-modern/server.js';
import type { ModernObserver } from './world-modern/world.js';

/**
 * Which decisions of the 2026-07-28 machines the simulated worlds reach: every row of the client's decision
 * table (`caseOf` of each stream end), what the row decided (read off the call machine's context), every
 * move of a stored memo entry (by `keyedRequestMachine`), every plan `planKeyedCall` made and every way
 * `attachStep` ended a response. A branch no world reaches is
 * one the properties cannot judge; the test fails on it unless it is marked not modelled, with why.
 */
interface Branch {
  readonly group: string;
  readonly name: string;
  readonly notModelled?: string;
}

const NO_APP_CANCEL = 'the simulated application never cancels a call';
const NEVER_SENT = 'the simulated server never answers it';

const TABLE_ROWS: ReadonlyArray<[ModernCallCase, string?]> = [
  ['refused'],
  ['cut-before-response'],
  ['cut-mid-stream'],
  ['ended-without-answer'],
  ['stalled'],
  ['cancelled-by-application'],
  ['result-complete'],
  ['result-input-required', 'the simulated tools never ask for input (MRTR)'],
  // The simulated tools never answer one; a response attached while the SDK refuses the call gets the -32020.
  ['error-response'],
  ['malformed-response', NEVER_SENT],
  ['ext-key-reused'],
  ['ext-events-evicted'],
  ['ext-outcome-unknown'],
  ['ext-cancelled', NO_APP_CANCEL],
  ['400-header-mismatch'],
  ['400-unsupported-version', NEVER_SENT],
  ['400-missing-capability', NEVER_SENT],
  ['400-other', 'the simulated client never sends a malformed key'],
  ['401', NEVER_SENT],
  ['403', NEVER_SENT],
  ['404-method-not-found', NEVER_SENT],
  ['404-other', NEVER_SENT],
  ['405', NEVER_SENT],
  ['406', NEVER_SENT],
  ['413', NEVER_SENT],
  ['415', NEVER_SENT],
  ['429'],
  ['503'],
  ['503-no-retry-after'],
  ['500'],
  ['502-504'],
  ['other-4xx', NEVER_SENT],
  ['other-5xx', NEVER_SENT],
  ['unexpected-status', NEVER_SENT],
];

const b = (group: string, name: string, notModelled?: string): Branch => ({ group, name, notModelled });

export const BRANCHES_MODERN: readonly Branch[] = [
  ...TABLE_ROWS.map(([row, nm]) => b('table row', row, nm)),
  b('decision', 'deliver'),
  b('decision', 're-issue at once (a transport cut)'),
  b('decision', 're-issue after backoff'),
  b('decision', 're-issue through the extension (key + last event id)'),
  b('decision', 're-issue by annotations'),
  b('decision', 're-issue after a gap (exact count)'),
  b('decision', 'outcome unknown: no safe re-issue'),
  b('decision', 'outcome unknown: memo window passed'),
  b('decision', 'outcome unknown: re-issues given up'),
  b('decision', 'outcome unknown: the server cannot know'),
  b('decision', 'outcome unknown: a refusal after an attempt that may have run'),
  b('decision', 'fail: nothing ran'),
  // Stored entries (keyed-memo.ts): a finish is `answered` when a response of the owner instance waits on
  // the key's log, else `committed`; the plan does not store the `answered` a later re-issue moves it to.
  b('stored entry', 'running → committed'),
  b('stored entry', 'running → answered'),
  b('stored entry', 'running → outcomeUnknown'),
  b('stored entry', 'running → cancelled', NO_APP_CANCEL),
  b('stored entry', 'running → refused'),
  b('stored entry', 'refused → running'),
  b('stored entry', 'refused → forgotten'),
  b('stored entry', 'committed → forgotten'),
  b('stored entry', 'answered → forgotten'),
  b('stored entry', 'outcomeUnknown → forgotten'),
  b('stored entry', 'cancelled → forgotten', NO_APP_CANCEL),
  b('keyed plan', 'execute'),
  b('keyed plan', 'execute-over'),
  // Two copies of one POST (a proxy's retry) interleave their steps, one store command at a time.
  b('keyed plan', 'restart lost (another attempt restarted it)'),
  b('keyed plan', 'serve'),
  b('keyed plan', 'declare-died'),
  b('keyed plan', 'reply -32010 (key reused)'),
  b('keyed plan', 'reply -32011 (events evicted, exact count)'),
  b('keyed plan', 'reply -32012 (outcome unknown)'),
  b('keyed plan', 'reply -32013 (cancelled)', NO_APP_CANCEL),
  b(
    'keyed plan',
    'reply -32602 (invalid key or cursor)',
    'the simulated client only sends well-formed keys and ids it was given',
  ),
  b('attached response', 'outcome'),
  b('attached response', 'outcome-unknown'),
  b('attached response', 'the refusal (nothing ran)'),
  b(
    'attached response',
    'lost (events evicted under a reader)',
    'the simulated server writes every event at once; a slow reader is not modelled',
  ),
  b('attached response', 'cancelled', NO_APP_CANCEL),
  b('unkeyed request', 'run'),
  // With the extension, an unkeyed (read-only or idempotent) call streamed with keep-alives
  // (`streamsUnkeyedCall`); without it, or without keep-alives, the SDK's `auto` mode.
  b('unkeyed request', 'streamed'),
  b('unkeyed request', 'auto'),
  b('unkeyed request', 'cancelled-by-close'),
  b('unkeyed request', 'refused'),
];

const key = (group: string, name: string) => `${group}: ${name}`;

/** The decision row's name, from what it decided. */
function decisionRow(end: ModernCallStreamEnd, ctx: ModernCallContext, d: ModernCallDecision): string[] {
  switch (d.action) {
    case 'deliver':
      return ['deliver'];
    case 'reissue':
    case 'backoff-reissue': {
      const rows = [d.action === 'reissue' ? 're-issue at once (a transport cut)' : 're-issue after backoff'];
      if (d.gap) rows.push('re-issue after a gap (exact count)');
      else if (d.carry) rows.push('re-issue through the extension (key + last event id)');
      else if (end.kind !== 'refused' && end.kind !== 'http-status') rows.push('re-issue by annotations');
      return rows;
    }
    case 'outcome-unknown':
      if (d.reason === 'memo_window_passed') return ['outcome unknown: memo window passed'];
      if (d.reason === 'reissue_given_up') return ['outcome unknown: re-issues given up'];
      if (d.reason === 'server_outcome_unknown') return ['outcome unknown: the server cannot know'];
      if (ctx.mayHaveRunBefore && (end.kind === 'refused' || end.kind === 'http-status'))
        return ['outcome unknown: a refusal after an attempt that may have run'];
      return ['outcome unknown: no safe re-issue'];
    case 'fail':
      return ['fail: nothing ran'];
  }
}

const PLAN_NAMES: Record<string, string> = {
  'reply -32010': 'reply -32010 (key reused)',
  'reply -32011': 'reply -32011 (events evicted, exact count)',
  'reply -32012': 'reply -32012 (outcome unknown)',
  'reply -32013': 'reply -32013 (cancelled)',
  'reply -32602': 'reply -32602 (invalid key or cursor)',
};

function serverRows(o: ModernServerObservation): string[] {
  switch (o.kind) {
    case 'plan':
      return [key('keyed plan', PLAN_NAMES[o.plan] ?? o.plan)];
    case 'attach-end':
      return [key('attached response', o.end === 'lost' ? 'lost (events evicted under a reader)' : o.end)];
    case 'unkeyed':
      return [key('unkeyed request', o.event)];
    case 'state':
      return [key('stored entry', `${o.from} → ${o.to}`)];
  }
}

/** Counts, per world, the branches it reached. */
export class ModernCoverageTally {
  worlds = 0;
  readonly counts = new Map<string, number>();

  /** An observer for one world; `done()` adds what it reached. */
  observer(): ModernObserver & { done(): void } {
    const reached = new Set<string>();
    return {
      decision: (end, ctx, d) => {
        reached.add(key('table row', caseOf(end)));
        for (const r of decisionRow(end, ctx, d)) reached.add(key('decision', r));
      },
      server: (o) => {
        for (const r of serverRows(o)) reached.add(r);
      },
      done: () => {
        this.worlds++;
        for (const k of reached) this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
      },
    };
  }

  unreached(): string[] {
    return BRANCHES_MODERN.filter((x) => !x.notModelled && !this.counts.get(key(x.group, x.name))).map((x) =>
      key(x.group, x.name),
    );
  }

  table(): string {
    const known = new Set(BRANCHES_MODERN.map((x) => key(x.group, x.name)));
    const lines = [`2026-07-28 decision branches reached, of ${this.worlds} worlds:`];
    let group = '';
    for (const x of BRANCHES_MODERN) {
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
      lines.push(`    ${String(n).padStart(7)}  ${x.name}${note}`);
    }
    const extra = [...this.counts.keys()].filter((k) => !known.has(k)).sort();
    if (extra.length > 0) lines.push('  other (observed, not listed)');
    for (const k of extra) lines.push(`    ${String(this.counts.get(k)).padStart(7)}  ${k}`);
    return lines.join('\n');
  }
}
