import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { appendToWindow, EMPTY_WINDOW, evictWindow } from '../../machines/server/retention.js';
import {
  coreOf,
  entriesToRead,
  newEntries,
  rebaseAdmissions,
  type StreamEntry,
  settledFacts,
  watermarkOf,
} from '../../machines/server/shared-record.js';
import { RedisEventLog, type RedisEventLogOptions } from '../../src/server/redis-event-log.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

// One throwaway redis-server for the file. Without redis-server installed this fails, never skips.
let server: RedisServer;
beforeAll(async () => {
  // `always`: with `everysec` Redis may postpone its AOF write for up to 2 s while the disk is busy
  // (a loaded CI machine), and a SIGKILL then loses writes it already acknowledged.
  server = await startRedisServer({ appendfsync: 'always' });
});
afterAll(async () => {
  await server?.dispose();
});

let prefixes = 0;
/** A fresh key prefix per log, so the tests sharing the server never see each other's keys. */
const freshPrefix = (): string => `test-${process.pid}-${++prefixes}:`;
const make = (options: Omit<RedisEventLogOptions, 'url'> = {}): RedisEventLog =>
  new RedisEventLog({ url: server.url, keyPrefix: freshPrefix(), ...options });

// The EventLog contract runs on this log in test/contracts/event-log.test.ts.

const note = (i: number): JsonRpcMessage => ({ jsonrpc: '2.0', method: 'n', params: { i } });
const record = {
  id: 's',
  epoch: 'ep',
  initialize: { jsonrpc: '2.0', id: 1, method: 'initialize' } as JsonRpcMessage,
  snapshot: { x: 1 },
};

describe('RedisEventLog', () => {
  it('is durable', () => {
    const l = make();
    expect(l.durable).toBe(true);
    return l.close();
  });

  it('survives the client: a new log on the same server has the events, windows and sessions', async () => {
    const keyPrefix = freshPrefix();
    const first = make({ keyPrefix, maxEventsPerStream: 3 });
    for (let i = 1; i < 5; i++) await first.append('s', 1, note(i));
    await first.appendFinal('s', 1, note(5));
    await first.openStream('s', 0);
    expect(await first.shared.commit(record, 0)).toBe(true);
    await first.close();

    const second = make({ keyPrefix, maxEventsPerStream: 3 });
    expect(await second.window('s', 1)).toMatchObject({ oldest: 3, head: 5, finished: true });
    expect((await second.read('s', 1, 3))?.events).toEqual([
      { seq: 4, message: note(4) },
      { seq: 5, message: note(5) },
    ]);
    expect(await second.window('s', 0)).toMatchObject({ oldest: 1, head: 0, finished: false });
    expect((await second.shared.load('s'))?.record).toEqual(record);
    expect(await second.append('s', 1, note(6))).toBe(6);
    await second.dropSession('s');
    expect(await second.shared.load('s')).toBeUndefined();
    expect(await second.window('s', 1)).toBeUndefined();
    expect(await second.window('s', 0)).toBeUndefined();
    await second.close();
  });

  it('writes the sequence numbers as the stream ids and leaves no key behind after dropSession', async () => {
    const keyPrefix = freshPrefix();
    const l = make({ keyPrefix, maxEventsPerStream: 2 });
    for (let i = 1; i <= 4; i++) await l.append('s', 7, note(i));
    expect(await l.shared.commit(record, 0)).toBe(true);
    const { createClient } = await import('redis');
    const raw = createClient({ url: server.url });
    raw.on('error', () => {});
    await raw.connect();
    try {
      const entries = await raw.xRange(`${keyPrefix}{s}:x:7`, '-', '+');
      expect(entries.map((e) => e.id)).toEqual(['3-0', '4-0']);
      expect(entries.map((e) => JSON.parse(String(e.message.m)))).toEqual([note(3), note(4)]);
      expect(await raw.hGetAll(`${keyPrefix}{s}:w:7`)).toEqual({ oldest: '3', head: '4', finished: '0' });
      expect((await raw.keys(`${keyPrefix}*`)).sort()).toEqual(
        [
          `${keyPrefix}{s}:keys`,
          `${keyPrefix}{s}:record`,
          `${keyPrefix}{s}:w:7`,
          `${keyPrefix}{s}:x:7`,
          // No other instance holds a lease: the appends were reported to nobody (no inbox was written).
        ].sort(),
      );
      await l.dropSession('s');
      expect(await raw.keys(`${keyPrefix}*`)).toEqual([]);
    } finally {
      await raw.close();
      await l.close();
    }
  });

  it('reports an append in the same script, to the inboxes of the other leased instances only', async () => {
    const keyPrefix = freshPrefix();
    const a = make({ keyPrefix });
    const b = make({ keyPrefix });
    const { createClient } = await import('redis');
    const raw = createClient({ url: server.url });
    raw.on('error', () => {});
    await raw.connect();
    try {
      await a.shared.renewLease(5_000);
      await b.shared.renewLease(5_000);
      const seen: unknown[] = [];
      const stop = b.shared.watch((change) => seen.push(change));
      await a.append('s', 1, note(1));
      await a.appendFinal('s', 1, note(2));
      // Already finished: nothing appended, nothing reported.
      expect(await a.appendFinal('s', 1, note(3))).toBeUndefined();
      const inbox = (id: string) => raw.xLen(`${keyPrefix}inbox:${id}`);
      expect(await inbox(b.shared.instanceId)).toBe(2);
      expect(await inbox(a.shared.instanceId)).toBe(0);
      const deadline = Date.now() + 5_000;
      while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(seen).toEqual([
        { kind: 'appended', sessionId: 's', stream: 1 },
        { kind: 'appended', sessionId: 's', stream: 1 },
      ]);
      stop();
      // A dropped lease takes the instance out of the set: it is sent nothing more.
      await b.shared.dropLease();
      await a.append('s', 2, note(4));
      expect(await inbox(b.shared.instanceId)).toBe(0);
    } finally {
      await raw.close();
      await a.close();
      await b.close();
    }
  });

  it('keeps a record as a core and stream entries: a commit writes and opens what it numbered, a catch-up reads what changed', async () => {
    const l = make();
    const shared = l.shared;
    const snap = (n: number, standalone = false) => {
      const streams: Record<number, StreamEntry> = standalone ? { 0: { kind: 'standalone' } } : {};
      const requests: Record<string, number> = {};
      for (let s = 1; s <= n; s++) {
        streams[s] = { kind: 'request', requestKey: `n:${s}`, owner: 'a' };
        requests[`n:${s}`] = s;
      }
      return { value: 'live', context: { nextStream: n + 1, streams, requests } };
    };
    const rec = (snapshot: unknown) => ({ ...record, snapshot });
    const put = (from: ReturnType<typeof snap>, to: ReturnType<typeof snap>, version: number) =>
      shared.commitEntries(
        rec(coreOf(to)),
        newEntries(watermarkOf(from), to) ?? [],
        watermarkOf(to),
        version,
      );
    try {
      expect(await put(snap(0), snap(2), 0)).toBe(true);
      // The streams a commit numbers are opened in the same step: a cursor into one finds its window.
      expect(await l.window('s', 2)).toEqual({ oldest: 1, head: 0, appendedAt: [], finished: false });
      expect(await put(snap(2), snap(3, true), 1)).toBe(true);
      // Over a version that is not the stored one: nothing written, nothing opened.
      expect(await put(snap(2), snap(9), 1)).toBe(false);
      expect(await l.window('s', 9)).toBeUndefined();
      // A decision that changed nothing shared is confirmed over the stored version only.
      expect(await shared.confirm('s', 2)).toBe(true);
      expect(await shared.confirm('s', 1)).toBe(false);
      // A new session not stored yet is confirmed without leaving a husk; a vanished one is not.
      expect(await shared.confirm('new', 0)).toBe(true);
      expect(await shared.load('new')).toBeUndefined();
      expect(await shared.confirm('new', 3)).toBe(false);
      expect(await shared.loadSince('s', 2, watermarkOf(snap(3, true)))).toEqual({ version: 2 });
      const since = await shared.loadSince('s', 1, watermarkOf(snap(2)));
      expect(since?.entries).toEqual(
        entriesToRead(watermarkOf(snap(2)), watermarkOf(snap(3, true))).map((n) => [
          n,
          snap(3, true).context.streams[n],
        ]),
      );
      expect(since?.record).toEqual(rec(coreOf(snap(3, true))));
      expect(await shared.load('s')).toEqual({ version: 2, record: rec(snap(3, true)) });
      // A record written whole moves its streams beside it at the next delta commit.
      expect(await shared.commit(rec(snap(4)), 2)).toBe(true);
      expect(await put(snap(4), snap(5), 3)).toBe(true);
      expect(await shared.load('s')).toEqual({ version: 4, record: rec(snap(5)) });
      // The forget point moved (request-memory.ts): the entries behind it are deleted by the commit.
      const forgetting = { ...snap(6), context: { ...snap(6).context, forgottenBelow: 5 } };
      for (const n of [1, 2, 3, 4]) {
        delete (forgetting.context.streams as Record<number, unknown>)[n];
        delete (forgetting.context.requests as Record<string, number>)[`n:${n}`];
      }
      expect(await put(snap(5), forgetting, 4)).toBe(true);
      const kept = await shared.load('s');
      expect(
        Object.keys((kept?.record.snapshot as typeof forgetting | undefined)?.context.streams ?? {}),
      ).toEqual(['5', '6']);
      expect(await shared.loadSince('s', -1, undefined)).toMatchObject({
        entries: [
          [5, snap(6).context.streams[5]],
          [6, snap(6).context.streams[6]],
        ],
      });
    } finally {
      await l.close();
    }
  });

  it('rebases a decision that only admitted requests after another instance’s, in the one script (shared-record.ts)', async () => {
    const prefix = freshPrefix();
    const a = new RedisEventLog({ url: server.url, keyPrefix: prefix });
    const b = new RedisEventLog({ url: server.url, keyPrefix: prefix });
    const snap = (keys: string[], standaloneOpened = false) => {
      const streams: Record<number, StreamEntry> = {};
      const requests: Record<string, number> = {};
      keys.forEach((key, i) => {
        streams[i + 1] = { kind: 'request', requestKey: key, owner: 'i' };
        requests[key] = i + 1;
      });
      return { value: 'live', context: { nextStream: keys.length + 1, streams, requests, standaloneOpened } };
    };
    const commit = (
      log: RedisEventLog,
      from: ReturnType<typeof snap>,
      to: ReturnType<typeof snap>,
      version: number,
      rebase = true,
    ) =>
      log.shared.commitEntries(
        { ...record, snapshot: coreOf(to) },
        newEntries(watermarkOf(from), to) ?? [],
        watermarkOf(to),
        version,
        settledFacts(to),
        rebase ? { base: watermarkOf(from), capacity: 3 } : undefined,
      );
    try {
      expect(await commit(a, snap([]), snap(['p']), 0)).toBe(true);
      // Both at version 1 (one stream). a admits q, r; b, not knowing, admits s as its stream 2.
      expect(await commit(a, snap(['p']), snap(['p', 'q', 'r']), 1)).toBe(true);
      const rebased = await commit(b, snap(['p']), snap(['p', 's']), 1);
      const expected = rebaseAdmissions(
        {
          base: watermarkOf(snap(['p'])),
          entries: newEntries(watermarkOf(snap(['p'])), snap(['p', 's'])) ?? [],
          watermark: watermarkOf(snap(['p', 's'])),
          facts: settledFacts(snap(['p', 's'])),
          capacity: 3,
        },
        {
          numbering: { nextStream: 4, forgottenBelow: 1 },
          standalone: false,
          facts: settledFacts(snap(['p', 'q', 'r'])),
          since: [
            [2, { kind: 'request', requestKey: 'q', owner: 'i' }],
            [3, { kind: 'request', requestKey: 'r', owner: 'i' }],
          ],
        },
      );
      expect(expected?.entries).toEqual([[4, { kind: 'request', requestKey: 's', owner: 'i' }]]);
      expect(rebased).toEqual({
        kind: 'rebased',
        version: 3,
        onto: { nextStream: 4, forgottenBelow: 1 },
        since: [
          [2, { kind: 'request', requestKey: 'q', owner: 'i' }],
          [3, { kind: 'request', requestKey: 'r', owner: 'i' }],
        ],
      });
      // The rebased stream was opened under its new number; the stored numbering moved (forget point:
      // capacity 3 behind 5), and a load puts it on the core.
      expect(await b.window('s', 4)).toEqual({ oldest: 1, head: 0, appendedAt: [], finished: false });
      const loaded = (await a.shared.load('s')) as {
        version: number;
        record: { snapshot: ReturnType<typeof snap> };
      };
      expect(loaded.version).toBe(3);
      expect(loaded.record.snapshot.context).toMatchObject({
        nextStream: 5,
        forgottenBelow: 2,
        requests: { q: 2, r: 3, s: 4 },
      });
      // The same request admitted on both: a plain conflict (decided again, it is a duplicate).
      const now = snap(['p', 'q', 'r', 's']);
      expect(await commit(a, snap(['p', 'q', 'r', 's']), snap(['p', 'q', 'r', 's', 't']), 3)).toBe(true);
      expect(await commit(b, now, { ...snap(['p', 'q', 'r', 's', 't']) }, 3)).toBe(false);
      // Anything but admissions (here the standalone stream opened), or a decider not asking: a conflict.
      expect(await commit(b, now, snap(['p', 'q', 'r', 's', 'u'], true), 3)).toBe(false);
      expect(await commit(b, now, snap(['p', 'q', 'r', 's', 'u']), 3, false)).toBe(false);
      expect((await a.shared.load('s'))?.version).toBe(4);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('keys lost outside the retention rules (maxmemory eviction, a stray DEL) are detected, never skipped silently', async () => {
    const keyPrefix = freshPrefix();
    const l = make({ keyPrefix });
    const { createClient } = await import('redis');
    const raw = createClient({ url: server.url });
    raw.on('error', () => {});
    await raw.connect();
    try {
      for (let i = 1; i <= 4; i++) await l.append('s', 1, note(i));
      // The events are gone but the window survived: it moves past them, so a cursor before them gets
      // 410 with the exact count (answerCursor) rather than a replay with a hole.
      await raw.del(`${keyPrefix}{s}:x:1`);
      const read = await l.read('s', 1, 1);
      expect(read?.events).toEqual([]);
      expect(read?.window).toMatchObject({ oldest: 5, head: 4 });
      // The window is gone but the events survived: numbering goes on from the stream, densely.
      for (let i = 1; i <= 3; i++) await l.append('s', 2, note(i));
      await raw.del(`${keyPrefix}{s}:w:2`);
      expect(await l.append('s', 2, note(4))).toBe(4);
      expect((await l.read('s', 2, 0))?.events.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    } finally {
      await raw.close();
      await l.close();
    }
  });

  it('sends a session’s chunks one after another and fails the rest once one fails: nothing stored after a lost event', async () => {
    const keyPrefix = freshPrefix();
    const l = make({ keyPrefix });
    const { createClient } = await import('redis');
    const raw = createClient({ url: server.url });
    raw.on('error', () => {});
    await raw.connect();
    try {
      // Stream 1's events key holds a string: the script call carrying the first chunk fails (WRONGTYPE).
      await raw.set(`${keyPrefix}{s}:x:1`, 'not a stream');
      const first = Array.from({ length: 256 }, (_, i) => l.append('s', 1, note(i)));
      const after = l.append('s', 2, note(256));
      const settled = await Promise.allSettled([...first, after]);
      expect(settled.every((r) => r.status === 'rejected')).toBe(true);
      expect((await l.read('s', 2, 0))?.events ?? []).toEqual([]);
    } finally {
      await raw.close();
      await l.close();
    }
  });

  it('answers every append when the eviction observer throws, and reports the throw to onError', async () => {
    const errors: unknown[] = [];
    const l = make({ maxEventsPerStream: 1, onError: (e) => errors.push(e) });
    l.setObserver({
      evicted: () => {
        throw new Error('observer broke');
      },
    });
    try {
      const seqs = await Promise.all([1, 2, 3, 4].map((i) => l.append('s', 1, note(i))));
      expect(seqs).toEqual([1, 2, 3, 4]);
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.every((e) => (e as Error).message === 'observer broke')).toBe(true);
    } finally {
      await l.close();
    }
  });

  it('ages out more events at once than the script scans per batch', async () => {
    let clock = 1_000_000;
    const l = make({ retentionMs: 100, now: () => clock });
    try {
      for (let i = 1; i <= 300; i++) await l.append('s', 0, note(i));
      clock += 50;
      for (let i = 301; i <= 302; i++) await l.append('s', 0, note(i));
      clock += 60; // the first 300 are 110 ms old, the last two 60 ms
      expect(await l.window('s', 0)).toEqual({
        oldest: 301,
        head: 302,
        appendedAt: [1_000_050, 1_000_050],
        finished: false,
      });
      expect((await l.read('s', 0, 0))?.events.map((e) => e.seq)).toEqual([301, 302]);
    } finally {
      await l.close();
    }
  });

  it('follows retainFrom when the clock goes backwards: the first event young enough decides', async () => {
    let clock = 10_000;
    const l = make({ retentionMs: 100, now: () => clock });
    const model = { window: EMPTY_WINDOW };
    const policy = l.policy;
    try {
      for (const t of [10_000, 9_000, 10_050, 9_500, 10_060]) {
        clock = t;
        model.window = appendToWindow(model.window, t, policy).window;
        await l.append('s', 0, note(t));
        model.window = evictWindow(model.window, clock, policy);
        expect(await l.window('s', 0)).toEqual(model.window);
      }
      clock = 10_120;
      model.window = evictWindow(model.window, clock, policy);
      expect(await l.window('s', 0)).toEqual(model.window);
    } finally {
      await l.close();
    }
  });

  it('keeps sequence numbers dense and distinct under concurrent appends from two clients', async () => {
    const keyPrefix = freshPrefix();
    const a = make({ keyPrefix });
    const b = make({ keyPrefix });
    try {
      const seqs = await Promise.all(
        Array.from({ length: 100 }, (_, i) => (i % 2 ? a : b).append('s', 0, note(i))),
      );
      expect([...seqs].sort((x, y) => x - y)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      const read = await a.read('s', 0, 0);
      expect(read?.events.map((e) => e.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      // Each event carries the message that was appended with the number it was given.
      for (const [i, seq] of seqs.entries()) expect(read?.events[seq - 1]?.message).toEqual(note(i));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('neither crashes nor hangs close() when the server cannot be reached', async () => {
    const l = new RedisEventLog({ url: 'redis://127.0.0.1:1', keyPrefix: freshPrefix() });
    const outcome = await Promise.race([
      l.window('s', 0).then(
        () => 'resolved',
        () => 'rejected',
      ),
      new Promise((resolve) => setTimeout(() => resolve('pending'), 200)),
    ]);
    expect(outcome).not.toBe('resolved');
    await l.close();
  });
});

describe('RedisEventLog across a Redis restart (AOF)', () => {
  async function fill(l: RedisEventLog): Promise<void> {
    for (let i = 1; i < 5; i++) await l.append('s', 1, note(i));
    await l.appendFinal('s', 1, note(5));
    await l.append('s', 0, note(100));
    expect(await l.shared.commit(record, 0)).toBe(true);
  }

  async function expectFilled(l: RedisEventLog): Promise<void> {
    expect(await l.window('s', 1)).toMatchObject({ oldest: 3, head: 5, finished: true });
    expect((await l.read('s', 1, 0))?.events.map((e) => e.seq)).toEqual([3, 4, 5]);
    expect((await l.read('s', 0, 0))?.events).toEqual([{ seq: 1, message: note(100) }]);
    expect((await l.shared.load('s'))?.record).toEqual(record);
  }

  it('loses nothing over SHUTDOWN and a restart; a connected log reconnects by itself', async () => {
    const keyPrefix = freshPrefix();
    const before = make({ keyPrefix, maxEventsPerStream: 3 });
    await fill(before);
    await server.shutdown();
    await server.start();
    const after = make({ keyPrefix, maxEventsPerStream: 3 });
    try {
      await expectFilled(after);
      // The log that was connected when the server went away carries on once the client reconnects.
      await expectFilled(before);
      expect(await before.append('s', 1, note(6))).toBe(6);
      expect(await after.window('s', 1)).toMatchObject({ oldest: 4, head: 6 });
    } finally {
      await Promise.all([before.close(), after.close()]);
    }
  });

  it('loses nothing acknowledged when the Redis process is killed (SIGKILL)', async () => {
    const keyPrefix = freshPrefix();
    const before = make({ keyPrefix, maxEventsPerStream: 3 });
    await fill(before);
    await server.kill();
    await before.close();
    await server.start();
    const after = make({ keyPrefix, maxEventsPerStream: 3 });
    try {
      await expectFilled(after);
    } finally {
      await after.close();
    }
  });
});
