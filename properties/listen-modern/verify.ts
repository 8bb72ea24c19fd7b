import { explore } from '../explore.js';
import { describeListenVerdict, judgeListen } from './checks.js';
import { ListenCoverageTally } from './coverage.js';
import { listenScenarioArb } from './schedule.js';
import { runListenWorld } from './world.js';

/**
 * The long exploration of the listen model behind `npm run verify -- --runs-listen <n>`: more random worlds
 * than CI, each judged by every listen property, and the coverage table (`explore`). Returns true when every
 * property held and (with at least 1,000 worlds, not replaying) every modelled branch was reached.
 */
export function runVerifyListen(
  options: { readonly runs: number; readonly seed?: number; readonly path?: string },
  log: (line: string) => void = console.log,
): boolean {
  const tally = new ListenCoverageTally();
  return explore(
    {
      name: 'listen model',
      scenarios: listenScenarioArb,
      judge: (s) => {
        const outcome = runListenWorld(s.commands, s.config);
        tally.add(outcome);
        const verdict = judgeListen(outcome);
        return Object.keys(verdict).length > 0 ? describeListenVerdict(verdict) : undefined;
      },
      tally,
    },
    options,
    log,
  );
}
