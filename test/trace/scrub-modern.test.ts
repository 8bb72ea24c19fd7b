import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModernView, PageMessage } from '../../src/inspect/wire.js';
import { createTrace, readTrace, replayTrace } from '../../src/trace/index.js';
import { pageAsOf, scrubTrace } from '../../src/trace/scrub.js';
import { callCutTwice } from '../inspect/keyed-cut-world.js';

/**
 * The scrubber on 2026-07-28: a keyed call cut twice over real HTTP (official v2 client with
 * `continuityFetch({ inspect })`, `createKeyedRequests({ inspect })` behind `createContinuityServer`), both
 * sides traced to one file. As of the trace's end the page has the call's three attempts and the server's
 * one execution; as of the first cut, one attempt ended and no outcome yet.
 */
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The latest 2026 view of each actor in what a page is told. */
function views(messages: PageMessage[]) {
  const latest = new Map<string, ModernView>();
  for (const m of messages) if (m.kind === 'modern') latest.set(m.id, m.view);
  const all = [...latest.values()];
  return {
    call: all.find((v) => v.kind === 'call') as Extract<ModernView, { kind: 'call' }> | undefined,
    keyed: all.filter((v) => v.kind === 'keyed') as Extract<ModernView, { kind: 'keyed' }>[],
  };
}

describe('the scrubber over a 2026-07-28 trace', () => {
  it('as of the end: three attempts and one execution; as of the first cut: one attempt cut, no outcome', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-trace-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'trace.jsonl');
    const trace = createTrace({ path });
    await callCutTwice(trace.inspect, cleanups);
    trace.close();

    const { records } = readTrace(path);
    expect(replayTrace(records).differences).toEqual([]);
    const scrubbed = scrubTrace(records);
    const end = views(pageAsOf(scrubbed, scrubbed.stops.length - 1));
    expect(end.call).toMatchObject({ tool: 'charge', outcome: 'answered' });
    expect(end.call?.attempts.map((a) => a.end)).toEqual(['cut-mid-stream', 'cut-mid-stream', 'result']);
    expect(end.keyed.reduce((n, k) => n + k.executions, 0)).toBe(1);
    expect(end.keyed.flatMap((k) => k.attempts).map((a) => a.id)).toEqual(
      end.call?.attempts.map((a) => a.id),
    );

    // The first stop at which the call's first attempt has ended: cut, a re-issue decided, no outcome.
    const firstCut = scrubbed.stops.findIndex(
      (_, i) => views(pageAsOf(scrubbed, i)).call?.attempts[0]?.end === 'cut-mid-stream',
    );
    expect(firstCut).toBeGreaterThan(0);
    const then = views(pageAsOf(scrubbed, firstCut));
    expect(then.call?.outcome).toBeUndefined();
    expect(then.call?.attempts[0]?.decision).toMatch(/^(backoff-)?reissue$/);
    expect(then.keyed.reduce((n, k) => n + k.executions, 0)).toBe(1);
    // Before it, the call had not ended an attempt.
    expect(views(pageAsOf(scrubbed, firstCut - 1)).call?.attempts[0]?.end).toBeUndefined();
  }, 60_000);
});
