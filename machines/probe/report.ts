/**
 * The probe's report card, as data, and the two decisions over it that do not belong to one check: the
 * exit status and the rendering. Pure.
 */

export type Era = '2025-11-25' | '2026-07-28';

/**
 * - `passed` / `failed`: the server did / did not do what `requirement` asks.
 * - `not-checked`: the probe could not or would not look (`detail` says why: nothing to look at, the
 *   server does not offer that part, or it needs a tool the user did not name).
 * - `observed`: a fact with no right answer in the spec (what a retention is, what a cut did).
 */
export type CheckStatus = 'passed' | 'failed' | 'not-checked' | 'observed';

/**
 * Where the requirement comes from. `MUST` is the spec's (RFC 2119), the only level whose failure makes
 * the probe exit non-zero. `continuity`: what this project holds a server to for continuity (a client
 * can tell a lost event from a delivered one); no spec text requires it.
 */
export type Level = 'MUST' | 'SHOULD' | 'MAY' | 'extension MUST' | 'continuity' | 'info';

export interface Check {
  /** Stable: `2025.get-stream`, `2026.discover`. Users match on it in `--json`. */
  readonly id: string;
  readonly era: Era;
  readonly title: string;
  readonly level: Level;
  readonly status: CheckStatus;
  /** What the probe saw, or why it did not look. */
  readonly detail: string;
  /** The requirement, quoted or summed up, with where it is written (shown on a failure). */
  readonly requirement?: string;
}

export interface ProbeReport {
  readonly url: string;
  /** False when no request got an HTTP answer at all (nothing listens there, DNS, TLS...). */
  readonly reachable: boolean;
  readonly checks: readonly Check[];
}

/** A maker of one era's checks: ids are prefixed with the era's year (`2025.get-stream`). */
export function checksOf(era: Era) {
  return (
    id: string,
    title: string,
    level: Level,
    status: CheckStatus,
    detail: string,
    requirement?: string,
  ): Check => ({
    id: `${era.slice(0, 4)}.${id}`,
    era,
    title,
    level,
    status,
    detail,
    ...(requirement ? { requirement } : {}),
  });
}

/**
 * Exit status of `mcp-continuity probe`: 1 when a MUST of the spec (or of the extension advertised)
 * failed; 3 when the server never answered (a probe that saw nothing has not passed anything).
 * (2 is the command line's: unusable arguments.)
 */
export function exitStatus(report: Pick<ProbeReport, 'checks' | 'reachable'>): 0 | 1 | 3 {
  if (!report.reachable) return 3;
  return report.checks.some(
    (c) => c.status === 'failed' && (c.level === 'MUST' || c.level === 'extension MUST'),
  )
    ? 1
    : 0;
}

/** Whose words a requirement is: the spec's, the extension's, or this project's continuity bar. */
const source = (level: Level): string =>
  level === 'continuity'
    ? 'mcp-continuity asks'
    : level === 'extension MUST'
      ? 'the extension says'
      : 'the spec says';

const MARK: Readonly<Record<CheckStatus, string>> = {
  passed: 'passed',
  failed: 'FAILED',
  'not-checked': 'not checked',
  observed: 'observed',
};

/** Counts by status, for the summary line. */
export function tally(checks: readonly Check[]): Readonly<Record<CheckStatus, number>> {
  const t: Record<CheckStatus, number> = { passed: 0, failed: 0, 'not-checked': 0, observed: 0 };
  for (const c of checks) t[c.status]++;
  return t;
}

function summary(report: ProbeReport): string {
  const t = tally(report.checks);
  const mustFailed = report.checks.filter(
    (c) => c.status === 'failed' && (c.level === 'MUST' || c.level === 'extension MUST'),
  ).length;
  return `${t.passed} passed, ${t.failed} failed (${mustFailed} of them MUSTs), ${t['not-checked']} not checked, ${t.observed} observed`;
}

/** The report for a terminal: one block per check, grouped by era. */
export function renderText(report: ProbeReport): string {
  const lines = [`mcp-continuity probe ${report.url}`, ''];
  if (!report.reachable) lines.push('The server did not answer any request (see below).', '');
  for (const era of ['2025-11-25', '2026-07-28'] as const) {
    const checks = report.checks.filter((c) => c.era === era);
    if (checks.length === 0) continue;
    lines.push(`MCP ${era}`);
    for (const c of checks) {
      lines.push(`  [${MARK[c.status]}] ${c.title} (${c.level})`);
      lines.push(`      ${c.detail}`);
      if (c.status === 'failed' && c.requirement) lines.push(`      ${source(c.level)}: ${c.requirement}`);
    }
    lines.push('');
  }
  lines.push(summary(report));
  return lines.join('\n');
}

const capital = (s: string) => `${s.charAt(0).toUpperCase()}${s.slice(1)}`;
const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The report as a Markdown table (docs/probe/*.md). */
export function renderMarkdown(report: ProbeReport, title: string, preface = ''): string {
  const lines = [`# ${title}`, ''];
  if (preface) lines.push(preface, '');
  for (const era of ['2025-11-25', '2026-07-28'] as const) {
    const checks = report.checks.filter((c) => c.era === era);
    if (checks.length === 0) continue;
    lines.push(`## MCP ${era}`, '', '| Check | Level | Result | What the probe saw |', '|---|---|---|---|');
    for (const c of checks) {
      const seen =
        c.status === 'failed' && c.requirement
          ? `${c.detail}. ${capital(source(c.level))}: ${c.requirement}`
          : c.detail;
      lines.push(`| ${cell(c.title)} | ${c.level} | ${MARK[c.status]} | ${cell(seen)} |`);
    }
    lines.push('');
  }
  lines.push(summary(report), '');
  return lines.join('\n');
}
