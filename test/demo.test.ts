import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { CONTINUITY_KEY } from '../src/demo/part-modern.js';
import { guaranteesHeld, runDemo } from '../src/demo/run-demo.js';

/** `npm start`: the design note's scenario runs live and every guarantee holds. */
describe('the demo', () => {
  it('one charge, one session through the cuts, the lost range flagged, nothing lost silently', async () => {
    const lines: string[] = [];
    const s = await runDemo({ log: (l) => lines.push(l) });
    expect(s.charges).toBe(1);
    expect(s.chargeResult).toBe('charged card-4242');
    expect(s.sessionsCreated).toBe(1);
    expect(s.sessionKept).toBe(true);
    expect(s.cuts).toBeGreaterThan(0);
    expect(s.resumes).toBeGreaterThan(0);
    expect(s.gaps.length).toBeGreaterThanOrEqual(1);
    expect(s.lostFlagged).toBeGreaterThan(0);
    expect(s.delivered + s.lostFlagged).toBe(s.chattySent);
    expect(s.lostSilently).toBe(0);
    expect(s.duplicates).toBe(0);
    expect(lines.some((l) => l.includes('resume: GET with Last-Event-ID'))).toBe(true);
    expect(lines.some((l) => l.includes('gap flagged'))).toBe(true);

    // Part 3, 2026-07-28. (a) The official v2 client alone: the spec's behaviour, measured.
    if (!s.modern) throw new Error('part 3 did not run: the official v2 SDK is a devDependency');
    const { official, continuity } = s.modern;
    expect(official.cuts).toBeGreaterThan(0);
    expect(official.error).toContain('fetch failed');
    expect(official.result).toBe('');
    expect(official.endedAfterMs).toBeLessThan(1_500); // the cut, not the charge's end
    expect(official.charges).toBe(1); // charged anyway
    // (b) With continuityFetch() and the extension: same-key re-issues, one charge, the real result.
    expect(continuity.cuts).toBeGreaterThan(0);
    expect(continuity.reissues).toBeGreaterThan(0);
    expect(continuity.keyChanges).toBe(0);
    expect(continuity.attempts).toBe(continuity.reissues);
    expect(continuity.outcome).toBe('answered');
    expect(continuity.charges).toBe(1);
    expect(continuity.result).toBe(`charged ${CONTINUITY_KEY}`);
    expect(continuity.error).toBe('');
    expect(continuity.endedAfterMs).toBeGreaterThanOrEqual(1_500); // it waited for the real result
    const reissueLines = lines.filter((l) => /re-issue \d+: new id .*, same key .*, last event id/.test(l));
    expect(reissueLines).toHaveLength(continuity.reissues);
    expect(lines.some((l) => l.includes('callTool failed') && l.includes('fetch failed'))).toBe(true);
    expect(lines.some((l) => l.includes(`result: charged ${CONTINUITY_KEY}`))).toBe(true);
    expect(guaranteesHeld(s)).toBe(true);
  });

  it('the CLI runs the demo, and `npm run verify` (from the repository) the model, exiting 0', {
    timeout: 900_000,
  }, async () => {
    const run = promisify(execFile);
    const demo = await run('npx', ['tsx', 'src/cli/main.ts', 'demo'], { timeout: 300_000 });
    expect(demo.stdout).toContain('All guarantees held.');
    // `npm start` also serves the inspector page, fed by the demo's client and server.
    expect(demo.stdout).toMatch(/^inspector: http:\/\/127\.0\.0\.1:\d+\//m);
    const verify = await run(
      'npx',
      // Small budgets for every exploration (the defaults, 20,000 worlds each, are for `npm run verify`).
      [
        'tsx',
        'properties/verify-cli.ts',
        '--runs',
        '30',
        '--property',
        'no hang',
        '--runs-2026',
        '200',
        '--runs-listen',
        '200',
      ],
      {
        timeout: 300_000,
      },
    );
    expect(verify.stdout).toMatch(/✓ no hang: 30 runs/);
    expect(verify.stdout).toMatch(/2026-07-28 model: 200 worlds in .*, all properties held/);
    expect(verify.stdout).toMatch(/listen model: 200 worlds in .*, all properties held/);
    await expect(
      run('npx', ['tsx', 'properties/verify-cli.ts', '--runs', 'many'], { timeout: 300_000 }),
    ).rejects.toMatchObject({
      stderr: expect.stringContaining('--runs must be a whole number'),
    });
  });
});
