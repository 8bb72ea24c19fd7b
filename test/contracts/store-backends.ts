import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

/**
 * How a contract suite gets SQLite and Redis stores: a fresh file per store (a `reopen` opens the same
 * file, as a restarted process would), and a real redis-server of the test file's own on an ephemeral port
 * (fails, never skips, when it is missing) with a fresh key prefix per store (a `peer` or `reopen` shares
 * the prefix, as another instance or a restarted one would). Call each at the top of a test file: they
 * register its `beforeAll`/`afterAll`.
 */

export function sqliteStores<S extends object, O>(name: string, open: (path: string, options: O) => S) {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  const paths = new WeakMap<S, string>();
  const at = (path: string, options: O) => {
    const store = open(path, options);
    paths.set(store, path);
    return store;
  };
  return {
    async create(options: O): Promise<S> {
      const dir = await mkdtemp(join(tmpdir(), `mcpc-${name}-contract-`));
      dirs.push(dir);
      return at(join(dir, `${name}.db`), options);
    },
    reopen: (previous: S, options: O): S => at(paths.get(previous) as string, options),
  };
}

export function redisStores<S extends object, O>(
  name: string,
  open: (url: string, keyPrefix: string, options: O) => S,
) {
  let redis: RedisServer | undefined;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.dispose();
  });
  let prefixes = 0;
  const prefixOf = new WeakMap<S, string>();
  const at = (keyPrefix: string, options: O) => {
    const store = open((redis as RedisServer).url, keyPrefix, options);
    prefixOf.set(store, keyPrefix);
    return store;
  };
  return {
    create: (options: O): S => at(`${name}-contract-${process.pid}-${++prefixes}:`, options),
    peer: (store: S, options: O): S => at(prefixOf.get(store) as string, options),
    reopen: (previous: S, options: O): S => at(prefixOf.get(previous) as string, options),
  };
}
