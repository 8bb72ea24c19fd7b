import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { expect } from 'vitest';
import { ContinuityClientTransport, isOutcomeUnknown } from '../../src/index.js';
import { createTrace, readTrace, type TraceRecord } from '../../src/trace/index.js';
import { restartableServer } from '../support/restartable-server.js';

/**
 * Issue 27's incident, recorded: over real HTTP on loopback a charge is running when the server process
 * dies, so the client's resume gets a 404 and the call ends outcome unknown. The client's machines are
 * traced to `<dir>/trace.jsonl`. Each cleanup is pushed to `cleanups` (run them after the test).
 */
export async function recordIncident(
  cleanups: Array<() => Promise<void>>,
): Promise<{ records: TraceRecord[]; dir: string; path: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'mcpc-trace-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'trace.jsonl');
  const trace = createTrace({ path });
  const p = await restartableServer({ retryMs: 20 });
  cleanups.push(() => p.dispose());
  const transport = new ContinuityClientTransport(p.url, {
    reconnect: { initialDelayMs: 20, maxDelayMs: 200, jitter: 'none' },
    inspect: trace.inspect,
  });
  const client = new Client({ name: 'trace', version: '1.0.0' });
  cleanups.push(() => client.close());
  await client.connect(transport);
  const running = client.callTool({ name: 'charge', arguments: { key: 'card-1', ms: 2_000 } });
  for (let i = 0; i < 500 && p.world.effects.get('card-1') !== 1; i++)
    await new Promise((r) => setTimeout(r, 10));
  expect(p.world.effects.get('card-1')).toBe(1);
  p.restart(); // the process dies, and its memory sessions with it
  const err = await running.catch((e: unknown) => e);
  expect(isOutcomeUnknown(err)).toBe(true);
  trace.close();
  const { records, skipped } = readTrace(path);
  expect(skipped).toBe(0);
  return { records, dir, path };
}
