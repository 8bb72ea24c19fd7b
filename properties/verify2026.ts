import { scenarioArb2026 } from './arbitraries2026.js';
import { describeVerdict2026, judge2026 } from './checks2026.js';
import { DIRECTED_2026 } from './corpus2026.js';
import { CoverageTally2026 } from './coverage2026.js';
import { explore } from './explore.js';
import { type Command2026, runSchedule2026, type WorldConfig2026 } from './world2026/world.js';

type Scenario = { readonly config: WorldConfig2026; readonly commands: readonly Command2026[] };

/**
 * The long exploration of the 2026-07-28 model behind `npm run verify`: more random worlds than CI, each
 * judged by every property, the directed corpus and the coverage table (`explore`). Returns true when
 * every property held and every modelled branch was reached.
 */
export function runVerify2026(
  options: { readonly runs: number; readonly seed?: number; readonly path?: string },
  log: (line: string) => void = console.log,
): boolean {
  const tally = new CoverageTally2026();
  const judge = (scenario: Scenario) => {
    const observer = tally.observer();
    const outcome = runSchedule2026(scenario.commands, scenario.config, undefined, observer);
    observer.done();
    const verdict = judge2026(outcome);
    return Object.keys(verdict).length > 0 ? describeVerdict2026(verdict) : undefined;
  };
  return explore<Scenario>(
    { name: '2026-07-28 model', scenarios: scenarioArb2026, judge, tally, directed: DIRECTED_2026 },
    options,
    log,
  );
}
