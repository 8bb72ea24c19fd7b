/**
 * The 2025-11-25 half of `mcp-continuity probe`: the requests it sends (sessions, GET, cursors, DELETE,
 * Origin) and what came back, as `LegacyFacts` for machines/probe/legacy-checks.ts.
 */
import { randomUUID } from 'node:crypto';
import {
  advertisedRetention,
  countEvictedCursor,
  evictionWait,
  initializeAnswered,
  type LegacyFacts,
  sessionIdOf,
} from '../../../machines/probe/legacy-checks.js';
import type { ProbeOptions } from '../../../machines/probe/options.js';
import { exchangeDeadlineMs } from '../../../machines/probe/schedule.js';
import { answered, type Exchange, firstEventId } from '../../../machines/probe/wire.js';
import { exchange, pause } from './http.js';

/** The version the probe speaks on the 2025 side. */
export const LEGACY_VERSION = '2025-11-25';
/** An origin no deployment allows: the Origin check sends it. */
export const FOREIGN_ORIGIN = 'https://mcp-continuity-probe.invalid';
/** A `Last-Event-ID` no server issues (visible ASCII, so it is a valid header value). */
export const MALFORMED_CURSOR = 'mcp-continuity-probe::not-an-event-id';

/**
 * Runs the 2025-11-25 part of the probe against a server and returns what it saw: every request bounded
 * by the options, no tool called unless one was named read-only. What the answers mean is decided in
 * machines/probe/legacy-checks.ts.
 */
export async function gatherLegacy(o: ProbeOptions): Promise<LegacyFacts> {
  const limits = { timeoutMs: exchangeDeadlineMs(o, 'request'), maxBytes: o.maxBytes };
  const streamLimits = { timeoutMs: exchangeDeadlineMs(o, 'stream'), maxBytes: o.maxBytes };
  const base = (session?: string, extra: Record<string, string> = {}) => ({
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'mcp-protocol-version': LEGACY_VERSION,
    ...o.headers,
    ...(session ? { 'mcp-session-id': session } : {}),
    ...extra,
  });
  const post = (
    body: { id?: string | number; method: string; params?: unknown },
    session?: string,
    extra?: Record<string, string>,
  ) =>
    exchange(
      o.url,
      { method: 'POST', headers: base(session, extra), body: { jsonrpc: '2.0', ...body } },
      body.id === undefined ? limits : { ...limits, until: answered(body.id) },
    );
  const initialize = (id: string, extra?: Record<string, string>) =>
    post(
      {
        id,
        method: 'initialize',
        params: {
          protocolVersion: LEGACY_VERSION,
          capabilities: {},
          clientInfo: { name: 'mcp-continuity-probe', version: '1' },
        },
      },
      undefined,
      extra,
    );
  const getWith = (session: string | undefined, cursor?: string, until?: string | number) =>
    exchange(
      o.url,
      {
        method: 'GET',
        headers: { ...base(session, cursor ? { 'last-event-id': cursor } : {}), accept: 'text/event-stream' },
      },
      until === undefined
        ? { ...streamLimits, until: (events) => events.length > 0 }
        : { ...streamLimits, until: answered(until) },
    );
  const initialized = (session: string) => post({ method: 'notifications/initialized' }, session);
  const end = (session: string) => exchange(o.url, { method: 'DELETE', headers: base(session) }, limits);

  const initializeId = 'probe-init-1';
  const first = await initialize(initializeId);
  const session = sessionIdOf(first);
  const facts: { -readonly [K in keyof LegacyFacts]: LegacyFacts[K] } = {
    initialize: first,
    initializeId,
    sessionIds: session ? [session] : [],
  };
  if (!initializeAnswered(facts)) return facts;
  if (session) await initialized(session);
  // Resumed first, well inside any retention; the same cursor is tried again once evicted (below).
  const cursor = session ? firstEventId(first) : undefined;
  if (session && cursor) facts.resume = { cursor, answer: await getWith(session, cursor, initializeId) };

  // Other sessions: their ids (entropy) and a cursor of another session (the foreign cursor).
  const others: Array<{ session: string; init: Exchange }> = [];
  for (let i = 2; i <= Math.max(2, o.sessions); i++) {
    const init = await initialize(`probe-init-${i}`);
    const id = sessionIdOf(init);
    if (id) others.push({ session: id, init });
  }
  facts.sessionIds = [...facts.sessionIds, ...others.map((s) => s.session)];
  facts.origin = await initialize('probe-init-origin', { origin: FOREIGN_ORIGIN });
  const originSession = sessionIdOf(facts.origin);

  // A stateless server is asked for its GET stream too (it must answer 405 or a stream).
  facts.getStream = await getWith(session);
  if (session) {
    const foreignCursor = others.map((s) => firstEventId(s.init)).find((c) => c !== undefined);
    if (foreignCursor)
      facts.foreign = { cursor: foreignCursor, answer: await getWith(session, foreignCursor) };
    facts.malformed = { cursor: MALFORMED_CURSOR, answer: await getWith(session, MALFORMED_CURSOR) };

    if (o.tool?.readOnly) {
      // Only a tool the user said is read-only: the server may well run it twice.
      const id = `probe-dup-${randomUUID()}`;
      const call = { id, method: 'tools/call', params: { name: o.tool.name, arguments: o.tool.args } };
      const firstCall = await post(call, session);
      facts.duplicate = { id, first: firstCall, second: await post(call, session) };
      // Once more with a progress token: a tool that reports progress gives its stream events to count.
      const progressId = `probe-progress-${randomUUID()}`;
      const progressParams = { ...call.params, _meta: { progressToken: progressId } };
      const withProgress = await post(
        { id: progressId, method: 'tools/call', params: progressParams },
        session,
      );
      const behind = countEvictedCursor(advertisedRetention(first), withProgress);
      if (behind) facts.evictedByCount = { ...behind, answer: await getWith(session, behind.cursor) };
    } else
      facts.duplicateSkipped = o.tool
        ? `--tool ${o.tool.name} was not said to be read-only (--read-only): the probe does not call it twice`
        : 'needs a tool the probe may call twice: --tool NAME --args JSON --read-only';

    const wait = evictionWait(advertisedRetention(first), o.evictWaitMs, o.maxWaitMs);
    if (cursor && 'waitMs' in wait) {
      await pause(wait.waitMs);
      facts.evicted = { cursor, waitedMs: wait.waitMs, answer: await getWith(session, cursor, initializeId) };
    } else facts.evictedSkipped = 'skipped' in wait ? wait.skipped : 'the server issued no event id to try';

    const del = await end(session);
    facts.deleted = { del, after: await post({ id: 'probe-after-delete', method: 'ping' }, session) };
  }
  if (!session)
    facts.duplicateSkipped =
      'the server issued no session id: a re-sent request id means nothing without a session';
  // Leave nothing behind: the other sessions end too (their answers are not checked).
  for (const s of [...others.map((x) => x.session), ...(originSession ? [originSession] : [])]) await end(s);
  return facts;
}
