import { ADVERTISEMENT_CAPABILITY, ADVERTISEMENT_HEADER, parseAdvertisement } from '../advertisement.js';
import type { ServerAdvertisement } from '../validity.js';
import { type Check, checksOf, type Level } from './report.js';
import { assessSessionIds, MIN_SESSION_ID_BITS } from './session-ids.js';
import {
  answerPhrase,
  describeAnswer,
  type Exchange,
  errorOf,
  firstEventId,
  isEventStream,
  messagesOf,
  record,
  responseTo,
} from './wire.js';

/**
 * What each 2025-11-25 answer means (MCP Streamable HTTP, transports, revision 2025-11-25). The I/O shell
 * (src/cli/probe/legacy.ts) gathers `LegacyFacts`; `judgeLegacy` turns them into checks. Pure.
 */

/** A cursor the probe sent as `Last-Event-ID`, and what came back. */
export interface CursorTry {
  readonly cursor: string;
  readonly answer: Exchange;
}

export interface LegacyFacts {
  readonly initialize: Exchange;
  /** The request id of that initialize (its response is what a resume should replay). */
  readonly initializeId: string | number;
  /** A GET with the session id and no cursor. */
  readonly getStream?: Exchange;
  /** A GET with `Last-Event-ID` = the first event id of the initialize stream, right away. */
  readonly resume?: CursorTry;
  /** The same cursor after waiting past the advertised retention (`waitedMs`). */
  readonly evicted?: CursorTry & { readonly waitedMs: number };
  /** Why the evicted cursor was not tried (no retention advertised, too long to wait...). */
  readonly evictedSkipped?: string;
  /** A cursor more events behind the head of its stream than the server says it keeps (`countEvictedCursor`). */
  readonly evictedByCount?: CursorTry & { readonly behind: number; readonly maxEvents: number };
  /** A cursor issued in another session, sent on this one. */
  readonly foreign?: CursorTry;
  /** A `Last-Event-ID` that no server issues. */
  readonly malformed?: CursorTry;
  /** DELETE of the session, then a request with its id. */
  readonly deleted?: { readonly del: Exchange; readonly after: Exchange };
  /** An initialize carrying a foreign `Origin`. */
  readonly origin?: Exchange;
  /** Session ids of several initializes (this one first). */
  readonly sessionIds: readonly string[];
  /** A named read-only tool called twice with one request id, in the session. */
  readonly duplicate?: { readonly first: Exchange; readonly second: Exchange; readonly id: string | number };
  /** Why the duplicate was not tried (no tool named, not said to be read-only). */
  readonly duplicateSkipped?: string;
}

const SPEC = 'MCP 2025-11-25, Streamable HTTP';
const REQ = {
  priming: `the server SHOULD immediately send an SSE event consisting of an event ID and an empty data field in order to prime the client to reconnect (${SPEC}, Sending Messages)`,
  get: `the server MUST either return Content-Type: text/event-stream in response to this HTTP GET, or else return HTTP 405 Method Not Allowed (${SPEC}, Listening for Messages)`,
  resume: `the server MAY use Last-Event-ID to replay messages that would have been sent after the last event ID, on the stream that was disconnected (${SPEC}, Resumability)`,
  otherStream: `the server MUST NOT replay messages that would have been delivered on a different stream (${SPEC}, Resumability)`,
  gap: 'a cursor the server cannot resume from is refused (400/404/410, a 410 saying how many events were lost), never answered as a resumed stream: otherwise a client cannot tell lost events from none (mcp-continuity design note, condition 3)',
  deleted: `the server MAY terminate the session at any time, after which it MUST respond to requests containing that session ID with HTTP 404 Not Found (${SPEC}, Session Management)`,
  origin: `servers MUST validate the Origin header on all incoming connections; if the Origin header is present and invalid, servers MUST respond with HTTP 403 Forbidden (${SPEC}, Security Warning)`,
  idChars: `the session ID MUST only contain visible ASCII characters (0x21 to 0x7E) (${SPEC}, Session Management)`,
  idSecure: `the session ID SHOULD be globally unique and cryptographically secure, e.g. a securely generated UUID, a JWT or a cryptographic hash (${SPEC}, Session Management)`,
} as const;

const check = checksOf('2025-11-25');

/** The retention promise of a server, from the `MCP-Continuity` header or the initialize capability. */
export function advertisedRetention(initialize: Exchange): ServerAdvertisement | undefined {
  const header = parseAdvertisement(initialize.headers[ADVERTISEMENT_HEADER.toLowerCase()]);
  if (header) return header;
  for (const m of messagesOf(initialize)) {
    const experimental = record(record(record(record(m)?.result)?.capabilities)?.experimental);
    const cap = record(experimental?.[ADVERTISEMENT_CAPABILITY]);
    if (cap) {
      const num = (k: string) =>
        typeof cap[k] === 'number' && (cap[k] as number) >= 0 ? (cap[k] as number) : undefined;
      return {
        retentionMs: num('retentionMs'),
        maxEventsPerStream: num('maxEventsPerStream'),
        idleTtlMs: num('idleTtlMs'),
        heartbeatMs: num('heartbeatMs'),
        gapSignalling: cap.gapSignalling === true,
        duplicateRequestProtection: cap.duplicateRequestProtection === true,
      };
    }
  }
  return undefined;
}

/**
 * How long to wait before sending a cursor as an evicted one: the advertised retention plus a margin,
 * or `userWaitMs` when the user gave one; skipped (with why) when there is neither or it is over `capMs`.
 */
export function evictionWait(
  advertised: ServerAdvertisement | undefined,
  userWaitMs: number | undefined,
  capMs: number,
): { readonly waitMs: number } | { readonly skipped: string } {
  if (userWaitMs !== undefined)
    return userWaitMs <= capMs
      ? { waitMs: userWaitMs }
      : {
          skipped: `--evict-wait ${userWaitMs} is longer than the probe waits (${capMs} ms; raise --max-wait)`,
        };
  const retention = advertised?.retentionMs;
  if (retention === undefined)
    return {
      skipped:
        'the server advertises no retention, so the probe cannot know when a cursor is evicted (give --evict-wait <ms> to wait that long and try)',
    };
  const waitMs = Math.ceil(retention * 1.2) + 100;
  if (waitMs > capMs)
    return {
      skipped: `the advertised retention (${retention} ms) is longer than the probe waits (${capMs} ms; raise --max-wait)`,
    };
  return { waitMs };
}

/**
 * A cursor the server's own advertisement says is evicted: the first event id of a stream that then
 * carried more events than the advertised `max-events` per stream. Undefined when there is none.
 */
export function countEvictedCursor(
  advertised: ServerAdvertisement | undefined,
  stream: Exchange,
): { readonly cursor: string; readonly behind: number; readonly maxEvents: number } | undefined {
  const maxEvents = advertised?.maxEventsPerStream;
  const ids = stream.events.flatMap((e) => (e.id ? [e.id] : []));
  const [cursor, ...after] = ids;
  if (maxEvents === undefined || cursor === undefined || after.length <= maxEvents) return undefined;
  return { cursor, behind: after.length, maxEvents };
}

/** Whether the server answered the probe's initialize (so the 2025 checks can go on). */
export const initializeAnswered = (f: Pick<LegacyFacts, 'initialize' | 'initializeId'>): boolean =>
  f.initialize.status === 200 && responseTo(f.initialize, f.initializeId) !== undefined;

/** The session id an initialize answer set, if any. */
export const sessionIdOf = (initialize: Exchange): string | undefined => initialize.headers['mcp-session-id'];

/** What an answer to a refused-or-resumed cursor was, in one word. */
export type CursorAnswer =
  | { readonly kind: 'gone'; readonly lostCount?: number }
  | { readonly kind: 'refused'; readonly status: number }
  | { readonly kind: 'replayed'; readonly messages: number }
  | { readonly kind: 'silent' }
  | { readonly kind: 'not-offered' }
  /** 409: refused because of a stream the server still holds open, not because of the cursor. */
  | { readonly kind: 'conflict' }
  | { readonly kind: 'other'; readonly status: number };

export function readCursorAnswer(x: Exchange): CursorAnswer {
  if (x.status === 410) {
    const data = record(errorOf(x)?.data);
    const lost = data?.lostCount;
    return typeof lost === 'number' ? { kind: 'gone', lostCount: lost } : { kind: 'gone' };
  }
  if (x.status === 405) return { kind: 'not-offered' };
  if (x.status === 409) return { kind: 'conflict' };
  if (x.status === 400 || x.status === 404 || x.status === 416) return { kind: 'refused', status: x.status };
  if (x.status === 200 && isEventStream(x)) {
    const messages = messagesOf(x).length;
    return messages > 0 ? { kind: 'replayed', messages } : { kind: 'silent' };
  }
  return { kind: 'other', status: x.status };
}

function describeCursorAnswer(a: CursorAnswer, x: Exchange): string {
  switch (a.kind) {
    case 'gone': {
      const reason = record(errorOf(x)?.data)?.reason;
      const why = typeof reason === 'string' ? ` (${reason})` : '';
      return a.lostCount === undefined
        ? `410${why}, without a count of lost events`
        : `410${why} with ${a.lostCount} event(s) lost`;
    }
    case 'refused':
      return `refused: ${describeAnswer(x)}`;
    case 'replayed':
      return `200 event stream replaying ${a.messages} message(s)`;
    case 'silent':
      return '200 event stream with nothing replayed (a silent resume at the head)';
    case 'not-offered':
      return '405 (no GET stream)';
    case 'conflict':
      return `409, a conflict with a stream the server still holds (${describeAnswer(x)}), not an answer about the cursor`;
    case 'other':
      return describeAnswer(x);
  }
}

function priming(f: LegacyFacts): Check {
  const title = 'priming event id on a POST stream';
  if (!isEventStream(f.initialize))
    return check(
      'priming',
      title,
      'SHOULD',
      'not-checked',
      `initialize was answered ${describeAnswer(f.initialize)}: no stream to prime`,
    );
  const first = f.initialize.events[0];
  if (first?.id && first.data === '')
    return check('priming', title, 'SHOULD', 'passed', `first event: id "${first.id}", empty data`);
  return check(
    'priming',
    title,
    'SHOULD',
    'failed',
    first
      ? `first event has ${first.id ? `id "${first.id}" but data` : 'no id'}`
      : 'the stream carried no event',
    REQ.priming,
  );
}

function retention(f: LegacyFacts): Check {
  const a = advertisedRetention(f.initialize);
  const title = 'advertised retention and session TTL';
  if (!a)
    return check(
      'retention',
      title,
      'info',
      'observed',
      `none advertised (the spec has no field for it; mcp-continuity servers send the ${ADVERTISEMENT_HEADER} header)`,
    );
  const parts = [
    a.retentionMs !== undefined ? `events kept ${a.retentionMs} ms` : undefined,
    a.maxEventsPerStream !== undefined ? `at most ${a.maxEventsPerStream} per stream` : undefined,
    a.idleTtlMs !== undefined ? `idle session TTL ${a.idleTtlMs} ms` : undefined,
    a.heartbeatMs !== undefined ? `heartbeat every ${a.heartbeatMs} ms` : undefined,
    a.gapSignalling ? 'gaps answered 410' : undefined,
    a.duplicateRequestProtection ? 'duplicate request ids de-duplicated' : undefined,
  ].filter((p): p is string => p !== undefined);
  return check('retention', title, 'info', 'observed', parts.join(', ') || 'advertised, but empty');
}

function getStream(f: LegacyFacts): Check {
  const title = 'GET stream (200 event stream or 405)';
  const x = f.getStream;
  if (!x) return check('get-stream', title, 'MUST', 'not-checked', 'not tried');
  if (x.status === 405)
    return check('get-stream', title, 'MUST', 'passed', '405: the server offers no GET stream');
  if (x.status === 200 && isEventStream(x)) {
    const id = firstEventId(x);
    return check(
      'get-stream',
      title,
      'MUST',
      'passed',
      `200 event stream${id ? `, priming id "${id}"` : ', no event id before the probe closed it'}`,
    );
  }
  return check('get-stream', title, 'MUST', 'failed', describeAnswer(x), REQ.get);
}

function resume(f: LegacyFacts): Check {
  const title = 'resume with Last-Event-ID';
  const t = f.resume;
  if (!t)
    return check(
      'resume',
      title,
      'MAY',
      'not-checked',
      'the server issued no event id on the initialize stream: nothing to resume from',
    );
  const a = readCursorAnswer(t.answer);
  const replayedInit = responseTo(t.answer, f.initializeId) !== undefined;
  if (a.kind === 'replayed' && replayedInit)
    return check(
      'resume',
      title,
      'MAY',
      'passed',
      `cursor "${t.cursor}" (initialize stream's priming event): the initialize response was replayed`,
    );
  if (a.kind === 'not-offered')
    return check('resume', title, 'MAY', 'not-checked', '405: the server offers no GET, so no resumption');
  return check(
    'resume',
    title,
    'MAY',
    'failed',
    `cursor "${t.cursor}": ${describeCursorAnswer(a, t.answer)}; the initialize response after it was not replayed`,
    REQ.resume,
  );
}

function evicted(f: LegacyFacts): Check {
  const title = 'evicted cursor';
  const t = f.evicted;
  if (!t)
    return check(
      'evicted-cursor',
      title,
      'continuity',
      'not-checked',
      f.evictedSkipped ?? 'no cursor to try',
    );
  const a = readCursorAnswer(t.answer);
  const seen = `after ${t.waitedMs} ms, cursor "${t.cursor}": ${describeCursorAnswer(a, t.answer)}`;
  if (a.kind === 'conflict') return check('evicted-cursor', title, 'continuity', 'not-checked', seen);
  if (a.kind === 'gone' || a.kind === 'refused')
    return check('evicted-cursor', title, 'continuity', 'passed', seen);
  if (a.kind === 'replayed' && responseTo(t.answer, f.initializeId) !== undefined)
    return check(
      'evicted-cursor',
      title,
      'continuity',
      'not-checked',
      `${seen}: still retained, so not evicted yet`,
    );
  return check('evicted-cursor', title, 'continuity', 'failed', seen, REQ.gap);
}

function evictedByCount(f: LegacyFacts): Check {
  const title = 'cursor behind more events than the server keeps';
  const t = f.evictedByCount;
  if (!t)
    return check(
      'evicted-count',
      title,
      'continuity',
      'not-checked',
      'needs a read-only tool whose stream carries more events than the advertised max-events per stream (the probe asks for progress)',
    );
  const a = readCursorAnswer(t.answer);
  const seen = `cursor "${t.cursor}", ${t.behind} events behind (max-events ${t.maxEvents}): ${describeCursorAnswer(a, t.answer)}`;
  if (a.kind === 'conflict') return check('evicted-count', title, 'continuity', 'not-checked', seen);
  if (a.kind === 'gone' || a.kind === 'refused')
    return check('evicted-count', title, 'continuity', 'passed', seen);
  if (a.kind === 'replayed' && a.messages >= t.behind)
    return check(
      'evicted-count',
      title,
      'continuity',
      'not-checked',
      `${seen}: all retained, so not evicted`,
    );
  return check('evicted-count', title, 'continuity', 'failed', seen, REQ.gap);
}

function foreign(f: LegacyFacts): Check {
  const title = "another session's cursor";
  const t = f.foreign;
  if (!t) return check('foreign-cursor', title, 'MUST', 'not-checked', 'needs event ids from two sessions');
  const a = readCursorAnswer(t.answer);
  const seen = `cursor "${t.cursor}": ${describeCursorAnswer(a, t.answer)}`;
  if (a.kind === 'replayed') return check('foreign-cursor', title, 'MUST', 'failed', seen, REQ.otherStream);
  if (a.kind === 'gone' || a.kind === 'refused')
    return check('foreign-cursor', title, 'MUST', 'passed', seen);
  if (a.kind === 'not-offered' || a.kind === 'conflict')
    return check('foreign-cursor', title, 'MUST', 'not-checked', seen);
  return check('foreign-cursor', title, 'continuity', 'failed', seen, REQ.gap);
}

function malformed(f: LegacyFacts): Check {
  const title = 'malformed cursor';
  const t = f.malformed;
  if (!t) return check('malformed-cursor', title, 'continuity', 'not-checked', 'no session to try it in');
  const a = readCursorAnswer(t.answer);
  const seen = `cursor "${t.cursor}": ${describeCursorAnswer(a, t.answer)}`;
  if (a.kind === 'refused' || a.kind === 'gone')
    return check('malformed-cursor', title, 'continuity', 'passed', seen);
  if (a.kind === 'not-offered' || a.kind === 'conflict')
    return check('malformed-cursor', title, 'continuity', 'not-checked', seen);
  return check('malformed-cursor', title, 'continuity', 'failed', seen, REQ.gap);
}

function deleted(f: LegacyFacts): Check {
  const title = '404 after DELETE';
  const d = f.deleted;
  if (!d) return check('deleted', title, 'MUST', 'not-checked', 'the server issued no session id');
  if (d.del.status === 405)
    return check(
      'deleted',
      title,
      'MUST',
      'not-checked',
      'DELETE answered 405: the server does not let clients end sessions (allowed)',
    );
  const seen = `DELETE ${describeAnswer(d.del)}; then a request with that session id: ${describeAnswer(d.after)}`;
  if (d.del.status < 200 || d.del.status > 299) return check('deleted', title, 'MUST', 'not-checked', seen);
  return check('deleted', title, 'MUST', d.after.status === 404 ? 'passed' : 'failed', seen, REQ.deleted);
}

function origin(f: LegacyFacts): Check {
  const title = 'Origin checking';
  const x = f.origin;
  if (!x) return check('origin', title, 'MUST', 'not-checked', 'not tried');
  const seen = `initialize with Origin https://mcp-continuity-probe.invalid: ${describeAnswer(x)}`;
  if (x.status === 403) return check('origin', title, 'MUST', 'passed', seen);
  if (x.status >= 200 && x.status <= 299)
    return check('origin', title, 'MUST', 'failed', `${seen} (accepted)`, REQ.origin);
  return check('origin', title, 'MUST', 'failed', `${seen} (refused, but not with 403)`, REQ.origin);
}

function sessionIds(f: LegacyFacts): Check[] {
  const ids = f.sessionIds;
  if (ids.length === 0)
    return [
      check(
        'session-id',
        'session id entropy',
        'SHOULD',
        'not-checked',
        'the server issued no session id (stateless)',
      ),
    ];
  const a = assessSessionIds(ids);
  const chars = check(
    'session-id-chars',
    'session id characters',
    'MUST',
    a.visibleAscii ? 'passed' : 'failed',
    `${ids.length} id(s), ${a.visibleAscii ? 'all' : 'not all'} visible ASCII`,
    REQ.idChars,
  );
  if (ids.length < 2)
    return [
      chars,
      check('session-id', 'session id entropy', 'SHOULD', 'not-checked', 'only one session id to look at'),
    ];
  const sample = ids[0] ?? '';
  const seen = `${ids.length} ids like "${sample.length > 12 ? `${sample.slice(0, 12)}...` : sample}" (${sample.length} chars): ${a.basis}`;
  const ok = a.distinct && !a.sequential && a.estimatedBits >= MIN_SESSION_ID_BITS;
  return [
    chars,
    check('session-id', 'session id entropy', 'SHOULD', ok ? 'passed' : 'failed', seen, REQ.idSecure),
  ];
}

function duplicate(f: LegacyFacts): Check {
  const title = 'a re-sent request id';
  const d = f.duplicate;
  if (!d) return check('duplicate-id', title, 'info', 'not-checked', f.duplicateSkipped ?? 'no tool named');
  const first = responseTo(d.first, d.id);
  const second = responseTo(d.second, d.id);
  const same =
    first !== undefined && second !== undefined && JSON.stringify(first) === JSON.stringify(second);
  const seen = `the same tools/call id sent twice in one session: first ${describeAnswer(d.first)}; second ${describeAnswer(d.second)}`;
  const verdict =
    second === undefined
      ? 'the second got no response of its own'
      : errorOf(d.second) !== undefined && errorOf(d.first) === undefined
        ? 'the second was refused'
        : same
          ? 'both answers are identical (de-duplicated, or the tool is deterministic: a black box cannot tell)'
          : 'the answers differ: the tool ran twice';
  return check('duplicate-id', title, 'info', 'observed', `${seen}; ${verdict}`);
}

/** Every 2025-11-25 check, in report order. */
export function judgeLegacy(f: LegacyFacts): Check[] {
  if (!initializeAnswered(f)) {
    return [
      check(
        'initialize',
        'initialize',
        'info',
        'not-checked',
        `initialize ${answerPhrase(f.initialize)}: the server does not serve 2025-11-25 sessions here, so no 2025 check ran`,
      ),
    ];
  }
  if (f.sessionIds.length === 0) {
    // Stateless: cursors and sessions have nothing to name (every request stands alone).
    const none = 'the server issued no session id (stateless): no session to resume in or end';
    const skipped = (id: string, title: string, level: Level) => check(id, title, level, 'not-checked', none);
    return [
      priming(f),
      retention(f),
      getStream(f),
      skipped('resume', 'resume with Last-Event-ID', 'MAY'),
      skipped('evicted-cursor', 'evicted cursor', 'continuity'),
      skipped('evicted-count', 'cursor behind more events than the server keeps', 'continuity'),
      skipped('foreign-cursor', "another session's cursor", 'MUST'),
      skipped('malformed-cursor', 'malformed cursor', 'continuity'),
      skipped('deleted', '404 after DELETE', 'MUST'),
      origin(f),
      ...sessionIds(f),
      duplicate(f),
    ];
  }
  return [
    priming(f),
    retention(f),
    getStream(f),
    resume(f),
    evicted(f),
    evictedByCount(f),
    foreign(f),
    malformed(f),
    deleted(f),
    origin(f),
    ...sessionIds(f),
    duplicate(f),
  ];
}
