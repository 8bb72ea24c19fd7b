import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import {
  ContinuityClientTransport,
  FileCursorStore,
  type GapReport,
  isContinuityError,
  isOutcomeUnknown,
  MemoryEventLog,
  OUTCOME_UNKNOWN,
} from '../../src/index.js';
import { clientFixture } from '../support/client-fixture.js';
import { isInitialize, isResume, isToolCall, networkFetch } from './network.js';

/**
 * The client transport with the SDK Client, against this project's server over real HTTP on 127.0.0.1.
 * Faults come from the network (connections cut, responses lost, black holes), never from mocks.
 */
const { serverProcess, connect, onCleanup } = clientFixture();

const text = (r: unknown) => (r as { content: Array<{ text: string }> }).content[0]?.text;

describe('ContinuityClientTransport with the SDK Client', () => {
  it('initializes, lists tools, calls with progress; continuity is best-effort with a memory cursor', async () => {
    const p = await serverProcess();
    const { client, transport } = await connect(p.url);
    expect(transport.sessionId).toMatch(/^[\x21-\x7E]{22,}$/);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual([
      'echo',
      'charge',
      'chatty',
      'ask-client',
      'slow',
    ]);
    const progress: number[] = [];
    const r = await client.callTool({ name: 'chatty', arguments: { count: 5, intervalMs: 1 } }, undefined, {
      onprogress: (x) => progress.push(x.progress),
    });
    expect(text(r)).toBe('sent 5');
    expect(progress).toEqual([1, 2, 3, 4, 5]);
    expect(transport.continuity).toBe('best-effort');
    expect(transport.assessment().reasons).toEqual([
      'condition 1: the cursor is in memory and dies with the process',
    ]);
  });

  /** @spec design-note "Operational Effect": incident 1 over real HTTP */
  it('a cut mid-call is resumed with Last-Event-ID: one charge, the result arrives, same session, one initialize', async () => {
    const p = await serverProcess();
    const net = networkFetch();
    const { client, transport } = await connect(p.url, { fetch: net.fetch });
    const session = transport.sessionId;
    const call = client.callTool({ name: 'slow', arguments: { ms: 1_500 } });
    const charged = client.callTool({ name: 'charge', arguments: { key: 'card' } });
    // Cut mid-call: once the slow call's stream has begun (its headers are in), not at a guessed time,
    // which on a loaded machine could fall before the POST's answer and make this a re-send instead.
    await expect.poll(() => net.headed.filter(isToolCall('slow')).length, { timeout: 10_000 }).toBe(1);
    p.cutConnections();
    expect(text(await call)).toBe('slept 1500');
    expect(text(await charged)).toBe('charged card');
    expect(p.world.effects.get('card')).toBe(1);
    expect(transport.sessionId).toBe(session);
    expect(net.count(isInitialize)).toBe(1);
    expect(net.count(isResume)).toBeGreaterThan(0);
    expect(net.count(isToolCall('slow'))).toBe(1);
  });

  it.each([500, 502, 503, 504])(
    'a %i on resume is retried after backoff, not taken for a lost session',
    async (status) => {
      const p = await serverProcess();
      const net = networkFetch();
      net.when((r, n) => (isResume(r) && n === 1 ? new Response('busy', { status }) : 'pass'));
      const { client, transport } = await connect(p.url, { fetch: net.fetch });
      const session = transport.sessionId;
      const call = client.callTool({ name: 'slow', arguments: { ms: 1_500 } });
      // Cut once the call's stream has begun (not at a guessed time), so it is resumed, not re-sent.
      await expect.poll(() => net.headed.filter(isToolCall('slow')).length, { timeout: 10_000 }).toBe(1);
      p.cutConnections();
      expect(text(await call)).toBe('slept 1500');
      expect(transport.sessionId).toBe(session);
      expect(net.count(isResume)).toBeGreaterThanOrEqual(2);
    },
  );

  /** @spec transports#session-management item 4; design-note "404 → re-initialize, unknown outcome" */
  it('404 after a server restart: re-initializes; the charge in flight is outcome unknown, a read-only call is re-sent', async () => {
    const p = await serverProcess();
    const net = networkFetch();
    const { client, transport, errors } = await connect(p.url, { fetch: net.fetch });
    await client.listTools(); // learns that chatty is read-only
    const session = transport.sessionId;
    const charge = client.callTool({ name: 'slow', arguments: { ms: 1_500 } });
    const read = client.callTool({ name: 'chatty', arguments: { count: 3, intervalMs: 500 } });
    // Restart once both calls reached the server (their streams began), not at a guessed time.
    await expect
      .poll(() => net.headed.filter((r) => isToolCall('slow')(r) || isToolCall('chatty')(r)).length, {
        timeout: 10_000,
      })
      .toBe(2);
    p.restart();
    const err = await charge.catch((e) => e);
    expect(err).toBeInstanceOf(McpError);
    expect(isOutcomeUnknown(err)).toBe(true);
    expect((err as McpError).code).toBe(OUTCOME_UNKNOWN);
    expect((err as McpError).data).toMatchObject({ reason: 'session_lost' });
    expect(text(await read)).toBe('sent 3');
    expect(transport.sessionId).not.toBe(session);
    expect(net.count(isInitialize)).toBe(2);
    expect(net.count(isToolCall('slow'))).toBe(1);
    expect(net.count(isToolCall('chatty'))).toBe(2);
    expect(errors.some((e) => isContinuityError(e) && e.code === 'MCPC_EVENTS_LOST')).toBe(true);
    expect(text(await client.callTool({ name: 'echo', arguments: { text: 'new session' } }))).toBe(
      'new session',
    );
  });

  /** @spec design-note condition 4: 409/410 → surface possible event loss */
  it('410: onGap gets the server details, the call resumes from the oldest retained event and completes', async () => {
    const p = await serverProcess({ eventLog: new MemoryEventLog({ maxEventsPerStream: 5 }) });
    const net = networkFetch();
    // The call's stream breaks after its first chunk; the client comes back only after the call is over.
    net.when((r, n) => (isToolCall('chatty')(r) && n === 1 ? 'reset-after-first-chunk' : 'pass'));
    const gaps: GapReport[] = [];
    const { client } = await connect(p.url, {
      fetch: net.fetch,
      onGap: (g) => gaps.push(g),
      reconnect: { initialDelayMs: 400, maxDelayMs: 400, jitter: 'none' },
    });
    const progress: number[] = [];
    const result = await client.callTool(
      { name: 'chatty', arguments: { count: 40, intervalMs: 1 } },
      undefined,
      {
        onprogress: (x) => progress.push(x.progress),
      },
    );
    expect(text(result)).toBe('sent 40');
    expect(gaps).toHaveLength(1);
    const gap = gaps[0] as GapReport;
    expect(gap).toMatchObject({ reason: 'resume_window_exceeded', streamComplete: true });
    expect(gap.lostCount).toBeGreaterThan(0);
    // Nothing delivered twice, nothing lost that was not reported: delivered + lost = all 40.
    expect(new Set(progress).size).toBe(progress.length);
    expect(progress.length + (gap.lostCount as number)).toBe(40);
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
  });

  it('event: close from the server ends the session: no reconnects, onclose, later calls fail', async () => {
    const p = await serverProcess();
    const net = networkFetch();
    const { client, transport } = await connect(p.url, { fetch: net.fetch });
    // The SDK's handler stays in place; the test counts the calls.
    const sdkOnClose = transport.onclose;
    let closes = 0;
    transport.onclose = () => {
      closes++;
      sdkOnClose?.();
    };
    // The standalone GET stream opens (its answer's headers are in), not a guessed 50 ms.
    await expect.poll(() => net.headed.filter((r) => r.method === 'GET').length, { timeout: 10_000 }).toBe(1);
    const del = await fetch(p.url, {
      method: 'DELETE',
      headers: { 'Mcp-Session-Id': transport.sessionId as string },
    });
    expect(del.status).toBe(200);
    await expect.poll(() => transport.actor.getSnapshot().value, { timeout: 10_000 }).toBe('terminated');
    // The session is terminating (design note): the transport closes, so the SDK Client is disconnected.
    await expect.poll(() => closes, { timeout: 2_000 }).toBe(1);
    const before = net.seen.length;
    await expect(client.callTool({ name: 'echo', arguments: { text: 'x' } })).rejects.toThrow(
      /Not connected/,
    );
    await expect(transport.send({ jsonrpc: '2.0', id: 99, method: 'ping' })).rejects.toThrow(/closed/);
    await new Promise((r) => setTimeout(r, 200));
    expect(net.seen.length).toBe(before);
  });

  it('a POST lost after it reached the server is re-sent with the same id to a de-duplicating server: one charge', async () => {
    const p = await serverProcess();
    const net = networkFetch();
    net.when((r, n) => (isToolCall('charge')(r) && n === 1 ? 'reset-after-send' : 'pass'));
    const { client } = await connect(p.url, { fetch: net.fetch });
    expect(text(await client.callTool({ name: 'charge', arguments: { key: 'k' } }))).toBe('charged k');
    const posts = net.seen.filter(isToolCall('charge'));
    expect(posts).toHaveLength(2);
    const ids = posts.map((r) => (r.body as { id: unknown }).id);
    expect(ids[0]).toBe(ids[1]);
    expect(p.world.effects.get('k')).toBe(1);
  });

  it('a refused connection is retried: the request never left', async () => {
    const p = await serverProcess();
    const net = networkFetch();
    net.when((r, n) => (isToolCall('echo')(r) && n <= 2 ? 'refuse' : 'pass'));
    const { client } = await connect(p.url, { fetch: net.fetch });
    expect(text(await client.callTool({ name: 'echo', arguments: { text: 'third time' } }))).toBe(
      'third time',
    );
    expect(net.count(isToolCall('echo'))).toBe(3);
  });

  it('an unexpected status fails the call with the status and body; the client does not guess', async () => {
    const p = await serverProcess();
    const net = networkFetch();
    net.when((r) => (isToolCall('echo')(r) ? new Response('I am a teapot', { status: 418 }) : 'pass'));
    const { client, transport } = await connect(p.url, { fetch: net.fetch });
    const err = await client.callTool({ name: 'echo', arguments: { text: 'x' } }).catch((e) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32053);
    expect((err as McpError).data).toEqual({ status: 418, body: 'I am a teapot' });
    expect(transport.actor.getSnapshot().value).toBe('active');
  });

  it('stall detection: a black-holed stream is resumed after stallTimeoutMs', async () => {
    const p = await serverProcess();
    const net = networkFetch();
    net.when((r, n) => (isToolCall('chatty')(r) && n === 1 ? 'stall-after-first-chunk' : 'pass'));
    const { client } = await connect(p.url, { fetch: net.fetch, stallTimeoutMs: 150 });
    const progress: number[] = [];
    // 200 ms apart: 20 ms apart, a loaded machine can put them all in the first chunk (nothing to resume).
    const r = await client.callTool({ name: 'chatty', arguments: { count: 4, intervalMs: 200 } }, undefined, {
      onprogress: (x) => progress.push(x.progress),
    });
    expect(text(r)).toBe('sent 4');
    expect(progress).toEqual([1, 2, 3, 4]);
    expect(net.count(isResume)).toBeGreaterThanOrEqual(1);
  });

  it('close() sends DELETE, ends the server session and stops every stream and timer', async () => {
    const p = await serverProcess();
    const net = networkFetch();
    const { client, transport } = await connect(p.url, { fetch: net.fetch });
    expect(p.continuity.sessionCount()).toBe(1);
    await client.close();
    expect(net.count((r) => r.method === 'DELETE')).toBe(1);
    expect(p.continuity.sessionCount()).toBe(0);
    expect(transport.actor.getSnapshot().status).not.toBe('active');
  });
});

describe('continuity across a client restart (FileCursorStore)', () => {
  it('a new process with the same store resumes the same session; the answer it never asked for goes to onOrphanResult', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-'));
    onCleanup(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'cursor.json');
    const p = await serverProcess();
    const first = await connect(p.url, { cursorStore: new FileCursorStore(file) });
    expect(first.transport.continuity).toBe('guaranteed');
    const session = first.transport.sessionId;
    void first.client.callTool({ name: 'slow', arguments: { ms: 1_500 } }).catch(() => undefined);
    // Until the slow call's cursor is on disk (a guessed 100 ms is too short on a loaded machine).
    const requestCursorSaved = async () => {
      const text = await readFile(file, 'utf8').catch(() => '{}');
      const streams = (JSON.parse(text) as { record?: { streams?: object } }).record?.streams ?? {};
      return Object.keys(streams).some((k) => k !== 'standalone');
    };
    await expect.poll(requestCursorSaved, { timeout: 10_000 }).toBe(true);
    // The process dies: no DELETE, no goodbye; its connections drop.
    first.transport.actor.stop();
    p.cutConnections();
    const saved = JSON.parse(await readFile(file, 'utf8'));
    expect(saved).toMatchObject({ version: 1, record: { sessionId: session } });
    expect((await readdir(dir)).filter((f) => f.endsWith('.tmp'))).toEqual([]);

    const orphans: unknown[] = [];
    const second = await connect(p.url, {
      cursorStore: new FileCursorStore(file),
      onOrphanResult: (m) => orphans.push(m),
    });
    expect(second.transport.sessionId).toBe(session);
    await expect.poll(() => orphans.length, { timeout: 10_000 }).toBe(1);
    expect(orphans[0]).toMatchObject({ result: { content: [{ text: 'slept 1500' }] } });
    expect(text(await second.client.callTool({ name: 'echo', arguments: { text: 'same session' } }))).toBe(
      'same session',
    );
  });

  it('FileCursorStore writes atomically and coalesces bursts; a missing file loads as null', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-'));
    onCleanup(() => rm(dir, { recursive: true, force: true }));
    const store = new FileCursorStore(join(dir, 'c.json'));
    expect(await store.load()).toBeNull();
    const writes = Array.from({ length: 50 }, (_, i) =>
      store.save({
        sessionId: 's',
        streams: { standalone: { kind: 'standalone', lastEventId: `e-0-${i}` } },
      }),
    );
    await Promise.all(writes);
    expect((await store.load())?.streams.standalone?.lastEventId).toBe('e-0-49');
    expect((await readdir(dir)).sort()).toEqual(['c.json']);
    await store.save(null);
    expect(await store.load()).toBeNull();
  });
});

describe('conditions of validity', () => {
  it('guaranteed needs a durable cursor, gap signalling and retention beyond the worst-case reconnect', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-'));
    onCleanup(() => rm(dir, { recursive: true, force: true }));
    const p = await serverProcess();
    const { transport } = await connect(p.url, { cursorStore: new FileCursorStore(join(dir, 'c.json')) });
    expect(transport.continuity).toBe('guaranteed');
    expect(transport.assessment().retentionMarginMs).toBeGreaterThan(0);
  });

  it('a configuration that breaks condition 2 is reported with a warning', async () => {
    const p = await serverProcess({ eventLog: new MemoryEventLog({ retentionMs: 1_000 }) });
    const transport = new ContinuityClientTransport(p.url, { reconnect: { maxRetries: 8 } });
    const errors: Error[] = [];
    transport.onerror = (e) => errors.push(e);
    const client = new Client({ name: 't', version: '1' });
    onCleanup(() => client.close());
    await client.connect(transport);
    expect(transport.continuity).toBe('best-effort');
    const warning = errors.find((e) => isContinuityError(e) && e.code === 'MCPC_CONDITION');
    expect(warning?.message).toMatch(/condition 2: retention 1000 ms does not exceed worst-case reconnect/);
  });
});

describe('isOutcomeUnknown', () => {
  it('recognises the SDK McpError and raw JSON-RPC errors, nothing else', () => {
    expect(isOutcomeUnknown(new McpError(OUTCOME_UNKNOWN, 'x'))).toBe(true);
    expect(isOutcomeUnknown({ code: OUTCOME_UNKNOWN })).toBe(true);
    expect(isOutcomeUnknown({ jsonrpc: '2.0', id: 1, error: { code: OUTCOME_UNKNOWN, message: 'x' } })).toBe(
      true,
    );
    expect(isOutcomeUnknown(new McpError(-32000, 'x'))).toBe(false);
    expect(isOutcomeUnknown(new Error('x'))).toBe(false);
    expect(isOutcomeUnknown(null)).toBe(false);
    expect(isOutcomeUnknown('outcome unknown')).toBe(false);
  });
});
