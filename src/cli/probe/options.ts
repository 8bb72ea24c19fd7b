/** What `mcp-continuity probe` was asked to do (from the command line, or a test). */
export interface ProbeOptions {
  readonly url: string;
  /** Sent on every request (authorization, a tenant...). */
  readonly headers: Readonly<Record<string, string>>;
  /** Bound of every single request, in ms. */
  readonly timeoutMs: number;
  /** Bound of every answer's body, in bytes. */
  readonly maxBytes: number;
  /** How long the probe keeps a stream open waiting for its first event, in ms. */
  readonly streamWaitMs: number;
  /** A tool the user named, with its arguments; `readOnly` only when the user said so. */
  readonly tool?: {
    readonly name: string;
    readonly args: Record<string, unknown>;
    readonly readOnly: boolean;
  };
  /** How long to wait before trying an evicted cursor (default: the advertised retention, plus a margin). */
  readonly evictWaitMs?: number;
  /** The longest the probe waits for anything (an eviction), in ms. */
  readonly maxWaitMs: number;
  /** When a cut is made in a named call, in ms after sending it. */
  readonly cutAfterMs: number;
  /** How many sessions to open for the session-id check (at least 2). */
  readonly sessions: number;
}
