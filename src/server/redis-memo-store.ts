import { createHash, randomBytes } from 'node:crypto';
import {
  admitCounted,
  type MemoEntry,
  type MemoExpected,
  memoExpired,
  memoExpiresAt,
} from '../../machines/server/keyed-memo.js';
import type { MemoCreate, MemoStore } from './memo-store.js';
import { createRedisClient, type RedisClientWith } from './redis-client.js';
import { script } from './redis-script.js';

/**
 * Entry hash fields: `e` (the entry, JSON), `s` (its state), `l` (its run: the log id), `x` (when its
 * window ends, ms; empty while running). An entry whose `x` has passed reads as absent everywhere, whether or not Redis expired it yet.
 */
export const LIVE = `
local function live(k, now)
  local x = redis.call('HGET', k, 'x')
  if not x then return false end
  return x == '' or tonumber(x) > now
end
`;

/**
 * KEYS: entry, principal set (zset: entry hash → window end, +inf while running), running set.
 * ARGV: now, max per principal, entry JSON, entry hash, log id. Set-if-absent and the bound in one step, so two
 * instances racing on one key create it once. Replies {1} created, {0, json} exists, {2, count, first
 * window end} full. The bound is counted (ZCARD, after ZREMRANGEBYSCORE drops what left its window) and
 * the first window end is the set's lowest score: O(log n) whatever the principal holds.
 */
const CREATE = `${LIVE}
local NOW = tonumber(ARGV[1])
if live(KEYS[1], NOW) then return { 0, redis.call('HGET', KEYS[1], 'e') } end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', NOW)
local held = redis.call('ZCARD', KEYS[2])
if held >= tonumber(ARGV[2]) then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return { 2, held, first[2] or 'inf' }
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'e', ARGV[3], 's', 'running', 'l', ARGV[5], 'x', '')
redis.call('ZADD', KEYS[2], '+inf', ARGV[4])
redis.call('SADD', KEYS[3], ARGV[4])
return { 1 }
`;

/**
 * KEYS: entry, principal set, running set, expiry set (zset: "logId|hash|principalHash" → window end).
 * ARGV: now, expected state, next JSON, next state, window end (empty while running), entry hash, expiry
 * member, when Redis may free the entry, expected log id, next log id. Compare-and-set on the state and
 * the run. Replies {0} gone, {1, json} not the expected state and run, {2} written.
 */
const REPLACE = `${LIVE}
local NOW = tonumber(ARGV[1])
if not live(KEYS[1], NOW) then return { 0 } end
local stored = redis.call('HMGET', KEYS[1], 's', 'l', 'e')
-- An entry written before the run was a field of its own names it only in its JSON.
local run = stored[2] or cjson.decode(stored[3]).logId
if stored[1] ~= ARGV[2] or run ~= ARGV[9] then return { 1, stored[3] } end
redis.call('HSET', KEYS[1], 'e', ARGV[3], 's', ARGV[4], 'l', ARGV[10], 'x', ARGV[5])
if ARGV[5] ~= '' then
  -- Redis frees the hash by itself too, ARGV[8] (a margin past the window: readers already treat it as
  -- gone); in this script, so recording an outcome is one round trip.
  redis.call('PEXPIREAT', KEYS[1], ARGV[8])
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
  redis.call('SREM', KEYS[3], ARGV[6])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[7])
else
  -- Running again (a refused key restarted): never expires, counts for its principal, is found on restart.
  redis.call('PERSIST', KEYS[1])
  redis.call('ZADD', KEYS[2], '+inf', ARGV[6])
  redis.call('SADD', KEYS[3], ARGV[6])
end
return { 2 }
`;

/** Entries one run of the sweep script deletes at most, and runs one sweep makes at most. */
const SWEEP_BATCH = 500;
const SWEEP_ROUNDS = 20;

/**
 * KEYS: expiry set. ARGV: now, key prefix. Deletes entries past their window (unless the key was created
 * again since) and their principal-set members; returns the log ids to drop.
 */
const SWEEP = `
local NOW = tonumber(ARGV[1])
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', NOW, 'LIMIT', 0, ${SWEEP_BATCH})
local logs = {}
for _, item in ipairs(items) do
  local logId, hash, p = string.match(item, '^(.*)|([^|]*)|([^|]*)$')
  local k = ARGV[2] .. 'memo:e:' .. hash
  local x = redis.call('HGET', k, 'x')
  if x and x ~= '' and tonumber(x) <= NOW then redis.call('DEL', k) end
  local pk = ARGV[2] .. 'memo:p:' .. p
  local score = redis.call('ZSCORE', pk, hash)
  if score and tonumber(score) <= NOW then redis.call('ZREM', pk, hash) end
  redis.call('ZREM', KEYS[1], item)
  logs[#logs + 1] = logId
end
return logs
`;

const SCRIPTS = {
  mcpcMemoCreate: script(3, CREATE),
  mcpcMemoReplace: script(4, REPLACE),
  mcpcMemoSweep: script(1, SWEEP),
};
type Client = RedisClientWith<typeof SCRIPTS>;

export interface RedisMemoStoreOptions {
  readonly url: string;
  readonly memoWindowMs: number;
  /** Prepended to every key; use the event log's prefix or another. Defaults to `mcpc:`. */
  readonly keyPrefix?: string;
  /** Injectable clock (tests); passed into the scripts, Redis's own clock is never used. */
  readonly now?: () => number;
  readonly onError?: (error: unknown) => void;
}

const digest = (s: string): string => createHash('sha256').update(s).digest('hex').slice(0, 32);

/**
 * The memo on Redis, shared by every instance behind one endpoint and surviving their restarts (§6).
 * Each change is one Lua script: creating an entry is set-if-absent within the per-principal bound, and an
 * outcome, a cancel or a declared death is a compare-and-set from `running`, so exactly one of them wins.
 * Each instance holds a lease (`P memo:instance:<id>`, renewed by the runtime); a running entry whose
 * owner's lease lapsed is declared outcome unknown by whichever instance sees it first.
 *
 * Keys (P: prefix; h: a hash of the memo key, so any key characters are safe): `P memo:e:h` (entry
 * hash), `P memo:p:<principal hash>` (zset), `P memo:running` (set), `P memo:expiry` (zset), `P
 * memo:since`, `P memo:instance:<id>`.
 */
export class RedisMemoStore implements MemoStore {
  readonly durable = true;
  readonly instanceId = randomBytes(8).toString('hex');
  readonly memoWindowMs: number;
  private readonly client: Client;
  private readonly ready: Promise<unknown>;
  private readonly prefix: string;
  private readonly now: () => number;
  private closed = false;
  /** `liveEntries`: the last count, and the count in flight. */
  private lastCount: number | undefined;
  private counting: Promise<void> | undefined;

  constructor(options: RedisMemoStoreOptions) {
    this.memoWindowMs = options.memoWindowMs;
    this.prefix = options.keyPrefix ?? 'mcpc:';
    this.now = options.now ?? Date.now;
    this.client = createRedisClient(options.url, SCRIPTS);
    const onError = options.onError;
    this.client.on('error', (error: unknown) => onError?.(error));
    this.ready = this.client
      .connect()
      .then(() => this.client.set(`${this.prefix}memo:since`, String(this.now()), { condition: 'NX' }));
    this.ready.catch(() => {});
  }

  private async c(): Promise<Client> {
    await this.ready;
    return this.client;
  }

  private entryKey(memoKey: string): string {
    return `${this.prefix}memo:e:${digest(memoKey)}`;
  }

  private principalKey(principal: string): string {
    return `${this.prefix}memo:p:${digest(principal)}`;
  }

  private get runningKey(): string {
    return `${this.prefix}memo:running`;
  }

  async completeForMs(): Promise<number> {
    const since = await (await this.c()).get(`${this.prefix}memo:since`);
    return since == null ? 0 : this.now() - Number(since);
  }

  async get(memoKey: string): Promise<MemoEntry | undefined> {
    const json = await (await this.c()).hGet(this.entryKey(memoKey), 'e');
    if (json == null) return undefined;
    const entry = JSON.parse(json) as MemoEntry;
    return memoExpired(entry, this.memoWindowMs, this.now()) ? undefined : entry;
  }

  async create(entry: MemoEntry, maxEntriesPerPrincipal: number): Promise<MemoCreate> {
    const c = await this.c();
    const now = this.now();
    const reply = (await c.mcpcMemoCreate(
      [this.entryKey(entry.memoKey), this.principalKey(entry.principal), this.runningKey],
      [
        String(now),
        String(maxEntriesPerPrincipal),
        JSON.stringify(entry),
        digest(entry.memoKey),
        entry.logId,
      ],
    )) as Array<number | string>;
    if (Number(reply[0]) === 1) return { kind: 'created' };
    if (Number(reply[0]) === 0) return { kind: 'exists', entry: JSON.parse(String(reply[1])) as MemoEntry };
    // Full: the count, and the lowest score (the first window end; inf when every entry runs).
    const first = Number(reply[2]);
    const admission = admitCounted(
      { live: Number(reply[1]), firstWindowEnd: Number.isNaN(first) ? Number.POSITIVE_INFINITY : first },
      maxEntriesPerPrincipal,
      this.memoWindowMs,
      now,
    );
    return admission.kind === 'full' ? admission : { kind: 'full', retryAfterSeconds: 1 };
  }

  async replace(next: MemoEntry, expected: MemoExpected): Promise<MemoEntry | undefined> {
    const c = await this.c();
    const end = memoExpiresAt(next, this.memoWindowMs);
    const hash = digest(next.memoKey);
    const reply = (await c.mcpcMemoReplace(
      [
        this.entryKey(next.memoKey),
        this.principalKey(next.principal),
        this.runningKey,
        `${this.prefix}memo:expiry`,
      ],
      [
        String(this.now()),
        expected.state,
        JSON.stringify(next),
        next.state,
        end === undefined ? '' : String(end),
        hash,
        `${next.logId}|${hash}|${digest(next.principal)}`,
        end === undefined ? '' : String(Math.ceil(end + 60_000)),
        expected.logId,
        next.logId,
      ],
    )) as Array<number | string>;
    if (Number(reply[0]) === 0) return undefined;
    if (Number(reply[0]) === 1) return JSON.parse(String(reply[1])) as MemoEntry;
    return next;
  }

  async running(): Promise<MemoEntry[]> {
    const c = await this.c();
    const hashes = await c.sMembers(this.runningKey);
    const out: MemoEntry[] = [];
    for (const h of hashes) {
      const json = await c.hGet(`${this.prefix}memo:e:${h}`, 'e');
      if (json == null) {
        await c.sRem(this.runningKey, h);
        continue;
      }
      const entry = JSON.parse(json) as MemoEntry;
      if (entry.state === 'running') out.push(entry);
      else await c.sRem(this.runningKey, h);
    }
    return out;
  }

  async sweep(): Promise<string[]> {
    // The script deletes at most SWEEP_BATCH entries a run; run it again while it deletes a full batch, so
    // expiry keeps up with any call rate (bounded, so one sweep never holds Redis for long).
    const gone: string[] = [];
    for (let round = 0; round < SWEEP_ROUNDS; round++) {
      const reply = await (await this.c()).mcpcMemoSweep(
        [`${this.prefix}memo:expiry`],
        [String(this.now()), this.prefix],
      );
      const batch = (reply as string[]).map(String);
      gone.push(...batch);
      if (batch.length < SWEEP_BATCH) break;
    }
    return gone;
  }

  private leaseKey(id: string): string {
    return `${this.prefix}memo:instance:${id}`;
  }

  async renewLease(leaseMs: number): Promise<void> {
    await (await this.c()).set(this.leaseKey(this.instanceId), '1', {
      expiration: { type: 'PX', value: Math.max(1, Math.ceil(leaseMs)) },
    });
  }

  async dropLease(): Promise<void> {
    await (await this.c()).del(this.leaseKey(this.instanceId));
  }

  /**
   * This instance is alive by definition (it is asking), so only the others' leases are read: a keyed
   * call whose entry this instance owns asks nothing of Redis (one `EXISTS` round trip per call before).
   */
  async alive(instanceIds: readonly string[]): Promise<ReadonlySet<string>> {
    const others = [...new Set(instanceIds)].filter((id) => id !== this.instanceId);
    const live = new Set(instanceIds.filter((id) => id === this.instanceId));
    if (others.length === 0) return live;
    const c = await this.c();
    const found = await Promise.all(others.map((id) => c.exists(this.leaseKey(id))));
    others.forEach((id, i) => {
      if (Number(found[i]) > 0) live.add(id);
    });
    return live;
  }

  /**
   * The live entries counted now, in one round trip: the running set's size plus the expiry index's
   * members whose window has not ended (both kept by the scripts above; nothing is scanned).
   */
  async countLiveEntries(): Promise<number> {
    const [running, finished] = await (await this.c())
      .multi()
      .sCard(this.runningKey)
      .zCount(`${this.prefix}memo:expiry`, `(${this.now()}`, '+inf')
      .exec();
    return Number(running) + Number(finished);
  }

  /**
   * For the `server.memo_entries` gauge, which reads without waiting: the count of the last
   * `countLiveEntries` (undefined before the first one ends), and the next count is started (one at a
   * time), so the gauge trails Redis by one reading.
   */
  liveEntries(): number | undefined {
    if (!this.counting && !this.closed)
      this.counting = this.countLiveEntries()
        .then(
          (n) => {
            this.lastCount = n;
          },
          () => undefined,
        )
        .finally(() => {
          this.counting = undefined;
        });
    return this.lastCount;
  }

  /** Disconnects at once, dropping commands in flight: a test's stand-in for the process dying. */
  kill(): void {
    this.closed = true;
    if (this.client.isOpen) this.client.destroy();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.client.isReady) await this.client.close();
    else if (this.client.isOpen) this.client.destroy();
  }
}
