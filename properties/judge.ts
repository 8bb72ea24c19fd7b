import { CHECKS, type CheckName } from './checks.js';
import type { WorldOutcome } from './world/world.js';

/**
 * One simulated world, judged by every check: simulating is the cost, judging is almost free, so no
 * property gets a world of its own. A verdict lists only the checks that failed.
 */
export type Verdict = Partial<Record<CheckName, string[]>>;

export const CHECK_NAMES = Object.keys(CHECKS) as CheckName[];

export function judge(outcome: WorldOutcome, names: readonly CheckName[] = CHECK_NAMES): Verdict {
  const verdict: Verdict = {};
  for (const name of names) {
    const violations = CHECKS[name](outcome);
    if (violations.length > 0) verdict[name] = violations;
  }
  return verdict;
}

export const failedChecks = (verdict: Verdict): CheckName[] => Object.keys(verdict) as CheckName[];

/** What a failing world did wrong, a few lines per check. */
export function describeVerdict(verdict: Verdict, perCheck = 5): string {
  return failedChecks(verdict)
    .map((name) => `${name}:\n  ${(verdict[name] ?? []).slice(0, perCheck).join('\n  ')}`)
    .join('\n');
}

/** A seed to print before a random run, so any run (not only a failing one) can be replayed. */
export function freshSeed(): number {
  return (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0;
}
