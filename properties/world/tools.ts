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
  /** Its result's text is this large (default: a few bytes): it reaches the client a chunk at a time. */
  readonly resultBytes?: number;
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
  /**
   * A result of 256 KiB, which takes longer than the stall timeout to arrive (properties/world/wire-size.ts):
   * its stream is alive only by the progress rule (machines/client/progress.ts).
   */
  bulky: {
    sideEffect: 'none',
    annotations: { readOnlyHint: true },
    notifications: 0,
    stepMs: 0,
    durationMs: 100,
    resultBytes: 256 * 1024,
  },
} as const satisfies Record<string, SimTool>;

export type ToolName = keyof typeof TOOLS;
export const TOOL_NAMES = Object.keys(TOOLS) as ToolName[];

/** A tool's result text: its name, padded to `resultBytes` when it has some (one shared string). */
export function resultText(name: ToolName): string {
  const known = texts.get(name);
  if (known !== undefined) return known;
  const tool: SimTool = TOOLS[name];
  const text = tool.resultBytes === undefined ? `${name} done` : `${name} done`.padEnd(tool.resultBytes, '.');
  texts.set(name, text);
  return text;
}
const texts = new Map<ToolName, string>();
