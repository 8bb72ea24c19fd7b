import { type CommandParser, defineScript } from 'redis';

/** A Lua script for node-redis: `numberOfKeys` keys, then string arguments; the reply as Redis sends it. */
export const script = (numberOfKeys: number, source: string) =>
  defineScript({
    NUMBER_OF_KEYS: numberOfKeys,
    SCRIPT: source,
    parseCommand(parser: CommandParser, keys: readonly string[], args: readonly string[]) {
      for (const key of keys) parser.pushKey(key);
      parser.push(...args);
    },
    transformReply: (reply: unknown): unknown => reply,
  });
