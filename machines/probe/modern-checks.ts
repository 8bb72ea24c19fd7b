import {
  CONTINUITY_EXTENSION,
  ContinuityErrorCode,
  parseContinuitySettings,
} from '../continuity-extension.js';
import { type Check, checksOf } from './report.js';
import { answerPhrase, describeAnswer, type Exchange, errorOf, record, responseTo } from './wire.js';

/**
 * What each MCP 2026-07-28 answer means, and what the continuity extension (docs/continuity-extension.md)
 * asks of a server that advertises it. The I/O shell (src/cli/probe/modern.ts) gathers `ModernFacts`.
 * Pure.
 */

/** A call the probe cut (closed its stream `cutAfterMs` after sending), then sent again. */
export interface CutTry {
  readonly cutAfterMs: number;
  readonly cut: Exchange;
  readonly reissue: Exchange;
  readonly reissueId: string | number;
}

export interface ModernFacts {
  readonly discover: Exchange;
  readonly discoverId: string | number;
  /** An unkeyed call of the named read-only tool, cut, then re-issued as a new request. */
  readonly cut?: CutTry;
  readonly cutSkipped?: string;
  /** The same with an idempotency key, re-issued with the key and `lastEventId`; then the key reused. */
  readonly keyed?: CutTry & {
    readonly lastEventId: string | null;
    /** The same key on a request with another tool name: the extension refuses it (409, -32010). */
    readonly reuse: Exchange;
    readonly reuseId: string | number;
  };
  readonly keyedSkipped?: string;
}

const EXT_DOC = 'docs/continuity-extension.md';
const REQ = {
  settings: `a server advertising ${CONTINUITY_EXTENSION} gives memoWindowMs, eventRetentionMs, maxEventsPerRequest and maxKeyLength (>= 64) as positive integers (${EXT_DOC} §2)`,
  reissue: `a re-issue of running or finished keyed work is attached to it or answered the recorded response, never executed again (${EXT_DOC} §4)`,
  reuse: `a key used before with a different request is answered -32010 (HTTP 409), and nothing runs (${EXT_DOC} §4)`,
} as const;

const check = checksOf('2026-07-28');

/** The `server/discover` result, if the server answered one. */
export function discoverResult(
  f: Pick<ModernFacts, 'discover' | 'discoverId'>,
): Record<string, unknown> | undefined {
  return record(responseTo(f.discover, f.discoverId)?.result);
}

/** Whether the continuity extension is advertised with settings a client can read. */
export function continuityAdvertised(result: Record<string, unknown> | undefined): boolean {
  return parseContinuitySettings(result?.capabilities) !== undefined;
}

function extensions(result: Record<string, unknown>): Check[] {
  const caps = record(result.capabilities);
  const ext = record(caps?.extensions) ?? {};
  const names = Object.keys(ext);
  const tasks = caps?.tasks !== undefined || names.some((n) => /(^|\/)tasks$/.test(n));
  const listed = check(
    'extensions',
    'extensions advertised',
    'info',
    'observed',
    `${names.length ? names.join(', ') : 'none'}; tasks: ${tasks ? 'advertised' : 'not advertised'}`,
  );
  if (!(CONTINUITY_EXTENSION in ext))
    return [listed, check('continuity', 'continuity extension', 'info', 'observed', 'not advertised')];
  const settings = parseContinuitySettings(caps);
  const continuity = settings
    ? check(
        'continuity',
        'continuity extension',
        'extension MUST',
        'passed',
        `outcomes remembered ${settings.memoWindowMs} ms, events kept ${settings.eventRetentionMs} ms (at most ${settings.maxEventsPerRequest} per request), keys up to ${settings.maxKeyLength} characters`,
      )
    : check(
        'continuity',
        'continuity extension',
        'extension MUST',
        'failed',
        `advertised as ${JSON.stringify(ext[CONTINUITY_EXTENSION])}`,
        REQ.settings,
      );
  return [listed, continuity];
}

/** How a cut attempt ended, in words. */
function describeCut(t: CutTry): string {
  if (t.cut.end !== 'timeout')
    return `answered before the cut at ${t.cutAfterMs} ms (${describeAnswer(t.cut)}): nothing was cut`;
  const before =
    t.cut.firstByteMs === undefined
      ? 'before any byte of the answer'
      : `after ${t.cut.events.length} event(s)`;
  return `cut at ${t.cutAfterMs} ms, ${before}`;
}

function cut(f: ModernFacts): Check {
  const title = 'a cut named read-only call';
  const t = f.cut;
  if (!t) return check('cut', title, 'info', 'not-checked', f.cutSkipped ?? 'no tool named');
  const answer = responseTo(t.reissue, t.reissueId);
  const outcome = answer
    ? `re-issued as a new request: ${'result' in answer ? 'answered' : `error ${errorOf(t.reissue)?.code}`} in ${Math.round(t.reissue.ms)} ms (a new request: the tool runs again; the cut attempt's outcome stays unknown to the client)`
    : `re-issued as a new request: ${describeAnswer(t.reissue)}`;
  return check('cut', title, 'info', 'observed', `${describeCut(t)}; ${outcome}`);
}

function keyed(f: ModernFacts, advertised: boolean): Check[] {
  const t = f.keyed;
  if (!t)
    return [
      check(
        'keyed-reissue',
        'keyed re-issue after a cut',
        advertised ? 'extension MUST' : 'info',
        'not-checked',
        f.keyedSkipped ?? (advertised ? 'no tool named' : 'the continuity extension is not advertised'),
      ),
    ];
  const answer = responseTo(t.reissue, t.reissueId);
  const seen = `${describeCut(t)}; re-issued with the same key and lastEventId ${t.lastEventId === null ? 'null' : `"${t.lastEventId}"`}: ${describeAnswer(t.reissue)}`;
  const reissue = check(
    'keyed-reissue',
    'keyed re-issue after a cut',
    'extension MUST',
    answer !== undefined && 'result' in answer ? 'passed' : 'failed',
    seen,
    REQ.reissue,
  );
  const error = errorOf(t.reuse);
  const refused = t.reuse.status === 409 && error?.code === ContinuityErrorCode.KEY_REUSED;
  const reuse = check(
    'key-reuse',
    'the key reused for another request',
    'extension MUST',
    refused ? 'passed' : 'failed',
    `same key, another tool name: ${describeAnswer(t.reuse)}`,
    REQ.reuse,
  );
  return [reissue, reuse];
}

/** Every 2026-07-28 check, in report order. */
export function judgeModern(f: ModernFacts): Check[] {
  const result = discoverResult(f);
  const versions = result?.supportedVersions;
  if (!result || !Array.isArray(versions) || !versions.includes('2026-07-28'))
    return [
      check(
        'discover',
        'server/discover',
        'info',
        'not-checked',
        `${answerPhrase(f.discover)}: the server does not serve 2026-07-28 here, so no 2026 check ran`,
      ),
    ];
  const discover = check('discover', 'server/discover', 'info', 'observed', `serves ${versions.join(', ')}`);
  return [discover, ...extensions(result), cut(f), ...keyed(f, continuityAdvertised(result))];
}
