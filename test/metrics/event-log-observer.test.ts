import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryEventLog } from '../../src/index.js';
import { RedisEventLog } from '../../src/redis.js';
import type { EventLog, EventLogObserver } from '../../src/server/event-log.js';
import { SqliteEventLog } from '../../src/sqlite.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

let redis: RedisServer | undefined;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.dispose();
});

/**
 * The eviction hook every backend offers for metrics: `setObserver({ evicted(count, sessionId, stream) })`.
 * It reports what the retention rule dropped, by count and by age, and nothing else (not a session that
 * ended and was dropped).
 */
const message = (n: number) => ({ jsonrpc: '2.0' as const, method: 'notifications/message', params: { n } });

function recording(): EventLogObserver & { seen: Array<[number, string, number]>; total: () => number } {
  const seen: Array<[number, string, number]> = [];
  return {
    seen,
    evicted: (count, sessionId, stream) => void seen.push([count, sessionId, stream]),
    total: () => seen.reduce((sum, [count]) => sum + count, 0),
  };
}

const backends: Array<[string, (now: () => number) => EventLog]> = [
  ['MemoryEventLog', (now) => new MemoryEventLog({ maxEventsPerStream: 3, retentionMs: 1_000, now })],
  [
    'SqliteEventLog',
    (now) => new SqliteEventLog({ path: ':memory:', maxEventsPerStream: 3, retentionMs: 1_000, now }),
  ],
  [
    'RedisEventLog',
    (now) =>
      new RedisEventLog({
        url: redis?.url as string,
        keyPrefix: `observer-${Math.random().toString(36).slice(2)}:`,
        maxEventsPerStream: 3,
        retentionMs: 1_000,
        now,
      }),
  ],
];

describe.each(backends)('%s eviction observer', (_name, make) => {
  it('reports each eviction by the count bound with its session and stream', async () => {
    const log = make(() => 0);
    const observer = recording();
    log.setObserver?.(observer);
    for (let n = 1; n <= 5; n++) await log.append('s1', 2, message(n));
    expect(observer.total()).toBe(2);
    expect(observer.seen.every(([, s, stream]) => s === 's1' && stream === 2)).toBe(true);
    await log.close();
  });

  it('reports eviction by age, found when the window is next read', async () => {
    let now = 0;
    const log = make(() => now);
    const observer = recording();
    log.setObserver?.(observer);
    await log.append('s1', 1, message(1));
    await log.append('s1', 1, message(2));
    now = 5_000;
    expect(await log.window('s1', 1)).toMatchObject({ oldest: 3, head: 2 });
    expect(observer.seen).toEqual([[2, 's1', 1]]);
    await log.close();
  });

  it('a dropped session is not an eviction; a removed observer hears nothing', async () => {
    const log = make(() => 0);
    const observer = recording();
    log.setObserver?.(observer);
    await log.append('s1', 1, message(1));
    await log.dropSession('s1');
    expect(observer.total()).toBe(0);
    log.setObserver?.(undefined);
    for (let n = 1; n <= 5; n++) await log.append('s2', 1, message(n));
    expect(observer.total()).toBe(0);
    await log.close();
  });
});
