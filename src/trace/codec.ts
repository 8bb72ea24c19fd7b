/**
 * How a trace writes live machine values as JSON and reads them back: a `Set` or `Map` in a machine's
 * context (the ids a call already delivered, a keyed request's streams) comes back as one, so a replay
 * starts from exactly the snapshot that was recorded. Redaction happens here too, on the way out: a
 * trace is something an operator attaches to an incident ticket.
 */

/** Keys whose values never reach a trace file unless redaction is off: credentials and payloads. */
const SECRET_KEYS = new Set(['authorization', 'cookie', 'set-cookie', 'proxy-authorization', 'x-api-key']);
/**
 * Payloads: tool arguments, results and their content, and an SSE event's raw `data` text (its parsed
 * message is kept, redacted the same way). Kept as `[redacted]`. What the machines decide on stays: ids,
 * methods, statuses, error codes and their `data` (a gap's count, an outcome's reason), event ids.
 */
const BODY_KEYS = new Set(['arguments', 'result', 'contents', 'content', 'structuredcontent']);

export const REDACTED = '[redacted]';

export interface EncodeOptions {
  /** Credentials and message payloads replaced by `[redacted]`. Default true. */
  readonly redact?: boolean;
}

/** A JSON-safe copy of `value`: `Set`/`Map` tagged, functions and actor refs named, cycles cut. */
export function encode(value: unknown, options: EncodeOptions = {}): unknown {
  const redact = options.redact !== false;
  const seen = new WeakSet<object>();
  const walk = (v: unknown, key: string | undefined): unknown => {
    if (key !== undefined && redact) {
      const lower = key.toLowerCase();
      if (SECRET_KEYS.has(lower)) return REDACTED;
      // A payload key keeps its presence (a response is still a response), not its content.
      if (BODY_KEYS.has(lower) && v !== undefined && v !== null) return REDACTED;
      if (lower === 'data' && typeof v === 'string' && v !== '') return REDACTED;
    }
    if (v === null || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') return v;
    if (v === undefined) return undefined;
    if (typeof v === 'bigint') return v.toString();
    if (typeof v === 'function') return { $fn: v.name || 'anonymous' };
    if (typeof v !== 'object') return undefined;
    if (isActorRef(v)) return { $actor: v.id ?? v.sessionId };
    if (seen.has(v)) return '[cycle]';
    seen.add(v);
    try {
      if (v instanceof Set) return { $set: [...v].map((x) => walk(x, undefined)) };
      if (v instanceof Map) return { $map: [...v].map(([k, x]) => [walk(k, undefined), walk(x, undefined)]) };
      if (v instanceof Date) return v.toISOString();
      if (v instanceof Error) return { name: v.name, message: v.message };
      if (Array.isArray(v)) return v.map((x) => walk(x, undefined));
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        const item = walk(x, k);
        if (item !== undefined) out[k] = item;
      }
      return out;
    } finally {
      seen.delete(v);
    }
  };
  return walk(value, undefined);
}

/** A function the trace names but the reader does not have (an application's own policy). */
export class MissingFunctionError extends Error {
  constructor(readonly functionName: string) {
    super(`the trace names the function ${functionName}, which this build does not have`);
  }
}

/**
 * The value `encode` wrote, with its `Set`s and `Map`s back, and each named function (a machine's
 * default policy) taken from `functions`; one it does not hold throws `MissingFunctionError` when called.
 */
export function revive(value: unknown, functions: ReadonlyMap<string, unknown> = new Map()): unknown {
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    const o = v as Record<string, unknown>;
    const only = Object.keys(o).length === 1;
    if (only && Array.isArray(o.$set)) return new Set(o.$set.map(walk));
    if (only && Array.isArray(o.$map))
      return new Map((o.$map as [unknown, unknown][]).map(([k, x]) => [walk(k), walk(x)]));
    if (only && typeof o.$fn === 'string') {
      const name = o.$fn;
      return (
        functions.get(name) ??
        (() => {
          throw new MissingFunctionError(name);
        })
      );
    }
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, walk(x)]));
  };
  return walk(value);
}

function isActorRef(v: object): v is { sessionId: string; id?: string } {
  return (
    typeof (v as { sessionId?: unknown }).sessionId === 'string' &&
    typeof (v as { send?: unknown }).send === 'function'
  );
}
