import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { type CommandSpec, parseCommandLine, parseOptions } from '../../src/cli/args.js';
import { PROGRAM } from '../../src/cli/program.js';
import { MODERN_PART_INSTALL, MODERN_PART_PEERS } from '../../src/demo/load-part-modern.js';

/** The command line's grammar on `node:util` parseArgs: every option the commander version had, and errors. */
describe('mcp-continuity arguments', () => {
  it('gives every demo option its default, and reads the ones given, in both spellings', () => {
    expect(parseCommandLine(PROGRAM, ['demo'])).toEqual({
      kind: 'run',
      command: 'demo',
      values: {
        'idle-timeout': 250,
        'charge-ms': 1_500,
        count: 300,
        buffer: 100,
        'no-inspect': false,
        'inspect-port': 0,
        'wait-for-page': false,
        slow: false,
        hold: false,
      },
    });
    const given = parseCommandLine(PROGRAM, [
      'demo',
      '--idle-timeout',
      '100',
      '--charge-ms=400',
      '--count',
      '20',
      '--buffer',
      '5',
      '--no-inspect',
      '--inspect-port',
      '4478',
      '--wait-for-page',
      '--slow',
      '--hold',
    ]);
    expect(given).toMatchObject({
      kind: 'run',
      values: {
        'idle-timeout': 100,
        'charge-ms': 400,
        count: 20,
        buffer: 5,
        'no-inspect': true,
        'inspect-port': 4478,
        'wait-for-page': true,
        slow: true,
        hold: true,
      },
    });
  });

  it('reads the inspect options', () => {
    expect(parseCommandLine(PROGRAM, ['inspect'])).toEqual({
      kind: 'run',
      command: 'inspect',
      values: { port: 4477, host: '127.0.0.1' },
    });
    expect(parseCommandLine(PROGRAM, ['inspect', '--port', '0', '--host', '0.0.0.0'])).toMatchObject({
      values: { port: 0, host: '0.0.0.0' },
    });
  });

  it('answers --help, -h and help [command] with the usage', () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const help = parseCommandLine(PROGRAM, argv);
      expect(help.kind).toBe('help');
      expect(help.kind === 'help' && help.text).toMatch(
        /Usage: mcp-continuity <command>[\s\S]*demo[\s\S]*inspect/,
      );
    }
    for (const argv of [
      ['help', 'demo'],
      ['demo', '--help'],
      ['demo', '--count', '5', '-h'],
    ]) {
      const help = parseCommandLine(PROGRAM, argv);
      expect(help.kind === 'help' && help.text).toMatch(/Usage: mcp-continuity demo \[options\]/);
      expect(help.kind === 'help' && help.text).toContain('--idle-timeout <ms>');
      expect(help.kind === 'help' && help.text).toContain('(default: 250)');
    }
  });

  it('refuses an unknown command or option, a bad number, a missing value and a stray argument, with the usage', () => {
    const cases: Array<[string[], string, RegExp]> = [
      [[], 'no command given', /Usage: mcp-continuity <command>/],
      [['frob'], "unknown command 'frob'", /Usage: mcp-continuity <command>/],
      [['--frob'], "unknown option '--frob'", /Usage: mcp-continuity <command>/],
      [['help', 'frob'], "unknown command 'frob'", /Usage: mcp-continuity <command>/],
      [['demo', '--frob'], "unknown option '--frob'", /Usage: mcp-continuity demo/],
      [['demo', '-x'], "unknown option '-x'", /Usage: mcp-continuity demo/],
      [['demo', '--count', 'many'], "--count must be a whole number (got 'many')", /--count <n>/],
      [['demo', '--count=-1'], "--count must be a whole number (got '-1')", /--count <n>/],
      [['demo', '--buffer', '1.5'], "--buffer must be a whole number (got '1.5')", /--buffer <n>/],
      [['demo', '--count='], "--count must be a whole number (got '')", /--count <n>/],
      [['inspect', '--port'], "option '--port' needs a value", /Usage: mcp-continuity inspect/],
      [['demo', '--slow=yes'], "option '--slow' takes no value", /--slow/],
      [['demo', 'now'], "unexpected argument 'now'", /Usage: mcp-continuity demo/],
    ];
    for (const [argv, message, usage] of cases) {
      const parsed = parseCommandLine(PROGRAM, argv);
      expect(parsed, argv.join(' ')).toMatchObject({ kind: 'error', message });
      expect(parsed.kind === 'error' && parsed.usage, argv.join(' ')).toMatch(usage);
    }
  });

  it('reads lists (`--name a b` and repeated), any number, and a negative number after its option', () => {
    const spec: CommandSpec = {
      description: 'a test command',
      options: {
        property: { kind: 'list', placeholder: '<name>', description: 'names' },
        seed: { kind: 'number', placeholder: '<n>', description: 'a seed' },
        runs: { kind: 'int', placeholder: '<n>', description: 'runs', default: 7 },
      },
    };
    expect(
      parseOptions('t', spec, ['--property', 'no hang', 'no loss', '--seed', '-12', '--property', 'x']),
    ).toEqual({
      kind: 'run',
      command: 't',
      values: { property: ['no hang', 'no loss', 'x'], seed: -12, runs: 7 },
    });
    expect(parseOptions('t', spec, ['--seed=-3.5'])).toMatchObject({
      values: { seed: -3.5, property: undefined },
    });
    expect(parseOptions('t', spec, ['--runs', '-1'])).toMatchObject({
      kind: 'error',
      message: "--runs must be a whole number (got '-1')",
    });
    // A value after an inline list value is not the list's.
    expect(parseOptions('t', spec, ['--property=a', 'b'])).toMatchObject({
      kind: 'error',
      message: "unexpected argument 'b'",
    });
  });

  it("names part 3's install command with the versions package.json declares for those peers", async () => {
    const pkg = JSON.parse(await readFile('package.json', 'utf8'));
    for (const [name, version] of Object.entries(MODERN_PART_PEERS)) {
      expect(pkg.peerDependencies[name], name).toBe(version);
      expect(pkg.peerDependenciesMeta[name], name).toEqual({ optional: true });
      expect(MODERN_PART_INSTALL).toContain(`${name}@${version}`);
    }
    expect(MODERN_PART_INSTALL).toMatch(/^npm install /);
  });
});
