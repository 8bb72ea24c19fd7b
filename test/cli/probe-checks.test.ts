import { describe, expect, it } from 'vitest';
import { CONTINUITY_EXTENSION, DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import {
  countEvictedCursor,
  evictionWait,
  judgeLegacy,
  type LegacyFacts,
  readCursorAnswer,
} from '../../machines/probe/legacy-checks.js';
import { judgeModern, type ModernFacts } from '../../machines/probe/modern-checks.js';
import { readProbeArgs } from '../../machines/probe/options.js';
import { type Check, exitStatus, renderMarkdown, renderText } from '../../machines/probe/report.js';
import { assessSessionIds } from '../../machines/probe/session-ids.js';
import type { Exchange, SeenEvent } from '../../machines/probe/wire.js';
import { parseCommandLine } from '../../src/cli/args.js';
import { PROGRAM } from '../../src/cli/program.js';

/** The probe's decisions, row by row, on answers written by hand (no server: machines/probe is pure). */
const json = (status: number, body?: unknown, headers: Record<string, string> = {}): Exchange => ({
  status,
  contentType: 'application/json',
  headers,
  events: [],
  ...(body === undefined ? {} : { json: body }),
  end: 'complete',
  ms: 1,
});
const sse = (events: SeenEvent[], headers: Record<string, string> = {}, status = 200): Exchange => ({
  status,
  contentType: 'text/event-stream',
  headers,
  events,
  end: 'complete',
  ms: 1,
});
const msg = (m: object) => JSON.stringify({ jsonrpc: '2.0', ...m });
const INIT = sse(
  [
    { id: 'e-1-0', data: '' },
    { id: 'e-1-1', data: msg({ id: 'i', result: {} }) },
  ],
  {
    'mcp-session-id': 'AAAAAAAAAAAAAAAAAAAAAA',
  },
);
const facts = (more: Partial<LegacyFacts> = {}): LegacyFacts => ({
  initialize: INIT,
  initializeId: 'i',
  sessionIds: ['s1'],
  ...more,
});
const find = (checks: readonly Check[], id: string) => checks.find((c) => c.id === id);
const err = (code: number, data?: unknown) => ({
  jsonrpc: '2.0',
  id: null,
  error: { code, message: 'm', data },
});

describe('what a cursor answer is', () => {
  it.each([
    ['410 with a count', json(410, err(-32052, { lostCount: 7 })), { kind: 'gone', lostCount: 7 }],
    ['410 with a null count', json(410, err(-32052, { lostCount: null })), { kind: 'gone' }],
    ['400', json(400, err(-32052)), { kind: 'refused', status: 400 }],
    ['404', json(404), { kind: 'refused', status: 404 }],
    ['405', json(405), { kind: 'not-offered' }],
    ['409 (a stream still held)', json(409), { kind: 'conflict' }],
    ['200 stream, nothing', sse([{ data: '' }]), { kind: 'silent' }],
    [
      '200 stream, a message',
      sse([{ id: 'x', data: msg({ method: 'n' }) }]),
      { kind: 'replayed', messages: 1 },
    ],
    ['500', json(500), { kind: 'other', status: 500 }],
    ['200 JSON (not a stream)', json(200, {}), { kind: 'other', status: 200 }],
  ])('%s', (_, answer, expected) => {
    expect(readCursorAnswer(answer)).toEqual(expected);
  });
});

describe('2025-11-25 verdicts', () => {
  it.each([
    ['GET 200 stream', 'passed', sse([{ id: 'g', data: '' }])],
    ['GET 405', 'passed', json(405)],
    ['GET 406', 'failed', json(406)],
    ['GET 200 JSON', 'failed', json(200, {})],
  ])('%s → %s (MUST)', (_, status, getStream) => {
    expect(find(judgeLegacy(facts({ getStream })), '2025.get-stream')).toMatchObject({
      status,
      level: 'MUST',
    });
  });

  it.each([
    ['403', 'passed', json(403)],
    ['200 (accepted)', 'failed', INIT],
    ['400 (refused, not 403)', 'failed', json(400)],
  ])('a foreign Origin answered %s → %s (MUST)', (_, status, origin) => {
    expect(find(judgeLegacy(facts({ origin })), '2025.origin')).toMatchObject({ status, level: 'MUST' });
  });

  it("another session's cursor: replaying it breaks a MUST; a silent stream breaks continuity; 400/410 pass", () => {
    const replayed = { cursor: 'c', answer: sse([{ id: 'x', data: msg({ method: 'n' }) }]) };
    expect(find(judgeLegacy(facts({ foreign: replayed })), '2025.foreign-cursor')).toMatchObject({
      status: 'failed',
      level: 'MUST',
    });
    const silent = { cursor: 'c', answer: sse([]) };
    expect(find(judgeLegacy(facts({ foreign: silent })), '2025.foreign-cursor')).toMatchObject({
      status: 'failed',
      level: 'continuity',
    });
    for (const answer of [json(400), json(410, err(-32052, { lostCount: 3 }))])
      expect(
        find(judgeLegacy(facts({ foreign: { cursor: 'c', answer } })), '2025.foreign-cursor')?.status,
      ).toBe('passed');
  });

  it('a 409 to a cursor is about a stream still held, not the cursor: not checked', () => {
    const conflict = { cursor: 'c', answer: json(409) };
    const checks = judgeLegacy(facts({ foreign: conflict, malformed: conflict }));
    expect(find(checks, '2025.foreign-cursor')?.status).toBe('not-checked');
    expect(find(checks, '2025.malformed-cursor')?.status).toBe('not-checked');
  });

  it('an evicted cursor: 410 passes, a silent stream fails, a replay of the missed response means not evicted yet', () => {
    const tried = (answer: Exchange) =>
      find(judgeLegacy(facts({ evicted: { cursor: 'e-1-0', waitedMs: 10, answer } })), '2025.evicted-cursor');
    expect(tried(json(410, err(-32052, { lostCount: 1 })))?.detail).toContain('410 with 1 event(s) lost');
    expect(tried(json(410, err(-32052, { lostCount: 1 })))?.status).toBe('passed');
    expect(tried(sse([]))?.status).toBe('failed');
    expect(tried(sse([{ id: 'e-1-1', data: msg({ id: 'i', result: {} }) }]))?.status).toBe('not-checked');
  });

  it('DELETE: 405 is allowed (not checked); after a 2xx, anything but 404 breaks the MUST', () => {
    const verdict = (del: Exchange, then: Exchange) =>
      find(judgeLegacy(facts({ deleted: { del, after: then } })), '2025.deleted')?.status;
    expect(verdict(json(405), json(200))).toBe('not-checked');
    expect(verdict(json(200), json(404))).toBe('passed');
    expect(verdict(json(204), json(200, { jsonrpc: '2.0', id: 1, result: {} }))).toBe('failed');
  });

  it('priming: an id with empty data passes; a JSON answer is not a stream to prime', () => {
    expect(find(judgeLegacy(facts()), '2025.priming')?.status).toBe('passed');
    const noId = sse([{ data: msg({ id: 'i', result: {} }) }]);
    expect(find(judgeLegacy(facts({ initialize: noId })), '2025.priming')?.status).toBe('failed');
    const asJson = json(200, { jsonrpc: '2.0', id: 'i', result: {} });
    expect(find(judgeLegacy(facts({ initialize: asJson })), '2025.priming')?.status).toBe('not-checked');
  });

  it('no initialize answer: one not-checked row, nothing else judged', () => {
    const checks = judgeLegacy(facts({ initialize: json(404) }));
    expect(checks).toHaveLength(1);
    expect(checks[0]).toMatchObject({ id: '2025.initialize', status: 'not-checked' });
  });

  it('a 401 to initialize says how to give credentials', () => {
    expect(judgeLegacy(facts({ initialize: json(401) }))[0]?.detail).toContain("--header 'Authorization");
  });

  it('reads the retention from the MCP-Continuity header', () => {
    const initialize = sse(INIT.events as SeenEvent[], {
      'mcp-continuity': 'retention-ms=500, idle-ttl-ms=9000',
    });
    expect(find(judgeLegacy(facts({ initialize })), '2025.retention')?.detail).toContain(
      'events kept 500 ms, idle session TTL 9000 ms',
    );
  });
});

describe('a cursor evicted by count', () => {
  const adv = (maxEventsPerStream?: number) => ({
    maxEventsPerStream,
    gapSignalling: false,
    duplicateRequestProtection: false,
  });
  const stream = sse([
    { id: 'p', data: '' },
    { id: 'a', data: msg({ method: 'n' }) },
    { id: 'b', data: msg({ id: 1, result: {} }) },
  ]);
  it('is the first id of a stream with more events after it than max-events; else none', () => {
    expect(countEvictedCursor(adv(1), stream)).toEqual({ cursor: 'p', behind: 2, maxEvents: 1 });
    expect(countEvictedCursor(adv(2), stream)).toBeUndefined();
    expect(countEvictedCursor(adv(undefined), stream)).toBeUndefined();
    expect(countEvictedCursor(adv(1), json(200, {}))).toBeUndefined();
  });
  it.each([
    ['410 with a count', 'passed', json(410, err(-32052, { lostCount: 1 }))],
    [
      'a replay of everything',
      'not-checked',
      sse([{ data: msg({ method: 'n' }) }, { data: msg({ id: 1, result: {} }) }]),
    ],
    ['a replay of part, silently', 'failed', sse([{ id: 'b', data: msg({ id: 1, result: {} }) }])],
  ])('answered %s → %s', (_, status, answer) => {
    const evictedByCount = { cursor: 'p', behind: 2, maxEvents: 1, answer };
    expect(find(judgeLegacy(facts({ evictedByCount })), '2025.evicted-count')?.status).toBe(status);
  });
});

describe('how long to wait for an eviction', () => {
  it.each([
    [{ retentionMs: 1000 }, undefined, 10_000, { waitMs: 1300 }],
    [{ retentionMs: 1000 }, 50, 10_000, { waitMs: 50 }],
    [undefined, 60_000, 10_000, 'skipped'],
    [{ retentionMs: 600_000 }, undefined, 30_000, 'skipped'],
    [undefined, undefined, 30_000, 'skipped'],
  ])('advertised %o, --evict-wait %s, cap %s', (retention, user, cap, expected) => {
    const advertised = retention && { ...retention, gapSignalling: false, duplicateRequestProtection: false };
    const wait = evictionWait(advertised, user, cap);
    if (expected === 'skipped') expect(wait).toHaveProperty('skipped');
    else expect(wait).toEqual(expected);
  });
});

describe('session ids', () => {
  it.each([
    [['1', '2', '3'], 0],
    [['a3f9', 'a3f9'], 0],
    [['550e8400-e29b-41d4-a716-446655440000', '6fa459ea-ee8a-4ca4-894e-db77e160355e'], 122],
    // The shared prefix carries nothing; 8 characters of a base64url-sized alphabet vary.
    [['sess-0a1b2c3d', 'sess-9f8e7d6c'], 48],
    [['0a1b2c3d', '9f8e7d6c'], 32],
  ])('%j: at most %i bits', (ids, bits) => {
    expect(assessSessionIds(ids).estimatedBits).toBe(bits);
  });

  it('a counter fails the SHOULD; a space in an id fails the MUST', () => {
    const counted = judgeLegacy(facts({ sessionIds: ['1001', '1002', '1003'] }));
    expect(find(counted, '2025.session-id')?.status).toBe('failed');
    const spaced = judgeLegacy(facts({ sessionIds: ['a b', 'c d'] }));
    expect(find(spaced, '2025.session-id-chars')).toMatchObject({ status: 'failed', level: 'MUST' });
  });
});

describe('2026-07-28 verdicts', () => {
  const discover = (capabilities: object, versions = ['2026-07-28']) =>
    json(200, { jsonrpc: '2.0', id: 'd', result: { supportedVersions: versions, capabilities } });
  const modern = (more: Partial<ModernFacts>): ModernFacts => ({
    discover: discover({}),
    discoverId: 'd',
    ...more,
  });

  it('a server that does not serve 2026-07-28: one not-checked row', () => {
    const checks = judgeModern(modern({ discover: json(400, err(-32022, { supported: ['2025-11-25'] })) }));
    expect(checks.map((c) => [c.id, c.status])).toEqual([['2026.discover', 'not-checked']]);
  });

  it('the extension advertised with settings a client cannot read breaks its MUST', () => {
    const bad = judgeModern(
      modern({ discover: discover({ extensions: { [CONTINUITY_EXTENSION]: { memoWindowMs: 1 } } }) }),
    );
    expect(find(bad, '2026.continuity')).toMatchObject({ status: 'failed', level: 'extension MUST' });
    const good = judgeModern(
      modern({ discover: discover({ extensions: { [CONTINUITY_EXTENSION]: DEFAULT_CONTINUITY_SETTINGS } }) }),
    );
    expect(find(good, '2026.continuity')?.status).toBe('passed');
    expect(find(good, '2026.keyed-reissue')).toMatchObject({
      status: 'not-checked',
      level: 'extension MUST',
    });
  });

  it('keyed: the recorded result passes; an error fails; a reused key answered 200 fails', () => {
    const base = {
      cutAfterMs: 100,
      cut: { ...json(0), status: 0, end: 'timeout' as const },
      reissueId: 'r',
      lastEventId: null,
      reuseId: 'u',
    };
    const result = json(200, { jsonrpc: '2.0', id: 'r', result: { content: [] } });
    const refused = json(409, { jsonrpc: '2.0', id: 'u', error: { code: -32010, message: 'reused' } });
    const ran = json(200, { jsonrpc: '2.0', id: 'u', result: {} });
    const ok = judgeModern(modern({ keyed: { ...base, reissue: result, reuse: refused } }));
    expect(find(ok, '2026.keyed-reissue')?.status).toBe('passed');
    expect(find(ok, '2026.key-reuse')?.status).toBe('passed');
    const broken = judgeModern(
      modern({
        keyed: {
          ...base,
          reissue: json(200, { jsonrpc: '2.0', id: 'r', error: { code: -32012, message: 'x' } }),
          reuse: ran,
        },
      }),
    );
    expect(find(broken, '2026.keyed-reissue')?.status).toBe('failed');
    expect(find(broken, '2026.key-reuse')?.status).toBe('failed');
    expect(exitStatus({ reachable: true, checks: broken })).toBe(1);
  });
});

describe('exit status and rendering', () => {
  const row = (level: Check['level'], status: Check['status']): Check => ({
    id: 'x',
    era: '2025-11-25',
    title: 't',
    level,
    status,
    detail: 'd',
    requirement: 'r',
  });
  const exit = (checks: Check[]) => exitStatus({ reachable: true, checks });
  it('only a failed MUST (the spec, or the extension advertised) exits 1; no answer at all exits 3', () => {
    expect(exit([row('SHOULD', 'failed'), row('continuity', 'failed'), row('MUST', 'passed')])).toBe(0);
    expect(exit([row('MUST', 'failed')])).toBe(1);
    expect(exitStatus({ reachable: false, checks: [] })).toBe(3);
    expect(exit([row('extension MUST', 'failed')])).toBe(1);
    expect(exit([row('MUST', 'not-checked')])).toBe(0);
  });
  it('prints the requirement only under a failure; escapes table cells', () => {
    expect(renderText({ url: 'u', reachable: true, checks: [row('MUST', 'failed')] })).toContain(
      'the spec says: r',
    );
    expect(renderText({ url: 'u', reachable: true, checks: [row('MUST', 'passed')] })).not.toContain(
      'spec: r',
    );
    const md = renderMarkdown(
      { url: 'u', reachable: true, checks: [{ ...row('MUST', 'passed'), detail: 'a | b' }] },
      'T',
    );
    expect(md).toContain('a \\| b');
  });
});

describe('probe arguments', () => {
  it('reads the URL, repeated headers and a tool', () => {
    const parsed = parseCommandLine(PROGRAM, [
      'probe',
      '--header',
      'Authorization: Bearer t',
      '--header=X-Tenant: 7',
      'http://127.0.0.1:1/mcp',
      '--tool',
      'lookup',
      '--args',
      '{"q":1}',
      '--read-only',
    ]);
    expect(parsed).toMatchObject({
      kind: 'run',
      values: {
        url: 'http://127.0.0.1:1/mcp',
        header: ['Authorization: Bearer t', 'X-Tenant: 7'],
        tool: 'lookup',
      },
    });
    if (parsed.kind !== 'run') return;
    const v = parsed.values;
    const settings = readProbeArgs({
      url: v.url as string,
      header: v.header as string[],
      tool: v.tool as string,
      args: v.args as string,
      readOnly: v['read-only'] === true,
      timeout: 1,
      maxBytes: 1,
      streamWait: 1,
      cutAfter: 1,
      maxWait: 1,
    });
    expect(settings).toMatchObject({
      url: 'http://127.0.0.1:1/mcp',
      headers: { authorization: 'Bearer t', 'x-tenant': '7' },
      tool: { name: 'lookup', args: { q: 1 }, readOnly: true },
    });
  });

  it('refuses a missing URL and a second one', () => {
    expect(parseCommandLine(PROGRAM, ['probe'])).toMatchObject({ kind: 'error', message: 'missing <url>' });
    expect(parseCommandLine(PROGRAM, ['probe', 'http://a', 'http://b'])).toMatchObject({
      kind: 'error',
      message: "unexpected argument 'http://b'",
    });
  });

  it.each([
    [{ url: 'not a url' }, 'is not a URL'],
    [{ url: 'ftp://x/mcp' }, 'not an http'],
    [{ header: ['NoColon'] }, "is not 'name: value'"],
    [{ header: ['Mcp-Session-Id: x'] }, 'sets that header itself'],
    [{ readOnly: true }, 'no --tool'],
    [{ tool: 't', args: '[1]' }, 'JSON object'],
    [{ tool: 't', args: '{' }, 'not JSON'],
  ])('refuses %o', (more, message) => {
    const base = {
      url: 'http://h/mcp',
      args: '{}',
      readOnly: false,
      timeout: 1,
      maxBytes: 1,
      streamWait: 1,
      cutAfter: 1,
      maxWait: 1,
    };
    const settings = readProbeArgs({ ...base, ...more });
    expect(settings).toHaveProperty('error');
    expect((settings as { error: string }).error).toContain(message);
  });
});
