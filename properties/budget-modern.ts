/**
 * How hard the 2026-07-28 suite looks. CI (`npm test`) uses the defaults, sized for about 40 s on a busy
 * two-core machine; `npm run verify` raises them. MCPC_MODERN_RUNS / MCPC_MODERN_SEED / MCPC_MODERN_MUTANT_RUNS
 * / MCPC_MODERN_MUTANT_SEED override from the environment.
 */
export const RUNS_MODERN = Number(process.env.MCPC_MODERN_RUNS ?? 600);
export const SEED_MODERN =
  process.env.MCPC_MODERN_SEED === undefined ? undefined : Number(process.env.MCPC_MODERN_SEED);
/** Random worlds per mutant at most (each stops at its first counterexample). */
export const MUTANT_RUNS_MODERN = Number(process.env.MCPC_MODERN_MUTANT_RUNS ?? 300);
export const MUTANT_SEED_MODERN =
  process.env.MCPC_MODERN_MUTANT_SEED === undefined ? undefined : Number(process.env.MCPC_MODERN_MUTANT_SEED);
/** Shrinking stops after this long per mutant; the best schedule so far is kept. */
export const SHRINK_MS_MODERN = Number(process.env.MCPC_MODERN_SHRINK_MS ?? 3_000);
