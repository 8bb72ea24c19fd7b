/**
 * The simulated tools of the 2026-07-28 world. Their side effects are what "at most once" counts, their
 * numbered progress what "no unflagged loss" counts, their annotations what the client may trust.
 */
export interface ModernSimTool {
  /** `once`: a non-idempotent side effect (a charge), counted per application call. */
  readonly sideEffect: 'once' | 'idempotent' | 'none';
  readonly annotations: { readonly readOnlyHint?: boolean; readonly idempotentHint?: boolean };
  /** Numbered `notifications/progress` the body streams, one every `stepMs`. */
  readonly progress: number;
  readonly stepMs: number;
  readonly durationMs: number;
}

export const TOOLS_MODERN = {
  /** The payment call: silent, longer than a balancer's idle cut. */
  charge: { sideEffect: 'once', annotations: {}, progress: 0, stepMs: 0, durationMs: 1_500 },
  /** A charge that reports progress: a cut after a progress notification (the hang). */
  meteredCharge: { sideEffect: 'once', annotations: {}, progress: 6, stepMs: 150, durationMs: 1_000 },
  /** Read-only, streams more progress than a small per-key log retains. */
  scan: { sideEffect: 'none', annotations: { readOnlyHint: true }, progress: 8, stepMs: 60, durationMs: 600 },
  lookup: { sideEffect: 'none', annotations: { readOnlyHint: true }, progress: 0, stepMs: 0, durationMs: 40 },
  /**
   * Read-only, so called without a key, and silent for longer than any balancer's idle timeout of the
   * world: only keep-alives on its stream get it through (the bug fixed in 7c48461: it was cut on every
   * attempt and never finished).
   */
  report: {
    sideEffect: 'none',
    annotations: { readOnlyHint: true },
    progress: 0,
    stepMs: 0,
    durationMs: 3_000,
  },
  upsert: {
    sideEffect: 'idempotent',
    annotations: { idempotentHint: true },
    progress: 0,
    stepMs: 0,
    durationMs: 200,
  },
} as const satisfies Record<string, ModernSimTool>;

export type ModernTool = keyof typeof TOOLS_MODERN;
export const TOOL_NAMES_MODERN = Object.keys(TOOLS_MODERN) as ModernTool[];
