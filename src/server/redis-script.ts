import { type CommandParser, defineScript } from 'redis';

/**
 * A Lua script for node-redis: `numberOfKeys` keys, then string arguments; the reply as Redis sends it.
 * `numberOfKeys` undefined: as many keys as each call passes (the count is sent with them).
 */
export const script = (numberOfKeys: number | undefined, source: string) =>
  defineScript({
    NUMBER_OF_KEYS: numberOfKeys,
    SCRIPT: source,
    parseCommand(parser: CommandParser, keys: readonly string[], args: readonly string[]) {
      if (numberOfKeys === undefined) parser.push(String(keys.length));
      for (const key of keys) parser.pushKey(key);
      parser.push(...args);
    },
    transformReply: (reply: unknown): unknown => reply,
  });

/**
 * Lua shared by the event log's stream scripts and the session record's commit, which opens the streams
 * it numbers (machines/server/shared-record.ts). `ensureWindow(W, X, K)` registers a stream if it is new
 * (W its window hash, X its Redis Stream, K the session's key set) and returns oldest, head, finished. A
 * window hash lost while its stream survived (a key evicted under maxmemory, say) is rebuilt from the
 * stream's ids, so numbering goes on densely instead of starting again at 1.
 */
export const ENSURE_WINDOW = `
local function int(n) return string.format('%d', n) end
local function seqOf(entryId) return tonumber(string.match(entryId, '^(%d+)-')) end

local function ensureWindow(W, X, K)
  if redis.call('EXISTS', W) == 0 then
    local last = redis.call('XREVRANGE', X, '+', '-', 'COUNT', 1)
    local oldest, head = 1, 0
    if #last > 0 then
      head = seqOf(last[1][1])
      oldest = seqOf(redis.call('XRANGE', X, '-', '+', 'COUNT', 1)[1][1])
    end
    redis.call('HSET', W, 'oldest', int(oldest), 'head', int(head), 'finished', 0)
    redis.call('SADD', K, W, X)
    return oldest, head, 0
  end
  local w = redis.call('HMGET', W, 'oldest', 'head', 'finished')
  return tonumber(w[1]), tonumber(w[2]), tonumber(w[3])
end
`;
