import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { machineCatalog } from '../../machines/catalog.js';
import { streamMachine } from '../../machines/client/stream.machine.js';
import {
  callsTold,
  catalogById,
  createTrace,
  explainText,
  readTrace,
  replayText,
  replayTrace,
} from '../../src/trace/index.js';
import { recordIncident as record } from './record-incident.js';

/**
 * Issue 27 item 2: an incident reproduced over real HTTP on loopback (a charge running when the server
 * process dies, so the client's resume gets a 404), recorded by a trace; `explain` names the cause and
 * `replay` runs the recorded events through today's machines, agreeing with them and catching a wrong one.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const recordIncident = () => record(cleanups);

describe('an incident in a trace: a 404 during a charge', () => {
  it('explain names the cause: the 404 that ended the session, and the outcome unknown it meant', async () => {
    const { records } = await recordIncident();
    const unknown = callsTold(records).filter((c) => c.answer.startsWith('outcome unknown'));
    expect(unknown).toHaveLength(1);
    expect(unknown[0]?.answer).toBe('outcome unknown (session_lost)');
    expect(unknown[0]?.cause).toMatch(
      /^after HTTP 404 on stream-\d+ at [\d.]+ s; its decision: session-terminated$/,
    );
    const text = explainText(records);
    expect(text).toMatch(/HTTP 404 .*→ sessionTerminated \(decision: session-terminated\)/);
    expect(text).toContain('stream.ended (session-terminated) from stream-');
  });

  it("replay runs the recorded events through today's machines: every decision agrees; a wrong machine is flagged", async () => {
    const { records } = await recordIncident();
    const report = replayTrace(records);
    expect(report.differences).toEqual([]);
    expect(report.notReplayable).toEqual([]);
    expect(report.actors).toBeGreaterThanOrEqual(3);
    expect(report.events).toBeGreaterThan(10);
    expect(replayText(report)).toContain('every decision agrees');

    // A stream machine that no longer takes a 404 as the session's end: the incident's decision now differs.
    const wrong = streamMachine.provide({ guards: { isSessionGone: () => false } });
    const mutated = replayTrace(records, catalogById({ ...machineCatalog, 'client-stream': wrong }));
    expect(mutated.differences).toHaveLength(1);
    expect(mutated.differences[0]).toMatchObject({ machine: 'stream', event: 'http.response' });
    expect(mutated.differences[0]?.recorded).toMatch(/^sessionTerminated/);
    expect(replayText(mutated)).toContain('1 differ');
  });
});

describe('the command line: mcp-continuity explain | replay <trace>', () => {
  const cli = (...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });

  it('explains and replays a recorded incident; a missing file exits 2', async () => {
    const { dir } = await recordIncident();
    const path = join(dir, 'trace.jsonl');
    const explained = cli('explain', path);
    expect(explained.status).toBe(0);
    expect(explained.stdout).toMatch(/outcome unknown \(session_lost\) — after HTTP 404/);
    const replayed = cli('replay', path);
    expect(replayed.status).toBe(0);
    expect(replayed.stdout).toContain('every decision agrees');
    const missing = cli('replay', join(dir, 'none.jsonl'));
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('no trace at');
    // A torn line (a crash mid-write) is skipped and said, not fatal.
    await writeFile(join(dir, 'torn.jsonl'), '{"k":"actor"\n');
    const torn = cli('explain', join(dir, 'torn.jsonl'));
    expect(torn.status).toBe(0);
    expect(torn.stderr).toContain('1 line(s) that are not trace records skipped');
  });
});

describe('the trace file', () => {
  it('rotates at maxBytes, keeps `keep` parts, and is read back oldest first', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mcpc-trace-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 't.jsonl');
    let now = 0;
    const trace = createTrace({ path, maxBytes: 2_000, keep: 2, now: () => now });
    const ref = { sessionId: 'x:1', id: 'x:1', logic: {} } as never;
    for (let i = 0; i < 200; i++) {
      now = i;
      trace.inspect.next?.({
        type: '@xstate.event',
        actorRef: ref,
        rootId: 'x:1',
        sourceRef: undefined,
        event: { type: 'tick', n: i },
      } as never);
    }
    trace.close();
    expect((await readdir(dir)).sort()).toEqual(['t.jsonl', 't.jsonl.1', 't.jsonl.2']);
    const { records } = readTrace(path);
    const ns = records.map((r) => (r.k === 'event' ? (r.e.n as number) : -1));
    expect(ns.length).toBeLessThan(200); // the oldest parts were deleted
    expect(ns).toEqual([...ns].sort((a, b) => a - b)); // oldest part first
    expect(ns.at(-1)).toBe(199);
  });
});
