/**
 * The probe's command-line values read into what it may do. Pure: a bad value is an error message, never
 * a half-configured probe (a probe that guesses could call a tool the user did not mean).
 */

/** The values `mcp-continuity probe` parsed (src/cli/program.ts), as strings and numbers. */
export interface ProbeArgs {
  readonly url: string;
  readonly header?: readonly string[];
  readonly tool?: string;
  readonly args: string;
  readonly readOnly: boolean;
  readonly timeout: number;
  readonly maxBytes: number;
  readonly streamWait: number;
  readonly cutAfter: number;
  readonly evictWait?: number;
  readonly maxWait: number;
}

/** What the probe was asked to do: what `readProbeArgs` makes of the command line (or what a test gives). */
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

/** Sessions opened for the session-id check: enough to see a counter or a shared prefix. */
export const PROBE_SESSIONS = 3;

/** The headers only the probe sets: a `--header` naming one would break the checks. */
const PROBE_HEADERS = new Set([
  'accept',
  'content-type',
  'mcp-session-id',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
  'last-event-id',
  'origin',
]);

export function readProbeArgs(a: ProbeArgs): ProbeOptions | { readonly error: string } {
  let url: URL;
  try {
    url = new URL(a.url);
  } catch {
    return { error: `'${a.url}' is not a URL` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { error: `'${a.url}' is not an http:// or https:// URL` };
  const headers: Record<string, string> = {};
  for (const h of a.header ?? []) {
    const at = h.indexOf(':');
    const name = at > 0 ? h.slice(0, at).trim().toLowerCase() : '';
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) return { error: `--header '${h}' is not 'name: value'` };
    if (PROBE_HEADERS.has(name)) return { error: `--header ${name}: the probe sets that header itself` };
    headers[name] = h.slice(at + 1).trim();
  }
  const bounds = {
    url: url.href,
    headers,
    timeoutMs: a.timeout,
    maxBytes: a.maxBytes,
    streamWaitMs: a.streamWait,
    cutAfterMs: a.cutAfter,
    ...(a.evictWait === undefined ? {} : { evictWaitMs: a.evictWait }),
    maxWaitMs: a.maxWait,
    sessions: PROBE_SESSIONS,
  };
  if (a.tool === undefined) {
    if (a.readOnly) return { error: '--read-only says a tool is read-only, but no --tool is named' };
    return bounds;
  }
  let args: unknown;
  try {
    args = JSON.parse(a.args);
  } catch {
    return { error: `--args is not JSON: ${a.args}` };
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args))
    return { error: '--args must be a JSON object' };
  return { ...bounds, tool: { name: a.tool, args: args as Record<string, unknown>, readOnly: a.readOnly } };
}
