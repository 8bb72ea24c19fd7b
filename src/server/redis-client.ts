import { createClient, type RedisClientType, type RedisDefaultModules, type RedisScripts } from 'redis';

/**
 * The Redis connection both Redis modules use: the event log creates it with every script it runs, and
 * the shared store, which lives beside the log on the same connection, asks only for its own scripts
 * (`script()` in redis-script.ts). Neither module needs the other's types for it.
 */

/** A node-redis client with at least the Lua scripts `S` as methods (a client made with more is one too). */
// biome-ignore lint/complexity/noBannedTypes: `{}` is node-redis's own default for "no Redis functions".
export type RedisClientWith<S extends RedisScripts> = RedisClientType<RedisDefaultModules, {}, S>;

/** A client for `url` with `scripts` loaded: sent by SHA, and re-sent when Redis has forgotten them. */
export function createRedisClient<S extends RedisScripts>(url: string, scripts: S): RedisClientWith<S> {
  return createClient({ url, scripts });
}
