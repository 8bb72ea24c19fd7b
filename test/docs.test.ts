import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { and, fromPromise, not, setup } from 'xstate';
import { machineCatalog } from '../machines/catalog.js';
import { toMermaid } from '../scripts/diagram.js';
import { existingDiagrams, renderAll, renderDoc, repoRoot } from '../scripts/render-diagrams.js';

const connection = () =>
  setup({
    types: { context: {} as { retries: number } },
    guards: { canRetry: () => true, isFatal: () => false },
    delays: { backoff: 100 },
    actors: { openStream: fromPromise(async () => 'stream') },
  }).createMachine({
    id: 'connection',
    context: { retries: 0 },
    initial: 'idle',
    states: {
      idle: {
        description: 'waiting: nothing sent yet',
        on: { CONNECT: 'connecting', PING: { actions: () => {} } },
      },
      connecting: {
        tags: ['busy'],
        invoke: {
          src: 'openStream',
          onDone: 'open',
          onError: [{ target: 'backoff', guard: 'canRetry' }, { target: 'closed' }],
        },
      },
      backoff: {
        after: { backoff: 'connecting', 5000: { target: 'closed', guard: { type: 'isFatal' } } },
      },
      open: {
        initial: 'live',
        states: {
          live: { on: { DRAIN: 'draining' } },
          draining: { always: { target: 'done', guard: ({ context }) => context.retries === 0 } },
          done: { type: 'final' },
        },
        onDone: 'closed',
      },
      closed: { type: 'final' },
    },
  });

const session = setup({ guards: { resumable: () => true, expired: () => false } }).createMachine({
  id: 'session',
  initial: 'active',
  states: {
    active: {
      type: 'parallel',
      states: {
        transport: { initial: 'up', states: { up: { on: { DROP: 'down' } }, down: {} } },
        protocol: { initial: 'ready', states: { ready: {}, paused: {} } },
      },
      on: {
        SUSPEND: {
          target: ['.transport.down', '.protocol.paused'],
          guard: and(['resumable', not('expired')]),
        },
      },
    },
  },
});

/** Lines strictly inside the `state ... as <id> {` / `state <id> {` block. */
function block(diagram: string, id: string): string[] {
  const lines = diagram.split('\n');
  const start = lines.findIndex((l) => new RegExp(`^\\s*state (?:"[^"]*" as )?${id} \\{$`).test(l));
  expect(start, `no block for ${id}`).toBeGreaterThanOrEqual(0);
  const indent = lines[start]?.search(/\S/) ?? 0;
  const end = lines.findIndex((l, i) => i > start && l === `${' '.repeat(indent)}}`);
  return lines.slice(start + 1, end);
}

// Stand-in for Mermaid's parser: every line has a shape its grammar accepts, blocks balance,
// ids are declared once, and every id an edge names is declared somewhere.
function expectWellFormed(diagram: string): void {
  const [header, ...body] = diagram.trimEnd().split('\n');
  expect(header).toBe('stateDiagram-v2');
  const declared: string[] = [];
  const used: string[] = [];
  let depth = 0;
  for (const raw of body) {
    const line = raw.trim();
    const decl = /^state (?:"[^"]*" as )?(\w+)( \{)?$/.exec(line) ?? /^(\w+)()$/.exec(line);
    const edge = /^(\w+|\[\*\]) --> (\w+|\[\*\])(?: : [^:;"]+)?$/.exec(line);
    const note = /^(\w+) : [^:;]+$/.exec(line);
    if (decl?.[1]) {
      declared.push(decl[1]);
      if (decl[2]) depth++;
    } else if (line === '}') {
      depth--;
      expect(depth, 'unbalanced }').toBeGreaterThanOrEqual(0);
    } else if (line === '--') {
      expect(depth, '-- outside a composite state').toBeGreaterThan(0);
    } else if (edge?.[1] && edge[2]) {
      used.push(edge[1], edge[2]);
    } else if (note?.[1]) {
      used.push(note[1]);
    } else {
      throw new Error(`line Mermaid would not parse: ${JSON.stringify(raw)}`);
    }
  }
  expect(depth, 'unclosed {').toBe(0);
  expect(new Set(declared).size, 'duplicate state ids').toBe(declared.length);
  for (const id of used.filter((u) => u !== '[*]')) expect(declared).toContain(id);
  for (const id of declared) expect(id).not.toMatch(/^(default|state$|note$|class$|end$)/i);
}

describe('toMermaid', () => {
  it('draws initial states, nested blocks and final states', () => {
    const d = toMermaid(connection());
    expectWellFormed(d);
    expect(d.split('\n').slice(0, 2)).toEqual(['stateDiagram-v2', '  [*] --> idle']);
    expect(block(d, 'open')).toEqual([
      '    [*] --> open_live',
      '    state "live" as open_live',
      '    state "draining" as open_draining',
      '    state "done" as open_done',
      '    open_done --> [*]',
    ]);
    expect(d).toContain('\n  closed\n  closed --> [*]\n');
  });

  it('labels events, invocations, delays and eventless transitions, with their guards', () => {
    const lines = toMermaid(connection()).split('\n');
    expect(lines).toContain('  idle --> connecting : CONNECT');
    expect(lines).toContain('  connecting --> open : onDone(openStream)');
    expect(lines).toContain('  connecting --> backoff : onError(openStream) [canRetry]');
    expect(lines).toContain('  connecting --> closed : onError(openStream)');
    expect(lines).toContain('  backoff --> connecting : after(backoff)');
    expect(lines).toContain('  backoff --> closed : after(5000ms) [isFatal]');
    expect(lines).toContain('  open_live --> open_draining : DRAIN');
    expect(lines).toContain('  open_draining --> open_done : always [guard]');
    expect(lines).toContain('  open --> closed : onDone');
    expect(
      lines.filter((l) => l.includes('PING')),
      'targetless transitions are not drawn',
    ).toEqual([]);
  });

  it('shows descriptions, invokes and tags under the state name, defusing Mermaid delimiters', () => {
    const lines = toMermaid(connection()).split('\n');
    expect(lines).toContain('  state "idle" as idle');
    expect(lines).toContain('  idle : waiting꞉ nothing sent yet');
    expect(lines).toContain('  connecting : invoke openStream');
    expect(lines).toContain('  connecting : tags busy');
  });

  it('separates parallel regions and fans multi-target transitions out per target', () => {
    const d = toMermaid(session);
    expectWellFormed(d);
    const active = block(d, 'active');
    expect(active.filter((l) => l.trim() === '--')).toEqual(['    --']);
    expect(active.indexOf('    --')).toBeGreaterThan(
      active.indexOf('    state "transport" as active_transport {'),
    );
    expect(active.indexOf('    --')).toBeLessThan(
      active.indexOf('    state "protocol" as active_protocol {'),
    );
    expect(active).not.toContain('    [*] --> active_transport');
    expect(block(d, 'active_protocol')).toContain('      [*] --> active_protocol_ready');
    const guard = '[and(resumable, not(expired))]';
    expect(d).toContain(`  active --> active_transport_down : SUSPEND ${guard}\n`);
    expect(d).toContain(`  active --> active_protocol_paused : SUSPEND ${guard}\n`);
  });

  it('draws the root as a state when it has transitions of its own or is parallel', () => {
    const m = setup({}).createMachine({
      id: 'core',
      type: 'parallel',
      on: { RESET: '.left.a' },
      states: { left: { initial: 'a', states: { a: {}, b: {} } }, right: {} },
    });
    const d = toMermaid(m);
    expectWellFormed(d);
    expect(d.split('\n').slice(1, 3)).toEqual(['  [*] --> core', '  state core {']);
    expect(block(d, 'core')).toContain('    --');
    expect(d).toContain('  core --> left_a : RESET\n');
  });

  it('leaves the root undrawn when its only transitions are targetless', () => {
    const m = setup({}).createMachine({
      id: 'quiet',
      initial: 'a',
      on: { LOG: { actions: () => {} } },
      states: { a: {} },
    });
    expect(toMermaid(m)).toBe('stateDiagram-v2\n  [*] --> a\n  a\n');
  });

  it('makes ids unique and safe for Mermaid whatever the state keys are', () => {
    const m = setup({}).createMachine({
      initial: 'a-b',
      states: {
        'a-b': { on: { GO: 'a_b' } },
        a_b: { on: { GO: 'default' } },
        default: { on: { GO: 'x' } },
        x: { initial: 'start', states: { start: {} } },
      },
    });
    const d = toMermaid(m);
    expectWellFormed(d);
    expect(d).toContain('  state "a-b" as a_b\n');
    expect(d).toContain('  state "a_b" as a_b_2\n');
    expect(d).toContain('  a_b --> a_b_2 : GO\n');
    expect(d).toContain('  a_b_2 --> _default : GO\n');
    // `x_start` is the name Mermaid gives the [*] inside `x`.
    expect(block(d, 'x')).toEqual(['    [*] --> x_start_2', '    state "start" as x_start_2']);
  });

  it('is deterministic', () => {
    expect(toMermaid(connection())).toBe(toMermaid(connection()));
  });
});

describe('docs/machines', () => {
  it('wraps a diagram in a generated, do-not-edit page', () => {
    const page = renderDoc('connection', connection());
    expect(page).toBe(
      [
        '# connection',
        '',
        'Generated by `npm run docs` from the machine definition in `machines/`; do not edit by hand.',
        '',
        '```mermaid',
        toMermaid(connection()).trimEnd(),
        '```',
        '',
      ].join('\n'),
    );
  });

  it('has one page per catalog machine, each a well-formed diagram', () => {
    const files = renderAll();
    expect(Object.keys(files).sort()).toEqual(
      Object.keys(machineCatalog)
        .map((n) => `docs/machines/${n}.md`)
        .sort(),
    );
    for (const machine of Object.values(machineCatalog)) expectWellFormed(toMermaid(machine));
  });

  it('is up to date with the machine definitions', () => {
    for (const [path, expected] of Object.entries(renderAll())) {
      let committed: string | undefined;
      try {
        committed = readFileSync(join(repoRoot, path), 'utf8');
      } catch {
        committed = undefined;
      }
      expect(committed, `${path} is missing: run npm run docs`).toBeDefined();
      expect(committed, `${path} is stale: run npm run docs`).toBe(expected);
    }
  });

  it('has no page for a machine that is not in the catalog', () => {
    const expected = Object.keys(renderAll());
    const extra = existingDiagrams().filter((p) => !expected.includes(p));
    expect(extra, 'stale diagram pages: run npm run docs').toEqual([]);
  });
});
