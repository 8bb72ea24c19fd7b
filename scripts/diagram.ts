import type { AnyStateMachine, AnyStateNode } from 'xstate';

/**
 * Renders a machine as Mermaid `stateDiagram-v2` text, read from the machine object itself so the
 * picture cannot drift from the code. Output is deterministic (definition order throughout) so
 * the committed diagrams only change when the machine does.
 */
export function toMermaid(machine: AnyStateMachine): string {
  const root = machine.root;
  // A root with its own transitions or invokes has nothing to hang them on unless it is drawn as a
  // state, and Mermaid only accepts the `--` region separator inside a composite state.
  const drawRoot = root.type !== 'compound' || extras(root).length > 0 || outgoing(root).length > 0;
  const ids = assignIds(root, drawRoot);
  const out = ['stateDiagram-v2'];
  if (drawRoot) {
    out.push(`  [*] --> ${ids(root)}`);
    renderState(root, 1, ids, out);
  } else {
    renderChildren(root, 1, ids, out);
  }
  // Transitions go last and at the top level: Mermaid places a state in the first block that
  // mentions it, so an edge written inside one block could pull its target into that block.
  renderEdges(root, ids, out);
  return `${out.join('\n')}\n`;
}

type Ids = (node: AnyStateNode) => string;

// Mermaid's lexer claims these before it sees an id (`default` even as a prefix).
const RESERVED = /^(?:default|(?:state|note|class|classdef|scale|direction|hide|end|statediagram)$)/i;

function assignIds(root: AnyStateNode, drawRoot: boolean): Ids {
  const ids = new Map<AnyStateNode, string>();
  // Mermaid names each block's [*] pseudo-states `<block>_start` / `<block>_end`; a state called
  // `start` or `end` must not land on those.
  const taken = new Set(['root_start', 'root_end']);
  const claim = (node: AnyStateNode, raw: string) => {
    let base = raw.replace(/\W/g, '_');
    if (RESERVED.test(base)) base = `_${base}`;
    let id = base;
    for (let n = 2; taken.has(id); n++) id = `${base}_${n}`;
    taken.add(id);
    taken.add(`${id}_start`);
    taken.add(`${id}_end`);
    ids.set(node, id);
  };
  const visit = (node: AnyStateNode) => {
    for (const child of children(node)) {
      claim(child, child.path.join('_'));
      visit(child);
    }
  };
  if (drawRoot) claim(root, root.key || 'machine');
  visit(root);
  return (node) => {
    const id = ids.get(node);
    if (id === undefined) throw new Error(`State node #${node.id} is not part of the drawn machine`);
    return id;
  };
}

function children(node: AnyStateNode): AnyStateNode[] {
  return Object.values(node.states);
}

function renderState(node: AnyStateNode, depth: number, ids: Ids, out: string[]): void {
  const pad = '  '.repeat(depth);
  const id = ids(node);
  const label = node.type === 'history' ? (node.history === 'deep' ? 'H*' : 'H') : node.key;
  const notes = extras(node);
  if (node.type === 'compound' || node.type === 'parallel') {
    // Mermaid rejects description lines on composite states, so their extras ride in the title.
    const title = clean([label, ...notes].join(' · '));
    out.push(`${pad}state ${title === id ? id : `"${title}" as ${id}`} {`);
    renderChildren(node, depth + 1, ids, out);
    out.push(`${pad}}`);
  } else {
    // A bare `id : text` would replace the state's name with the text, so declare the name first.
    out.push(pad + (label === id && notes.length === 0 ? id : `state "${clean(label)}" as ${id}`));
    for (const note of notes) out.push(`${pad}${id} : ${clean(note)}`);
  }
  if (node.type === 'final') out.push(`${pad}${id} --> [*]`);
}

function renderChildren(node: AnyStateNode, depth: number, ids: Ids, out: string[]): void {
  const pad = '  '.repeat(depth);
  if (node.type === 'parallel') {
    children(node).forEach((region, i) => {
      if (i > 0) out.push(`${pad}--`);
      renderState(region, depth, ids, out);
    });
    return;
  }
  const initial = node.initial.target[0];
  if (initial) out.push(`${pad}[*] --> ${ids(initial)}`);
  for (const child of children(node)) renderState(child, depth, ids, out);
}

function renderEdges(node: AnyStateNode, ids: Ids, out: string[]): void {
  const actors = actorNames(node);
  for (const t of outgoing(node)) {
    const label = eventLabel(t, actors) + (t.guard ? ` [${guardName(t.guard)}]` : '');
    for (const target of t.target ?? []) out.push(`  ${ids(node)} --> ${ids(target)} : ${clean(label)}`);
  }
  for (const child of children(node)) renderEdges(child, ids, out);
}

type Transition = AnyStateNode['transitions'] extends Map<string, (infer T)[]> ? T : never;

// Targetless transitions only run actions; they do not move the machine, so they are not drawn.
function outgoing(node: AnyStateNode): Transition[] {
  return [...[...node.transitions.values()].flat(), ...(node.always ?? [])].filter((t) => t.target?.length);
}

function eventLabel(t: Transition, actors: Map<string, string>): string {
  if ('delay' in t) return `after(${typeof t.delay === 'number' ? `${t.delay}ms` : String(t.delay)})`;
  const type = t.eventType;
  if (type === '') return 'always';
  if (type.startsWith('xstate.done.state.')) return 'onDone';
  const invoked = /^xstate\.(done\.actor|error\.actor|snapshot)\.(.+)$/.exec(type);
  if (invoked?.[1] && invoked[2]) {
    const hook = { 'done.actor': 'onDone', 'error.actor': 'onError', snapshot: 'onSnapshot' }[invoked[1]];
    return `${hook}(${actors.get(invoked[2]) ?? invoked[2]})`;
  }
  return type;
}

function guardName(guard: unknown): string {
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') {
    // Higher-order guards (`and`, `or`, `not`) keep their operands on the function.
    const inner: unknown = (guard as { guards?: unknown }).guards;
    const name = guard.name || 'guard';
    return Array.isArray(inner) ? `${name}(${inner.map(guardName).join(', ')})` : name;
  }
  if (typeof guard === 'object' && guard !== null && 'type' in guard) return String(guard.type);
  return 'guard';
}

// Invoke events are keyed by actor id, which xstate generates when none is given; the `src` name
// from `setup({ actors })` is what a reader recognises.
function actorNames(node: AnyStateNode): Map<string, string> {
  return new Map(
    node.invoke.map((inv, i): [string, string] => {
      if (typeof inv.src === 'string' && !inv.src.startsWith('xstate.invoke.')) return [inv.id, inv.src];
      return [inv.id, inv.id === `${i}.${node.id}` ? 'inline' : inv.id];
    }),
  );
}

function extras(node: AnyStateNode): string[] {
  const names = actorNames(node);
  return [
    ...(node.description ? [node.description] : []),
    ...node.invoke.map((inv) => `invoke ${names.get(inv.id)}`),
    ...(node.tags.length > 0 ? [`tags ${node.tags.join(', ')}`] : []),
  ];
}

// Mermaid ends a label at `:` or `;` and a quoted name at `"`; swap in look-alikes rather than lose text.
function clean(text: string): string {
  return text.replace(/\s+/g, ' ').trim().replace(/:/g, '꞉').replace(/;/g, ',').replace(/"/g, "'");
}
