/**
 * How hard the listen model looks. CI (`npm test`) uses the defaults, a few seconds on a busy two-core
 * machine; `npm run verify -- --runs-listen <n>` raises them. MCPC_LISTEN_RUNS / MCPC_LISTEN_SEED /
 * MCPC_LISTEN_MUTANT_RUNS / MCPC_LISTEN_MUTANT_SEED override from the environment.
 */
export const LISTEN_RUNS = Number(process.env.MCPC_LISTEN_RUNS ?? 400);
export const LISTEN_SEED =
  process.env.MCPC_LISTEN_SEED === undefined ? undefined : Number(process.env.MCPC_LISTEN_SEED);
/** Random worlds per mutant at most (each stops at its first counterexample). */
export const LISTEN_MUTANT_RUNS = Number(process.env.MCPC_LISTEN_MUTANT_RUNS ?? 400);
export const LISTEN_MUTANT_SEED =
  process.env.MCPC_LISTEN_MUTANT_SEED === undefined ? undefined : Number(process.env.MCPC_LISTEN_MUTANT_SEED);
/** Shrinking stops after this long per mutant; the best schedule so far is kept. */
export const LISTEN_SHRINK_MS = Number(process.env.MCPC_LISTEN_SHRINK_MS ?? 1_500);
