import {
  caseOf,
  type StatelessCallContext,
  type StatelessCase,
  type StatelessDecision,
  type StatelessStreamEnd,
} from '../machines/client/stateless-decide.js';
import type { ServerObservation2026 } from './world2026/server.js';
import type { Observer2026 } from './world2026/world.js';

/**
 * Which decisions of the 2026-07-28 machines the simulated worlds reach: every row of the client's decision
 * table (`caseOf` of each stream end), what the row decided, every transition of the keyed-request
 * machine, every answer it gave, and the server's admission of unknown keys. A branch no world reaches is
 * one the properties cannot judge; the test fails on it unless it is marked not modelled, with why.
 */
interface Branch {
  readonly group: string;
  readonly name: string;
  readonly notModelled?: string;
}

const NO_APP_CANCEL = 'the simulated application never cancels a call';
const NEVER_SENT = 'the simulated server never answers it';

const TABLE_ROWS: ReadonlyArray<[StatelessCase, string?]> = [
  ['refused'],
  ['cut-before-response'],
  ['cut-mid-stream'],
  ['ended-without-answer'],
  ['stalled'],
  ['cancelled-by-application', NO_APP_CANCEL],
  ['result-complete'],
  ['result-input-required', 'the simulated tools never ask for input (MRTR)'],
  ['error-response', 'the simulated tools never answer a JSON-RPC error'],
  ['malformed-response', NEVER_SENT],
  ['ext-key-reused'],
  ['ext-events-evicted'],
  ['ext-outcome-unknown'],
  ['ext-cancelled', NO_APP_CANCEL],
  ['400-header-mismatch', 'the simulated client always sends matching headers'],
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
  ['500'],
  ['502-504'],
  ['other-4xx', NEVER_SENT],
  ['other-5xx', NEVER_SENT],
  ['unexpected-status', NEVER_SENT],
];

const b = (group: string, name: string, notModelled?: string): Branch => ({ group, name, notModelled });

export const BRANCHES_2026: readonly Branch[] = [
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
  b('keyed machine', 'running → finished.committed'),
  b('keyed machine', 'running → finished.answered'),
  b('keyed machine', 'finished.committed → finished.answered'),
  b('keyed machine', 'running → outcomeUnknown'),
  b('keyed machine', 'running → cancelled', NO_APP_CANCEL),
  b('keyed machine', 'finished → forgotten'),
  b('keyed machine', 'outcomeUnknown → forgotten'),
  b('keyed machine', 'cancelled → forgotten', NO_APP_CANCEL),
  b('keyed answer', 'attach'),
  b('keyed answer', 'recorded'),
  b('keyed answer', 'outcome'),
  b('keyed answer', 'refused'),
  b('keyed answer', 'evicted'),
  b('keyed answer', 'outcome-unknown'),
  b('keyed answer', 'cancelled', NO_APP_CANCEL),
  b('keyed answer', 'invalid-cursor', 'the simulated client only sends ids it was given'),
  b('unknown key', 'execute'),
  b('unknown key', 'outcome-unknown'),
  b('unkeyed request', 'run'),
  b('unkeyed request', 'cancelled-by-close'),
];

const key = (group: string, name: string) => `${group}: ${name}`;

/** The decision row's name, from what it decided. */
function decisionRow(end: StatelessStreamEnd, ctx: StatelessCallContext, d: StatelessDecision): string[] {
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

const stateName = (s: string): string => {
  if (s.startsWith('{')) {
    const sub = Object.values(JSON.parse(s) as Record<string, string>)[0];
    return `finished.${sub}`;
  }
  return s;
};

function serverRows(o: ServerObservation2026): string[] {
  switch (o.kind) {
    case 'admit':
      return [key('unknown key', o.decision)];
    case 'answer':
      return [key('keyed answer', o.answer)];
    case 'unkeyed':
      return [key('unkeyed request', o.event)];
    case 'state': {
      const from = stateName(o.from);
      const to = stateName(o.to);
      return [
        key(
          'keyed machine',
          `${from.startsWith('finished') && to === 'forgotten' ? 'finished' : from} → ${to}`,
        ),
      ];
    }
  }
}

/** Counts, per world, the branches it reached. */
export class CoverageTally2026 {
  worlds = 0;
  readonly counts = new Map<string, number>();

  /** An observer for one world; `done()` adds what it reached. */
  observer(): Observer2026 & { done(): void } {
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
    return BRANCHES_2026.filter((x) => !x.notModelled && !this.counts.get(key(x.group, x.name))).map((x) =>
      key(x.group, x.name),
    );
  }

  table(): string {
    const known = new Set(BRANCHES_2026.map((x) => key(x.group, x.name)));
    const lines = [`2026-07-28 decision branches reached, of ${this.worlds} worlds:`];
    let group = '';
    for (const x of BRANCHES_2026) {
      if (x.group !== group) lines.push(`  ${(group = x.group)}`);
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
