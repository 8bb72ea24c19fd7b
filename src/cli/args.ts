import { parseArgs } from 'node:util';

/**
 * The command line's grammar, on Node's built-in `parseArgs`: the published command must run right after
 * `npm install mcp-continuity`, with no argument-parsing package installed. Pure: it turns argv into a
 * command and its values, a help text, or an error with the usage to print; the caller does the I/O.
 */

/** One `--long-name` option. */
export interface OptionSpec {
  /**
   * `int`: a whole number >= 0; `number`: any finite number; `string`: one value; `list`: one or more
   * values (`--name a b` or `--name a --name b`); `repeat`: one value each time it is given, given any number
   * of times (`--name a --name b`: a value that may hold spaces, followed by the command's arguments);
   * `flag`: present or not.
   */
  readonly kind: 'int' | 'number' | 'string' | 'list' | 'repeat' | 'flag';
  /** What the value is, in the usage text (`<ms>`). */
  readonly placeholder?: string;
  readonly description: string;
  /** The value when the option is not given (shown in the usage text). */
  readonly default?: number | string;
}

/** A positional argument of a command (`probe <url>`): required, in order. */
export interface ArgumentSpec {
  /** Its key in the values, and its name in the usage text (`url` → `<url>`). */
  readonly name: string;
  readonly description: string;
}

export interface CommandSpec {
  readonly description: string;
  /** Keyed by the long name without the dashes (`idle-timeout`). */
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** Required positional arguments; none when omitted (a stray argument is then an error). */
  readonly arguments?: readonly ArgumentSpec[];
}

export interface ProgramSpec {
  /** What the usage text calls the program (`mcp-continuity`). */
  readonly name: string;
  readonly description: string;
  readonly commands: Readonly<Record<string, CommandSpec>>;
}

export type OptionValue = number | string | boolean | readonly string[] | undefined;
/** The values of a command's options, keyed as in its spec; every option has a key (a flag: false). */
export type OptionValues = Readonly<Record<string, OptionValue>>;

export type ParsedCommandLine =
  | { readonly kind: 'run'; readonly command: string; readonly values: OptionValues }
  /** `--help`, `-h` or `help [command]`: print `text` to stdout, exit 0. */
  | { readonly kind: 'help'; readonly text: string }
  /** Print `message` and `usage` to stderr, exit non-zero. */
  | { readonly kind: 'error'; readonly message: string; readonly usage: string };

const isHelp = (arg: string | undefined) => arg === '--help' || arg === '-h';

/** `argv` without the node executable and the script: `['demo', '--count', '5']`. */
export function parseCommandLine(program: ProgramSpec, argv: readonly string[]): ParsedCommandLine {
  const [first, ...rest] = argv;
  if (first === undefined) {
    return { kind: 'error', message: 'no command given', usage: programUsage(program) };
  }
  if (isHelp(first)) return { kind: 'help', text: programUsage(program) };
  if (first === 'help') {
    const name = rest[0];
    if (name === undefined) return { kind: 'help', text: programUsage(program) };
    const command = Object.hasOwn(program.commands, name) ? program.commands[name] : undefined;
    if (!command)
      return { kind: 'error', message: `unknown command '${name}'`, usage: programUsage(program) };
    return { kind: 'help', text: commandUsage(`${program.name} ${name}`, command) };
  }
  const command = Object.hasOwn(program.commands, first) ? program.commands[first] : undefined;
  if (!command) {
    const message = first.startsWith('-') ? `unknown option '${first}'` : `unknown command '${first}'`;
    return { kind: 'error', message, usage: programUsage(program) };
  }
  const parsed = parseOptions(`${program.name} ${first}`, command, rest);
  return parsed.kind === 'run' ? { ...parsed, command: first } : parsed;
}

/** The options of one command (or of a program that has no subcommands). */
export function parseOptions(name: string, command: CommandSpec, args: readonly string[]): ParsedCommandLine {
  const usage = commandUsage(name, command);
  if (args.some(isHelp)) return { kind: 'help', text: usage };
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const [key, spec] of Object.entries(command.options)) {
    options[key] =
      spec.kind === 'flag'
        ? { type: 'boolean' }
        : { type: 'string', ...(spec.kind === 'list' || spec.kind === 'repeat' ? { multiple: true } : {}) };
  }
  let tokens: ReturnType<typeof parseArgs>['tokens'];
  try {
    ({ tokens } = parseArgs({
      args: joinNegativeNumbers(command, args),
      options,
      strict: true,
      allowPositionals: true,
      tokens: true,
    }));
  } catch (error) {
    return { kind: 'error', message: parseErrorMessage(error), usage };
  }
  const raw = new Map<string, string[]>();
  const flags = new Set<string>();
  const slots = command.arguments ?? [];
  const positionals: string[] = [];
  let lastList: string | undefined;
  for (const token of tokens ?? []) {
    if (token.kind === 'option') {
      const spec = command.options[token.name] as OptionSpec;
      if (spec.kind === 'flag') flags.add(token.name);
      else
        raw.set(token.name, [
          ...(spec.kind === 'list' || spec.kind === 'repeat' ? (raw.get(token.name) ?? []) : []),
          token.value ?? '',
        ]);
      // Only values written right after a list option (`--property a b`) belong to it.
      lastList = spec.kind === 'list' && !token.inlineValue ? token.name : undefined;
    } else if (token.kind === 'positional') {
      if (lastList !== undefined) raw.get(lastList)?.push(token.value);
      else if (positionals.length < slots.length) positionals.push(token.value);
      else return { kind: 'error', message: `unexpected argument '${token.value}'`, usage };
    } else {
      lastList = undefined;
    }
  }
  const missing = slots[positionals.length];
  if (missing) return { kind: 'error', message: `missing <${missing.name}>`, usage };
  const values: Record<string, OptionValue> = {};
  slots.forEach((slot, i) => {
    values[slot.name] = positionals[i];
  });
  for (const [key, spec] of Object.entries(command.options)) {
    const given = raw.get(key);
    if (spec.kind === 'flag') values[key] = flags.has(key);
    else if (given === undefined) values[key] = spec.default;
    else if (spec.kind === 'list' || spec.kind === 'repeat') values[key] = given;
    else if (spec.kind === 'string') values[key] = given[0];
    else {
      const n = Number(given[0]);
      const ok =
        given[0]?.trim() !== '' &&
        (spec.kind === 'int' ? Number.isSafeInteger(n) && n >= 0 : Number.isFinite(n));
      if (!ok) {
        const what = spec.kind === 'int' ? 'a whole number' : 'a number';
        return { kind: 'error', message: `--${key} must be ${what} (got '${given[0]}')`, usage };
      }
      values[key] = n;
    }
  }
  return { kind: 'run', command: name, values };
}

/**
 * `--seed -12` means the value -12, as it did with the previous parser; `parseArgs` reads a value that
 * starts with a dash as a forgotten argument, so a negative number after a numeric option is joined to it.
 */
function joinNegativeNumbers(command: CommandSpec, args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const spec = arg.startsWith('--') ? command.options[arg.slice(2)] : undefined;
    const next = args[i + 1];
    if ((spec?.kind === 'int' || spec?.kind === 'number') && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/** `parseArgs`'s complaint, in one short line (its hints about positionals and `--` do not apply here). */
function parseErrorMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const option = /'(-[^' ]+)/.exec(message)?.[1];
  if (option && /^Unknown option/.test(message)) return `unknown option '${option}'`;
  if (option && /argument missing/.test(message)) return `option '${option}' needs a value`;
  if (option && /does not take an argument/.test(message)) return `option '${option}' takes no value`;
  return message.split('\n')[0] ?? message;
}

export function programUsage(program: ProgramSpec): string {
  const names = Object.keys(program.commands);
  const width = Math.max(...names.map((n) => n.length)) + 2;
  return [
    `Usage: ${program.name} <command> [options]`,
    '',
    program.description,
    '',
    'Commands:',
    ...names.map((n) => `  ${n.padEnd(width)}${program.commands[n]?.description}`),
    `  ${'help'.padEnd(width)}the options of a command (help <command>, or <command> --help)`,
  ].join('\n');
}

export function commandUsage(name: string, command: CommandSpec): string {
  const rows: Array<[string, string]> = Object.entries(command.options).map(([key, spec]) => {
    const value = spec.placeholder ? ` ${spec.placeholder}${spec.kind === 'list' ? '...' : ''}` : '';
    const again = spec.kind === 'repeat' ? ' (repeatable)' : '';
    const fallback = spec.default === undefined ? '' : ` (default: ${spec.default})`;
    return [`--${key}${value}`, `${spec.description}${again}${fallback}`];
  });
  const args = command.arguments ?? [];
  rows.push(['-h, --help', 'this text']);
  const width = Math.max(...rows.map(([flag]) => flag.length), ...args.map((a) => a.name.length + 2)) + 2;
  return [
    `Usage: ${name}${args.map((a) => ` <${a.name}>`).join('')} [options]`,
    '',
    command.description,
    '',
    ...(args.length
      ? ['Arguments:', ...args.map((a) => `  ${`<${a.name}>`.padEnd(width)}${a.description}`), '']
      : []),
    'Options:',
    ...rows.map(([flag, text]) => `  ${flag.padEnd(width)}${text}`),
  ].join('\n');
}
