import type { ChartNode } from './wire.js';

/**
 * Reads a machine config (`machine.config`, which is what @statelyai/inspect sends as `definition`) into
 * the tree the page draws. The config is the machine as written, so the chart cannot drift from the code;
 * functions in it arrive as `{ type: name }`. Targetless transitions only run actions and are left out, as
 * in the generated diagrams (scripts/diagram.ts).
 */
type Config = Record<string, unknown>;

const isObject = (v: unknown): v is Config => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

export function chartOf(config: unknown): ChartNode {
  return node(isObject(config) ? config : {}, '', '');
}

function node(config: Config, key: string, path: string): ChartNode {
  const states = isObject(config.states) ? config.states : {};
  const children = Object.entries(states).map(([k, child]) =>
    node(isObject(child) ? child : {}, k, path ? `${path}.${k}` : k),
  );
  const declared = typeof config.type === 'string' ? config.type : undefined;
  const type: ChartNode['type'] =
    declared === 'parallel' || declared === 'final' || declared === 'history'
      ? declared
      : children.length > 0
        ? 'compound'
        : 'atomic';
  const initial = isObject(config.initial) ? config.initial.target : config.initial;
  return {
    key: key || (typeof config.id === 'string' ? config.id : 'machine'),
    path,
    type,
    ...(typeof initial === 'string' ? { initial } : {}),
    states: children,
    transitions: transitionsOf(config),
    invokes: list(config.invoke).map((inv) =>
      isObject(inv) ? (nameOf(inv.src) ?? String(inv.id ?? 'actor')) : 'actor',
    ),
    tags: list(config.tags).filter((t): t is string => typeof t === 'string'),
    ...(typeof config.description === 'string' ? { description: config.description } : {}),
  };
}

function transitionsOf(config: Config): ChartNode['transitions'] {
  const out: { event: string; target: string; guard?: string }[] = [];
  const add = (event: string, spec: unknown) => {
    for (const t of list(spec)) {
      const target = typeof t === 'string' ? t : isObject(t) ? targetOf(t.target) : undefined;
      if (!target) continue;
      const guard = isObject(t) ? nameOf(t.guard) : undefined;
      out.push({ event, target, ...(guard ? { guard } : {}) });
    }
  };
  if (isObject(config.on)) for (const [event, spec] of Object.entries(config.on)) add(event, spec);
  add('always', config.always);
  if (isObject(config.after))
    for (const [delay, spec] of Object.entries(config.after)) add(`after(${delay})`, spec);
  for (const inv of list(config.invoke)) {
    if (!isObject(inv)) continue;
    const src = nameOf(inv.src) ?? 'actor';
    add(`onDone(${src})`, inv.onDone);
    add(`onError(${src})`, inv.onError);
  }
  if (config.onDone !== undefined) add('onDone', config.onDone);
  return out;
}

function targetOf(target: unknown): string | undefined {
  const targets = list(target).filter((t): t is string => typeof t === 'string');
  return targets.length > 0 ? targets.join(', ') : undefined;
}

function nameOf(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (isObject(v) && typeof v.type === 'string') return v.type;
  return undefined;
}

/** The active state paths of a snapshot value: `{ connecting: 'streaming' }` → connecting, connecting.streaming. */
export function activePaths(value: unknown, prefix = ''): string[] {
  if (typeof value === 'string') return [prefix ? `${prefix}.${value}` : value];
  if (!isObject(value)) return [];
  return Object.entries(value).flatMap(([k, v]) => {
    const here = prefix ? `${prefix}.${k}` : k;
    return [here, ...activePaths(v, here)];
  });
}

/** The leaf states, dotted, joined with `,`: what the page shows as an actor's state. */
export function stateText(value: unknown): string {
  const paths = activePaths(value);
  return paths.filter((p) => !paths.some((q) => q.startsWith(`${p}.`))).join(',');
}
