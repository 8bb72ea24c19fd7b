/**
 * How hard the suite looks. CI (`npm test`) uses the defaults; `npm run verify` raises them.
 * MCPC_RUNS / MCPC_SEED / MCPC_DEPTH override from the environment.
 */
/** Simulated worlds per run of the suite; every world is judged by every check. */
export const RUNS = Number(process.env.MCPC_RUNS ?? 1_000);
export const SEED = process.env.MCPC_SEED === undefined ? undefined : Number(process.env.MCPC_SEED);
export const EXHAUSTIVE_DEPTH = Number(process.env.MCPC_DEPTH ?? 3);
