import { scenarioArbModern } from './arbitraries-modern.js';
import { describeVerdictModern, judgeModernWorld } from './checks-modern.js';
import { DIRECTED_MODERN } from './corpus-modern.js';
import { ModernCoverageTally } from './coverage-modern.js';
import { explore } from './explore.js';
import { type CommandModern, type ModernWorldConfig, runScheduleModern } from './world-modern/world.js';

type Scenario = { readonly config: ModernWorldConfig; readonly commands: readonly CommandModern[] };

/**
 * The long exploration of the 2026-07-28 model behind `npm run verify`: more random worlds than CI, each
 * judged by every property, the directed corpus and the coverage table (`explore`). Returns true when
 * every property held and every modelled branch was reached.
 */
export function runVerifyModern(
  options: { readonly runs: number; readonly seed?: number; readonly path?: string },
  log: (line: string) => void = console.log,
): boolean {
  const tally = new ModernCoverageTally();
  const judge = (scenario: Scenario) => {
    const observer = tally.observer();
    const outcome = runScheduleModern(scenario.commands, scenario.config, undefined, observer);
    observer.done();
    const verdict = judgeModernWorld(outcome);
    return Object.keys(verdict).length > 0 ? describeVerdictModern(verdict) : undefined;
  };
  return explore<Scenario>(
    { name: '2026-07-28 model', scenarios: scenarioArbModern, judge, tally, directed: DIRECTED_MODERN },
    options,
    log,
  );
}
