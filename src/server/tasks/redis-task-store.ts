import { createHash } from 'node:crypto';
import type { TaskRecord } from '../../../machines/tasks/task-record.js';
import { createRedisClient, type RedisClientWith } from '../redis-client.js';
import { LIVE } from '../redis-memo-store.js';
import { script } from '../redis-script.js';
import { purged, type TaskCreate, type TaskStore } from './task-store.js';

/**
 * Task keys (P: prefix): `P task:t:<id>` hash { r: record JSON, v: version, x: purge-at ms or '' },
 * `P task:k:<hash of keyRef>` → task id. A record whose `x` has passed reads as absent everywhere, whether
 * or not Redis expired it yet (PEXPIREAT a minute later frees it): the memo's `live` check, same fields.
 */

/** KEYS: task, key binding (or the task again when unkeyed). ARGV: now, record, version, purge-at, id, keyed. */
const CREATE = `${LIVE}
local NOW = tonumber(ARGV[1])
if ARGV[6] == '1' then
  local bound = redis.call('GET', KEYS[2])
  if bound then
    local tk = string.gsub(KEYS[1], '[^:]*$', '') .. bound
    if live(tk, NOW) then return { 0, redis.call('HGET', tk, 'r') } end
  end
end
if live(KEYS[1], NOW) then return { 2 } end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'r', ARGV[2], 'v', ARGV[3], 'x', ARGV[4])
if ARGV[6] == '1' then redis.call('SET', KEYS[2], ARGV[5]) end
if ARGV[4] ~= '' then
  redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[4]) + 60000)
  if ARGV[6] == '1' then redis.call('PEXPIREAT', KEYS[2], tonumber(ARGV[4]) + 60000) end
end
return { 1 }
`;

/** KEYS: task. ARGV: now, expected version, next record, next version, purge-at. {0} gone, {1, json} lost, {2} written. */
const REPLACE = `${LIVE}
local NOW = tonumber(ARGV[1])
if not live(KEYS[1], NOW) then return { 0 } end
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[2] then return { 1, redis.call('HGET', KEYS[1], 'r') } end
redis.call('HSET', KEYS[1], 'r', ARGV[3], 'v', ARGV[4], 'x', ARGV[5])
return { 2 }
`;

const SCRIPTS = { mcpcTaskCreate: script(2, CREATE), mcpcTaskReplace: script(1, REPLACE) };
type Client = RedisClientWith<typeof SCRIPTS>;

const digest = (s: string): string => createHash('sha256').update(s).digest('hex').slice(0, 32);

/**
 * Tasks on Redis: shared by every instance behind one endpoint and surviving their restarts, so a task is
 * served by any instance and a keyed re-issue landing on another instance finds the same task. Each change
 * is one Lua script (set-if-absent on the key binding, compare-and-set on the version); Redis expires
 * purged records by itself, so `sweep` has nothing to do.
 */
export class RedisTaskStore implements TaskStore {
  readonly durable = true;
  private readonly client: Client;
  private readonly ready: Promise<unknown>;
  private readonly prefix: string;
  private readonly now: () => number;
  private closed = false;

  constructor(options: {
    readonly url: string;
    /** Prepended to every key. Defaults to `mcpc:`. */
    readonly keyPrefix?: string;
    readonly now?: () => number;
    readonly onError?: (error: unknown) => void;
  }) {
    this.prefix = options.keyPrefix ?? 'mcpc:';
    this.now = options.now ?? Date.now;
    this.client = createRedisClient(options.url, SCRIPTS);
    this.client.on('error', (error: unknown) => options.onError?.(error));
    this.ready = this.client.connect();
    this.ready.catch(() => {});
  }

  private async c(): Promise<Client> {
    await this.ready;
    return this.client;
  }

  private taskKey(taskId: string): string {
    return `${this.prefix}task:t:${taskId}`;
  }

  async create(record: TaskRecord): Promise<TaskCreate> {
    const keyed = record.keyRef !== undefined;
    const reply = (await (
      await this.c()
    ).mcpcTaskCreate(
      [
        this.taskKey(record.taskId),
        keyed ? `${this.prefix}task:k:${digest(record.keyRef ?? '')}` : this.taskKey(record.taskId),
      ],
      [
        String(this.now()),
        JSON.stringify(record),
        String(record.version),
        record.purgeAt === null ? '' : String(record.purgeAt),
        record.taskId,
        keyed ? '1' : '0',
      ],
    )) as Array<number | string>;
    if (Number(reply[0]) === 1) return { kind: 'created' };
    if (Number(reply[0]) === 0) return { kind: 'exists', record: JSON.parse(String(reply[1])) as TaskRecord };
    throw new Error(`task id ${record.taskId} already used`);
  }

  async get(taskId: string): Promise<TaskRecord | undefined> {
    const json = await (await this.c()).hGet(this.taskKey(taskId), 'r');
    if (json == null) return undefined;
    const record = JSON.parse(json) as TaskRecord;
    return purged(record, this.now()) ? undefined : record;
  }

  async replace(next: TaskRecord, expectedVersion: number): Promise<TaskRecord | undefined> {
    const reply = (await (
      await this.c()
    ).mcpcTaskReplace(
      [this.taskKey(next.taskId)],
      [
        String(this.now()),
        String(expectedVersion),
        JSON.stringify(next),
        String(next.version),
        next.purgeAt === null ? '' : String(next.purgeAt),
      ],
    )) as Array<number | string>;
    if (Number(reply[0]) === 0) return undefined;
    if (Number(reply[0]) === 1) return JSON.parse(String(reply[1])) as TaskRecord;
    return next;
  }

  async sweep(): Promise<string[]> {
    return [];
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.client.isReady) await this.client.close();
    else if (this.client.isOpen) this.client.destroy();
  }
}
