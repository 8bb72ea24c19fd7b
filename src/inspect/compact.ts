/**
 * Turns live values (machine context, events, definitions) into small plain JSON. A client's context holds
 * actor refs (which reach the whole actor system), a stream keeps its last 512 event ids, a tool result can
 * be megabytes: none of that belongs on an inspection wire, and the page only needs what a person can read.
 */
export interface CompactLimits {
  readonly depth: number;
  readonly arrayItems: number;
  readonly objectKeys: number;
  readonly stringChars: number;
}

/** For snapshots and events: enough to read, small enough to send hundreds a second. */
export const VALUE_LIMITS: CompactLimits = { depth: 8, arrayItems: 30, objectKeys: 80, stringChars: 400 };
/** For machine definitions: sent once per actor, and every state must survive to be drawn. */
export const DEFINITION_LIMITS: CompactLimits = {
  depth: 40,
  arrayItems: 500,
  objectKeys: 500,
  stringChars: 2_000,
};

const isActorRef = (v: object): v is { sessionId: string; id?: string } =>
  typeof (v as { sessionId?: unknown }).sessionId === 'string' &&
  typeof (v as { send?: unknown }).send === 'function';

export function compact(value: unknown, limits: CompactLimits = VALUE_LIMITS): unknown {
  const seen = new WeakSet<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (v === null || typeof v === 'boolean' || typeof v === 'number') return v;
    if (typeof v === 'string')
      return v.length > limits.stringChars ? `${v.slice(0, limits.stringChars)}…` : v;
    if (typeof v === 'bigint') return v.toString();
    // What @statelyai/inspect does with functions (guards, actions, delays in a definition): keep the name.
    if (typeof v === 'function') return { type: v.name || 'anonymous' };
    if (typeof v !== 'object') return undefined;
    if (isActorRef(v)) return { $actor: v.id ?? v.sessionId, sessionId: v.sessionId };
    if (seen.has(v)) return '[cycle]';
    if (depth >= limits.depth) return '…';
    seen.add(v);
    try {
      if (v instanceof Date) return v.toISOString();
      if (v instanceof Error) return { name: v.name, message: v.message };
      if (v instanceof Map) return walk(Object.fromEntries(v), depth);
      if (v instanceof Set) return walk([...v], depth);
      if (Array.isArray(v)) return compactArray(v, (x) => walk(x, depth + 1), limits.arrayItems);
      const out: Record<string, unknown> = {};
      const keys = Object.keys(v);
      for (const key of keys.slice(0, limits.objectKeys)) {
        const item = walk((v as Record<string, unknown>)[key], depth + 1);
        if (item !== undefined) out[key] = item;
      }
      if (keys.length > limits.objectKeys) out['…'] = `${keys.length - limits.objectKeys} more keys`;
      return out;
    } finally {
      seen.delete(v);
    }
  };
  return walk(value, 0);
}

/** A long array keeps its head and, mostly, its tail: the newest entries are the interesting ones. */
function compactArray(items: unknown[], each: (v: unknown) => unknown, max: number): unknown[] {
  if (items.length <= max) return items.map(each);
  const head = Math.floor(max / 4);
  const tail = max - head;
  return [
    ...items.slice(0, head).map(each),
    `… ${items.length - max} more`,
    ...items.slice(items.length - tail).map(each),
  ];
}
