/**
 * Redis round trips of MCP 2026-07-28 keyed calls, one call in flight (issues 25 and 29; docs/benchmarks.md
 * row 6): our server in this process on a real `redis-server` (event log and memo), every command going
 * through the counting relay (lib/redis-meter.ts), so a round trip is a batch one of the two clients
 * flushed. Prints, per call, the round trips, commands and the commands by name, for keyed `echo` calls (no
 * event) and keyed `stream {count}` calls (events), and for re-issues of a finished key.
 *
 *   npx tsx bench/profile-redis-keyed.ts [calls=100] [events=3]
 */
import { RedisEventLog, RedisMemoStore } from '../src/redis.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { connectModernClient, startModernOurs } from './lib/modern.js';
import { countsSince, startRedisMeter } from './lib/redis-meter.js';

const calls = Number(process.argv[2] ?? 100);
const events = Number(process.argv[3] ?? 3);

const redis = await startRedisServer();
const meter = await startRedisMeter(redis.port);
const log = new RedisEventLog({ url: meter.url, keyPrefix: 'p:' });
const memo = new RedisMemoStore({ url: meter.url, keyPrefix: 'p:', memoWindowMs: 10 * 60_000 });
const server = await startModernOurs({ log, memo, maxKeys: 1_000_000 });
const c = await connectModernClient(server.url, true);

/** Runs `work` `calls` times in sequence and prints what each cost Redis. */
async function measure(label: string, work: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < 10; i++) await work(-1 - i);
  const before = meter.counts();
  for (let i = 0; i < calls; i++) await work(i);
  const d = countsSince(before, meter.counts());
  const byName = Object.entries(d.byName)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${(v / calls).toFixed(2)}`)
    .join(', ');
  console.log(
    `${label}: ${(d.writes / calls).toFixed(2)} round trips, ${(d.commands / calls).toFixed(2)} commands per call (${byName})`,
  );
}

try {
  await measure('keyed echo (no event)', async (i) => {
    const r = await c.client.callTool({ name: 'echo', arguments: { text: `hello ${i}` } });
    if ((r.content as Array<{ text?: string }>)[0]?.text !== `hello ${i}`) throw new Error(JSON.stringify(r));
  });
  await measure(`keyed stream (${events} events)`, async () => {
    await c.client.callTool(
      { name: 'stream', arguments: { count: events } },
      { onprogress: () => undefined },
    );
  });
  if (server.errors.length > 0) console.log('server errors:', server.errors.slice(0, 5));
} finally {
  await c.close();
  await server.close();
  await log.close();
  await memo.close();
  await meter.close();
  await redis.dispose();
}
