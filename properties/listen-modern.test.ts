import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { freshSeed } from './judge.js';
import { LISTEN_RUNS, LISTEN_SEED } from './listen-modern/budget.js';
import { describeListenVerdict, judgeListen, LISTEN_CHECKS } from './listen-modern/checks.js';
import { DIRECTED_LISTEN } from './listen-modern/corpus.js';
import { ListenCoverageTally } from './listen-modern/coverage.js';
import { BIG_LIMITS, type ListenScenario, listenScenarioArb } from './listen-modern/schedule.js';
import { runListenWorld } from './listen-modern/world.js';

/**
 * The listen part of the continuity extension (issue 17 items 2 and 4) over random schedules: the real
 * `listenMachine` against a server making the real listen-log decisions, judged by an oracle of world facts.
 * The seed is printed first; on failure fast-check prints the shrunk schedule (MCPC_LISTEN_SEED replays it).
 */
const seed = LISTEN_SEED ?? freshSeed();
const tally = new ListenCoverageTally();

function judged(s: ListenScenario) {
  const o = runListenWorld(s.commands, s.config);
  tally.add(o);
  return { o, verdict: judgeListen(o) };
}

describe('MCP 2026-07-28 listen streams with the extension: exact gaps under random cuts, restarts and eviction', () => {
  // A count of worlds, not a time budget: a busy machine only makes it slower.
  it(`${LISTEN_CHECKS.join(', ')}: every check on each of ${LISTEN_RUNS} worlds`, {
    timeout: 600_000,
  }, () => {
    console.info(`listen model: ${LISTEN_RUNS} worlds, seed ${seed} (replay: MCPC_LISTEN_SEED=${seed})`);
    const started = Date.now();
    fc.assert(
      fc.property(listenScenarioArb, (s) => {
        const { verdict } = judged(s);
        if (Object.keys(verdict).length > 0) throw new Error(describeListenVerdict(verdict));
      }),
      { numRuns: LISTEN_RUNS, seed },
    );
    console.info(`listen model: ${LISTEN_RUNS} worlds in ${Date.now() - started} ms`);
  });

  it('with the listen part served, big limits and no restart every gap is exact, and some are', () => {
    let gaps = 0;
    fc.assert(
      fc.property(listenScenarioArb, (s) => {
        const commands = s.commands.filter((c) => c.kind !== 'restart');
        const o = runListenWorld(commands, { ...s.config, limits: BIG_LIMITS, extension: true });
        expect(judgeListen(o)).toEqual({});
        expect(o.gaps.filter((g) => g.missed.kind !== 'exact')).toEqual([]);
        gaps += o.gaps.length;
      }),
      { numRuns: Math.ceil(LISTEN_RUNS / 4), seed },
    );
    expect(gaps).toBeGreaterThan(0);
  });

  it.each(DIRECTED_LISTEN.map((d) => [d.name, d] as const))('directed: %s', (_, d) => {
    const { o, verdict } = judged(d);
    expect(verdict, describeListenVerdict(verdict)).toEqual({});
    expect(o.gaps.map((g) => ({ missed: g.missed, relist: g.relist }))).toEqual(d.gaps);
  });

  it('directed worlds reach their timing: a change inside the subscription gap, an ack lost in flight', () => {
    const [window, lost] = ['waits to be subscribed', 'ack was lost'].map((part) => {
      const d = DIRECTED_LISTEN.find((x) => x.name.includes(part));
      return d && runListenWorld(d.commands, d.config);
    });
    const reopen = window?.streams.find((s) => s.n === 2);
    expect([reopen?.arrivedPoint, reopen?.subscribePoint]).toEqual([0, 1]);
    expect(lost?.streams.map((s) => s.ackLost)).toEqual([false, true, false]);
  });

  it('every listed branch is reached by some world', () => {
    // The first test's worlds, and more of the same seed if the budget was set very low.
    for (const s of fc.sample(listenScenarioArb, { numRuns: Math.max(0, 300 - tally.worlds), seed }))
      judged(s);
    console.info(tally.table());
    expect(tally.unreached()).toEqual([]);
  });
});
