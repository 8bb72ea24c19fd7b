/**
 * In-process profile of 2026-07-28 calls: where does a keyed call spend time an unkeyed one does not?
 * Server and client share one process so `node --cpu-prof` sees both; run it under
 * `bench/profile-summary.ts` afterwards.
 *
 *   npx tsx bench/profile-modern-keyed.ts [mode=all] [calls=2000] [concurrency=50]
 *   PROFILE_DIR=/tmp/prof npx tsx bench/profile-modern-keyed.ts keyed 3000
 *
 * Modes: `keyed` (`echo` through `continuityFetch`, so keyed), `unkeyed` (`peek`, read-only, through our
 * endpoint), `plain` (`peek` through our endpoint from the official client without `continuityFetch`:
 * our server's share, the client being the official one), `official` (the official v2 server and client,
 * no continuity), `all` (official, plain, unkeyed, keyed in turn, so their calls/s can be compared as
 * ratios of one run). On a shared machine calls/s varies with the load; CPU µs per call much less.
 *
 * `PROFILE_DIR`: a `.cpuprofile` per mode of the measured calls only (no start-up, no warm-up), for
 * `bench/profile-summary.ts`.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { connectModernClient, startModernOfficial, startModernOurs } from './lib/modern.js';
import type { RunningServer } from './lib/stacks.js';
import { pool } from './lib/stats.js';

type Mode = 'keyed' | 'unkeyed' | 'plain' | 'official';

/** Calls per second of wall time, and CPU microseconds (user + system) per call: on a busy machine the second is steadier. */
interface Measured {
  perSecond: number;
  cpuUsPerCall: number;
  /** TCP connections the server accepted during the measured calls (a pooled client: about `concurrency`). */
  connections: number;
}

async function run(mode: Mode, calls: number, concurrency: number): Promise<Measured> {
  const server: RunningServer =
    mode === 'official' ? await startModernOfficial() : await startModernOurs({ maxKeys: 1_000_000 });
  // A loaded machine: an idle pooled connection the server closes at its 5 s default just as the client
  // reuses it is a reset, not a measurement.
  server.http.keepAliveTimeout = 120_000;
  // A client that aborts a finished exchange can cost a new TCP connection per call: counted.
  let connections = 0;
  server.http.on('connection', () => connections++);
  const c = await connectModernClient(server.url, mode === 'keyed' || mode === 'unkeyed');
  const tool = mode === 'unkeyed' || mode === 'plain' ? 'peek' : 'echo';
  try {
    // `continuityFetch` learns `peek` is read-only from `tools/list`; unlisted it would be keyed.
    if (tool === 'peek') await c.client.listTools();
    let failed = 0;
    const call = async (i: number) => {
      const text = `hello ${i}`;
      // A call that fails (on a saturated machine a keyed call can end outcome unknown) is counted, not fatal.
      const result = await c.client
        .callTool({ name: tool, arguments: { text } }, { timeout: 120_000 })
        .catch(() => undefined);
      if (result === undefined) {
        failed++;
        return;
      }
      const got = (result.content as Array<{ text?: string }>)[0]?.text;
      if (got !== text) throw new Error(`call ${i}: expected ${text}, got ${JSON.stringify(result)}`);
    };
    await pool(Math.min(500, calls), concurrency, call);
    const profiler = process.env.PROFILE_DIR ? new Session() : undefined;
    if (profiler) {
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.start');
    }
    const connectionsBefore = connections;
    const start = performance.now();
    const cpu = process.cpuUsage();
    await pool(calls, concurrency, call);
    const perSecond = calls / ((performance.now() - start) / 1000);
    const used = process.cpuUsage(cpu);
    if (profiler) {
      const { profile } = await profiler.post('Profiler.stop');
      writeFileSync(`${process.env.PROFILE_DIR}/${mode}.cpuprofile`, JSON.stringify(profile));
      profiler.disconnect();
    }
    const errors = [...server.errors, ...c.errors];
    if (errors.length > 0) throw new Error(`${mode}: ${errors.slice(0, 3).join('; ')}`);
    if (failed > 0) console.log(`${mode}: ${failed} of ${calls + Math.min(500, calls)} calls failed`);
    return {
      perSecond,
      cpuUsPerCall: (used.user + used.system) / calls,
      connections: connections - connectionsBefore,
    };
  } finally {
    await c.close();
    await server.close();
  }
}

const [modeArg = 'all', callsArg = '2000', concurrencyArg = '50'] = process.argv.slice(2);
const modes: Mode[] = modeArg === 'all' ? ['official', 'plain', 'unkeyed', 'keyed'] : [modeArg as Mode];
const results: Record<string, Measured> = {};
for (const mode of modes) results[mode] = await run(mode, Number(callsArg), Number(concurrencyArg));
const official = results.official;
for (const [mode, { perSecond, cpuUsPerCall, connections }] of Object.entries(results)) {
  const ratio =
    official === undefined
      ? ''
      : `  ${(perSecond / official.perSecond).toFixed(2)}x official calls/s, ${(cpuUsPerCall / official.cpuUsPerCall).toFixed(2)}x its CPU`;
  console.log(
    `${mode.padEnd(9)} ${perSecond.toFixed(0).padStart(6)} calls/s ${cpuUsPerCall.toFixed(0).padStart(6)} µs CPU/call ${String(connections).padStart(5)} connections${ratio}`,
  );
}
