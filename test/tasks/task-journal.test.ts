import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  answerEnding,
  type JournalCall,
  type JournalEntry,
  journalAdopt,
  journalBegin,
  journalEnd,
  journalHandle,
  journalResume,
  keepsEntry,
} from '../../machines/tasks/task-journal.js';
import {
  FileTaskJournal,
  JournalBook,
  journalBookOf,
  MemoryTaskJournal,
} from '../../src/client/modern/task-journal.js';
import { resumeTasks } from '../../src/client/modern/tasks-follow.js';

/**
 * The task journal's decisions (machines/tasks/task-journal.ts), row by row, and its stores: the file is
 * written whole and atomically, a file that is not a journal is refused (never reset), and the book
 * stores a call's entry before it answers `begin` (the shell sends only after that).
 */

const call = (over: Partial<JournalCall> = {}): JournalCall => ({
  fingerprint: 'fp',
  url: 'http://x/mcp',
  toolName: 'charge',
  keyed: true,
  claimed: new Set(),
  now: 1_000,
  ...over,
});
const entry = (over: Partial<JournalEntry> = {}): JournalEntry => ({
  key: 'k1',
  fingerprint: 'fp',
  url: 'http://x/mcp',
  toolName: 'charge',
  writtenAt: 900,
  ...over,
});

describe('journalResume and journalAdopt: a restarted process re-attaches without calling again', () => {
  const policy = { maxAgeMs: 1_000 };
  it('this URL’s unclaimed entries: those with a task followed, those with only a key left for the same call', () => {
    const handed = entry({ key: 'a', taskId: 't' });
    const keyOnly = entry({ key: 'b' });
    const claimed = entry({ key: 'c', taskId: 'u' });
    const elsewhere = entry({ key: 'd', taskId: 'v', url: 'http://y/mcp' });
    const d = journalResume(
      [handed, keyOnly, claimed, elsewhere],
      { url: 'http://x/mcp', claimed: new Set(['c']), now: 1_000 },
      policy,
    );
    expect(d.decision).toEqual({ follow: [handed], unhanded: [keyOnly] });
    expect(d.changed).toBe(false);
  });

  it('entries past their age are dropped unread (and the journal saved)', () => {
    const old = entry({ key: 'a', taskId: 't', writtenAt: 0 });
    const d = journalResume([old], { url: 'http://x/mcp', claimed: new Set(), now: 1_000 }, policy);
    expect(d).toEqual({ entries: [], changed: true, decision: { follow: [], unhanded: [] } });
  });

  it('followTask adopts the entry holding its task id, unless a call here still claims it', () => {
    const e = entry({ key: 'a', taskId: 't' });
    expect(journalAdopt([e], 't', new Set())).toEqual(e);
    expect(journalAdopt([e], 't', new Set(['a']))).toBeUndefined();
    expect(journalAdopt([e], 'other', new Set())).toBeUndefined();
  });

  it('the book claims what it resumes: a second resume in the process finds nothing; one book per store', async () => {
    const store = new MemoryTaskJournal();
    const book = journalBookOf(store);
    expect(journalBookOf(store)).toBe(book);
    await book.begin({ url: 'http://x/mcp', toolName: 'charge', args: {}, keyed: true }, 'k');
    book.release('k');
    await book.handle('k', 't', undefined);
    expect((await book.resume('http://x/mcp')).follow.map((e) => e.taskId)).toEqual(['t']);
    expect((await book.resume('http://x/mcp')).follow).toEqual([]);
    expect(await book.adopt('t')).toBeUndefined();
    await book.end('k', { kind: 'task', outcome: { kind: 'completed', result: {} } });
    expect(await store.load()).toEqual([]);
  });
});

describe('journalBegin: before the first send', () => {
  it('no entry: a fresh one with the new key is written', () => {
    const d = journalBegin([], call(), 'new');
    expect(d.decision).toMatchObject({ kind: 'fresh', entry: { key: 'new', fingerprint: 'fp' } });
    expect(d.entries).toHaveLength(1);
    expect(d.changed).toBe(true);
  });

  it('an entry of the same call without a task: its key is sent again, nothing written', () => {
    const d = journalBegin([entry()], call(), 'new');
    expect(d.decision).toEqual({ kind: 'reissue', entry: entry() });
    expect(d.changed).toBe(false);
  });

  it('an entry with a task id: the task is followed (the call is not sent), even unkeyed', () => {
    const e = entry({ taskId: 't1' });
    expect(journalBegin([e], call(), 'new').decision).toEqual({ kind: 'follow', entry: e });
    expect(journalBegin([e], call({ keyed: false }), 'new').decision).toEqual({ kind: 'follow', entry: e });
  });

  it('an entry claimed by a call still running here is not adopted: a concurrent same call gets its own key', () => {
    const d = journalBegin([entry()], call({ claimed: new Set(['k1']) }), 'new');
    expect(d.decision).toMatchObject({ kind: 'fresh', entry: { key: 'new' } });
    expect(d.entries.map((e) => e.key)).toEqual(['k1', 'new']);
  });

  it('another call (fingerprint) is not resumed', () => {
    expect(journalBegin([entry()], call({ fingerprint: 'other' }), 'new').decision.kind).toBe('fresh');
  });

  it('an entry past maxAgeMs is dropped unread', () => {
    const d = journalBegin([entry({ writtenAt: 0 })], call({ now: 5_000 }), 'new', { maxAgeMs: 1_000 });
    expect(d.decision).toMatchObject({ kind: 'fresh', entry: { key: 'new' } });
    expect(d.entries.map((e) => e.key)).toEqual(['new']);
  });

  it('an unkeyed call journals nothing (a re-send could not be deduplicated)', () => {
    const d = journalBegin([], call({ keyed: false }), 'new');
    expect(d).toEqual({ entries: [], changed: false, decision: { kind: 'none' } });
  });
});

describe('journalHandle and journalEnd', () => {
  it('the handle’s task id joins its entry only', () => {
    const next = journalHandle([entry(), entry({ key: 'k2' })], 'k1', 't1', '7');
    expect(next).toEqual([entry({ taskId: 't1', lastEventId: '7' }), entry({ key: 'k2' })]);
  });

  it('kept while the outcome is unknown; dropped once known', () => {
    const kept = [
      { kind: 'answer', outcomeUnknown: true },
      { kind: 'task', outcome: { kind: 'unknown', reason: 'task_unreachable' } },
      { kind: 'task', outcome: { kind: 'unknown', reason: 'cancel_unconfirmed' } },
      { kind: 'task', outcome: { kind: 'input-unanswerable', inputRequests: {} } },
    ] as const;
    const dropped = [
      { kind: 'answer', outcomeUnknown: false },
      { kind: 'aborted' },
      { kind: 'task', outcome: { kind: 'completed', result: {} } },
      { kind: 'task', outcome: { kind: 'failed', error: { code: -32603, message: 'x' } } },
      { kind: 'task', outcome: { kind: 'cancelled' } },
      { kind: 'task', outcome: { kind: 'expired' } },
      { kind: 'task', outcome: { kind: 'unknown', reason: 'task_not_found' } },
    ] as const;
    for (const e of kept) expect(keepsEntry(e), JSON.stringify(e)).toBe(true);
    for (const e of dropped) expect(keepsEntry(e), JSON.stringify(e)).toBe(false);
    expect(journalEnd([entry()], 'k1', dropped[0])).toEqual([]);
    expect(journalEnd([entry()], 'k1', kept[0])).toEqual([entry()]);
  });

  it('answerEnding: OUTCOME_UNKNOWN and fetch errors are unknown; a result, an error, a raw answer known', () => {
    expect(answerEnding('final', { error: { code: -32050 } })).toEqual({
      kind: 'answer',
      outcomeUnknown: true,
    });
    expect(answerEnding('fetch-error', undefined)).toEqual({ kind: 'answer', outcomeUnknown: true });
    expect(answerEnding('final', { result: {} })).toEqual({ kind: 'answer', outcomeUnknown: false });
    expect(answerEnding('final', { error: { code: -32602 } })).toEqual({
      kind: 'answer',
      outcomeUnknown: false,
    });
    expect(answerEnding('raw-answer', undefined)).toEqual({ kind: 'answer', outcomeUnknown: false });
    expect(answerEnding('abort', undefined)).toEqual({ kind: 'aborted' });
  });
});

describe('the stores', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'journal-'));
    dirs.push(d);
    return d;
  };

  it('FileTaskJournal: no file reads empty; saved entries read back; no temporary file left', async () => {
    const dir = tempDir();
    const store = new FileTaskJournal(join(dir, 'j.json'));
    expect(await store.load()).toEqual([]);
    await store.save([entry({ taskId: 't' })]);
    expect(await new FileTaskJournal(join(dir, 'j.json')).load()).toEqual([entry({ taskId: 't' })]);
    expect(readdirSync(dir)).toEqual(['j.json']);
  });

  it('FileTaskJournal refuses a file that is not a journal rather than resetting it', async () => {
    const path = join(tempDir(), 'j.json');
    writeFileSync(path, JSON.stringify({ version: 1, entries: [{ key: 1 }] }));
    await expect(new FileTaskJournal(path).load()).rejects.toThrow(/malformed/);
    writeFileSync(path, JSON.stringify({ hello: 'world' }));
    await expect(new FileTaskJournal(path).load()).rejects.toThrow(/not a task journal/);
  });

  it('JournalBook: begin resolves only once the entry is stored; a known end drops it', async () => {
    const store = new MemoryTaskJournal();
    const book = new JournalBook(store);
    const c = { url: 'http://x/mcp', toolName: 'charge', args: { b: 1, a: 2 }, keyed: true };
    const start = await book.begin(c, 'k');
    expect(start.kind).toBe('fresh');
    expect((await store.load()).map((e) => e.key)).toEqual(['k']);
    await book.handle('k', 't', undefined);
    expect((await store.load())[0]?.taskId).toBe('t');
    // A restarted process (a new book on the same store), arguments in another order: the same task.
    const again = await new JournalBook(store).begin({ ...c, args: { a: 2, b: 1 } }, 'other');
    expect(again).toMatchObject({ kind: 'follow', entry: { key: 'k', taskId: 't' } });
    await book.end('k', { kind: 'task', outcome: { kind: 'completed', result: {} } });
    expect(await store.load()).toEqual([]);
  });

  it('JournalBook: calls that begin together, before the first load is done, each keep their entry (review finding)', async () => {
    const store = new MemoryTaskJournal();
    const book = new JournalBook(store);
    const call = (toolName: string) => ({ url: 'http://x/mcp', toolName, args: {}, keyed: true });
    // Both await the same first load: each must add to the other's list, not to the list the store gave.
    await Promise.all([
      book.begin(call('a'), 'ka'),
      book.begin(call('b'), 'kb'),
      book.begin(call('c'), 'kc'),
    ]);
    expect((await store.load()).map((e) => e.key).sort()).toEqual(['ka', 'kb', 'kc']);
    await Promise.all([book.handle('ka', 'ta', undefined), book.handle('kb', 'tb', undefined)]);
    const stored = await store.load();
    expect(stored.find((e) => e.key === 'ka')?.taskId).toBe('ta');
    expect(stored.find((e) => e.key === 'kb')?.taskId).toBe('tb');
  });

  it('JournalBook: a released call leaves its entry, and a later same call adopts its key', async () => {
    const book = new JournalBook(new MemoryTaskJournal());
    const c = { url: 'http://x/mcp', toolName: 'charge', args: {}, keyed: true };
    expect(await book.begin(c, 'k1')).toMatchObject({ kind: 'fresh' });
    book.release('k1');
    expect(await book.begin(c, 'k2')).toMatchObject({ entry: { key: 'k1' } });
  });
});

describe('resumeTasks', () => {
  it('one follow throwing is reported in `failed`; the other still ends and its outcome is returned', async () => {
    // Task a is completed; task b asks for input, which this application's handler cannot give (throws).
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        const m = JSON.parse(body) as { id: string; params: { taskId: string } };
        const task =
          m.params.taskId === 'a'
            ? { taskId: 'a', status: 'completed', result: { content: [] } }
            : {
                taskId: 'b',
                status: 'input_required',
                inputRequests: { q: { method: 'elicitation/create' } },
              };
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: task }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    try {
      const store = new MemoryTaskJournal();
      const book = journalBookOf(store);
      for (const [key, taskId] of [
        ['ka', 'a'],
        ['kb', 'b'],
      ] as const) {
        await book.begin({ url, toolName: 'charge', args: { taskId }, keyed: true }, key);
        book.release(key);
        await book.handle(key, taskId, undefined);
      }
      const resumed = await resumeTasks(url, {
        journal: store,
        policy: { minPollMs: 10, retryDelayMs: 10 },
        onInputRequired: async () => {
          throw new Error('no one to ask');
        },
      });
      expect(resumed.tasks).toEqual([
        {
          taskId: 'a',
          toolName: 'charge',
          key: 'ka',
          outcome: { kind: 'completed', result: { content: [] } },
        },
      ]);
      expect(resumed.failed).toMatchObject([{ taskId: 'b', toolName: 'charge', key: 'kb' }]);
      expect(resumed.failed[0]?.error).toMatchObject({ message: 'no one to ask' });
      // a's entry is settled (dropped); b's is kept for a later resume.
      expect((await store.load()).map((e) => e.key)).toEqual(['kb']);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
