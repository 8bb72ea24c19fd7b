/**
 * The simulated tools: their side effects are what "at most once" counts, their notifications what
 * "no unflagged loss" counts.
 */
export interface SimTool {
  /** `once`: a non-idempotent side effect (a charge), counted per application call. */
  readonly sideEffect: 'once' | 'idempotent' | 'none';
  readonly annotations: { readOnlyHint?: boolean; idempotentHint?: boolean };
  readonly notifications: number;
  readonly stepMs: number;
  readonly durationMs: number;
}

export const TOOLS = {
  /** The design note's payment call. */
  charge: { sideEffect: 'once', annotations: {}, notifications: 0, stepMs: 0, durationMs: 300 },
  /** Outlives a load balancer's idle timeout. */
  slow: { sideEffect: 'once', annotations: {}, notifications: 1, stepMs: 100, durationMs: 4_000 },
  /** Streams numbered notifications, more than the retention bound holds. */
  chatty: {
    sideEffect: 'none',
    annotations: { readOnlyHint: true },
    notifications: 9,
    stepMs: 40,
    durationMs: 400,
  },
  lookup: {
    sideEffect: 'none',
    annotations: { readOnlyHint: true },
    notifications: 0,
    stepMs: 0,
    durationMs: 50,
  },
  upsert: {
    sideEffect: 'idempotent',
    annotations: { idempotentHint: true },
    notifications: 0,
    stepMs: 0,
    durationMs: 200,
  },
} as const satisfies Record<string, SimTool>;

export type ToolName = keyof typeof TOOLS;
export const TOOL_NAMES = Object.keys(TOOLS) as ToolName[];
