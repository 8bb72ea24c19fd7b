import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteEventLog } from '../../src/server/sqlite-event-log.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function file(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'mcpc-sqlite-'));
  dirs.push(d);
  return join(d, 'log.db');
}

// The EventLog contract runs on this log in test/contracts/event-log.test.ts.

describe('SqliteEventLog', () => {
  it('survives the process: a new log on the same file has the events, windows and sessions', async () => {
    const path = await file();
    const first = new SqliteEventLog({ path, maxEventsPerStream: 3 });
    for (let i = 1; i < 5; i++) await first.append('s', 1, { jsonrpc: '2.0', method: 'n', params: { i } });
    await first.appendFinal('s', 1, { jsonrpc: '2.0', method: 'n', params: { i: 5 } });
    await first.registry.save({
      id: 's',
      epoch: 'ep',
      initialize: { jsonrpc: '2.0', id: 1, method: 'initialize' },
      snapshot: { x: 1 },
    });
    await first.close();
    const second = new SqliteEventLog({ path, maxEventsPerStream: 3 });
    expect(await second.window('s', 1)).toMatchObject({ oldest: 3, head: 5, finished: true });
    expect((await second.read('s', 1, 3))?.events.map((e) => e.message)).toEqual([
      { jsonrpc: '2.0', method: 'n', params: { i: 4 } },
      { jsonrpc: '2.0', method: 'n', params: { i: 5 } },
    ]);
    expect(await second.registry.load('s')).toMatchObject({ id: 's', epoch: 'ep', snapshot: { x: 1 } });
    await second.dropSession('s');
    expect(await second.registry.load('s')).toBeUndefined();
    expect(await second.window('s', 1)).toBeUndefined();
    await second.close();
  });

  it('is durable on a file and not on :memory:', async () => {
    expect(new SqliteEventLog({ path: await file() }).durable).toBe(true);
    expect(new SqliteEventLog({ path: ':memory:' }).durable).toBe(false);
  });

  it('rejects only the append whose message cannot be serialised; a concurrent one from another session is stored', async () => {
    const log = new SqliteEventLog({ path: ':memory:' });
    const bad = log.append('a', 1, { jsonrpc: '2.0', method: 'n', params: { big: 1n } } as never);
    const good = log.append('b', 1, { jsonrpc: '2.0', method: 'n', params: { ok: true } });
    await expect(bad).rejects.toThrow(/BigInt/);
    expect(await good).toBe(1);
    expect((await log.read('b', 1, 0))?.events.map((e) => e.message)).toEqual([
      { jsonrpc: '2.0', method: 'n', params: { ok: true } },
    ]);
    await log.close();
  });
});
