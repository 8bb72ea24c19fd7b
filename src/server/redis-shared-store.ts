import { randomBytes } from 'node:crypto';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { SessionRecord, SharedSessionStore, StoreChange } from './event-log.js';
import type { RedisClientWith } from './redis-client.js';
import { script } from './redis-script.js';

/** Change reports kept in an inbox for an instance that falls behind; beyond that, its polling catches up. */
const INBOX_LENGTH = 10_000;
/** An inbox nobody wrote to for this long is dropped (its instance died without dropping its lease). */
const INBOX_IDLE_MS = 600_000;

/**
 * KEYS: the record hash. ARGV: the expected version, the record JSON, now. The record is a hash of
 * `v` (version), `json` and `t` (last touched); it is written only over the version its writer read.
 */
const COMMIT = `
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', v + 1, 'json', ARGV[2], 't', ARGV[3])
return 1
`;

/** KEYS: the record hash. ARGV: now. Touching a session that is gone must not bring a husk of it back. */
const TOUCH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 't', ARGV[1])
return 1
`;

/**
 * Lua shared by every script that reports a change. KEYS[I] is the instance set (zset: instance id →
 * lease deadline, ms). `report(now, self, inboxPrefix, fields)` adds `fields` to the inbox of every other
 * instance whose lease runs at `now`: an instance never reads its own reports back, and one alone sends
 * none. Inboxes are trimmed by length and expire when nobody writes to them (their instance died).
 */
export const REPORT = `
local function report(instances, now, self, inboxPrefix, fields)
  local ids = redis.call('ZRANGEBYSCORE', instances, now, '+inf')
  for _, id in ipairs(ids) do
    if id ~= self then
      local inbox = inboxPrefix .. id
      redis.call('XADD', inbox, 'MAXLEN', '~', ${INBOX_LENGTH}, '*', unpack(fields))
      redis.call('PEXPIRE', inbox, ${INBOX_IDLE_MS})
    end
  end
end
`;

/** KEYS: the instance set. ARGV: now, self, inbox prefix, then field, value, … Reports to the others. */
const BROADCAST = `${REPORT}
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
report(KEYS[1], ARGV[1], ARGV[2], ARGV[3], fields)
return 1
`;

/** KEYS: one instance's inbox. ARGV: field, value, … A message for that instance alone. */
const SEND = `
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ${INBOX_LENGTH}, '*', unpack(ARGV))
redis.call('PEXPIRE', KEYS[1], ${INBOX_IDLE_MS})
return 1
`;

/**
 * KEYS: this instance's lease, the instance set. ARGV: lease ms, now, self. Renews the lease and this
 * instance's place in the set (score: when its lease ends); members whose lease ended long ago leave it.
 */
const LEASE = `
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
redis.call('ZADD', KEYS[2], tonumber(ARGV[2]) + tonumber(ARGV[1]), ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[2]) - ${INBOX_IDLE_MS})
return 1
`;

/** KEYS: this instance's lease, the instance set, its inbox. ARGV: self. */
const UNLEASE = `
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`;

export const SHARED_SCRIPTS = {
  mcpcCommit: script(1, COMMIT),
  mcpcTouch: script(1, TOUCH),
  mcpcBroadcast: script(1, BROADCAST),
  mcpcSend: script(1, SEND),
  mcpcLease: script(2, LEASE),
  mcpcUnlease: script(3, UNLEASE),
};
type Client = RedisClientWith<typeof SHARED_SCRIPTS>;

/** How long one blocking read waits before it looks again (and notices it was stopped). */
const BLOCK_MS = 1_000;

type FeedReply = Array<{ name: string; messages: Array<{ id: string; message: Record<string, string> }> }>;

/**
 * The parts of a {@link SharedSessionStore} that live beside a Redis event log: versioned session records,
 * leases, and change reports. Each instance has an inbox (a Redis Stream) it reads with blocking XREADs on
 * a connection of its own; a change is reported, by the script that makes it, to the inboxes of the other
 * live instances only (`REPORT`). Keys: `P{S}:record` (hash: v, json, t), `P:instance:<id>` (lease),
 * `P:instances` (zset: id → lease end), `P:inbox:<id>` (stream).
 */
export class RedisSharedStore implements SharedSessionStore {
  readonly instanceId = randomBytes(8).toString('hex');
  private readonly watchers = new Set<() => void>();

  constructor(
    private readonly client: () => Promise<Client>,
    private readonly prefix: string,
    private readonly recordKey: (sessionId: string) => string,
    private readonly now: () => number,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** The instance set, for scripts that report a change (`REPORT`). */
  get instancesKey(): string {
    return `${this.prefix}instances`;
  }

  /** What `BROADCAST` takes before the report's fields: now, self, the inbox prefix. */
  private reportArgs(): string[] {
    return [String(this.now()), this.instanceId, this.inboxPrefix];
  }

  /** Prepended to an instance id: that instance's inbox. */
  get inboxPrefix(): string {
    return `${this.prefix}inbox:`;
  }

  private leaseKey(instanceId: string): string {
    return `${this.prefix}instance:${instanceId}`;
  }

  async commit(record: SessionRecord, expectedVersion: number): Promise<boolean> {
    const c = await this.client();
    const reply = await c.mcpcCommit(
      [this.recordKey(record.id)],
      [String(expectedVersion), JSON.stringify(record), String(this.now())],
    );
    return Number(reply) === 1;
  }

  async load(id: string): Promise<{ record: SessionRecord; version: number } | undefined> {
    const [v, json] = await (await this.client()).hmGet(this.recordKey(id), ['v', 'json']);
    if (v == null || json == null) return undefined;
    return { record: JSON.parse(json) as SessionRecord, version: Number(v) };
  }

  async version(id: string): Promise<number | undefined> {
    const v = await (await this.client()).hGet(this.recordKey(id), 'v');
    return v == null ? undefined : Number(v);
  }

  async touch(ids: readonly string[]): Promise<void> {
    const c = await this.client();
    const now = String(this.now());
    await Promise.all(ids.map((id) => c.mcpcTouch([this.recordKey(id)], [now])));
  }

  async idleFor(id: string): Promise<number | undefined> {
    const t = await (await this.client()).hGet(this.recordKey(id), 't');
    return t == null ? undefined : Math.max(0, this.now() - Number(t));
  }

  async renewLease(leaseMs: number): Promise<void> {
    await (await this.client()).mcpcLease(
      [this.leaseKey(this.instanceId), this.instancesKey],
      [String(Math.max(1, Math.ceil(leaseMs))), String(this.now()), this.instanceId],
    );
  }

  async dropLease(): Promise<void> {
    await (await this.client()).mcpcUnlease(
      [this.leaseKey(this.instanceId), this.instancesKey, this.inboxPrefix + this.instanceId],
      [this.instanceId],
    );
  }

  async alive(instanceIds: readonly string[]): Promise<ReadonlySet<string>> {
    const c = await this.client();
    const unique = [...new Set(instanceIds)];
    const found = await Promise.all(unique.map((id) => c.exists(this.leaseKey(id))));
    return new Set(unique.filter((_, i) => Number(found[i]) > 0));
  }

  async forward(instanceId: string, sessionId: string, message: JsonRpcMessage): Promise<void> {
    await (await this.client()).mcpcSend(
      [this.inboxPrefix + instanceId],
      ['i', this.instanceId, 's', sessionId, 'to', instanceId, 'm', JSON.stringify(message)],
    );
  }

  async announceEnded(sessionId: string, reason: 'expired' | 'terminated'): Promise<void> {
    await (await this.client()).mcpcBroadcast(
      [this.instancesKey],
      [...this.reportArgs(), 'i', this.instanceId, 's', sessionId, 'e', reason],
    );
  }

  watch(listener: (change: StoreChange) => void): () => void {
    let stopped = false;
    let reader: Client | undefined;
    const stop = () => {
      stopped = true;
      this.watchers.delete(stop);
      reader?.destroy();
    };
    this.watchers.add(stop);
    void (async () => {
      const main = await this.client();
      reader = main.duplicate();
      reader.on('error', (error: unknown) => this.onError(error));
      await reader.connect();
      // The inbox is this instance's own (its id is new): everything in it was sent to this instance.
      const inbox = this.inboxPrefix + this.instanceId;
      let after = '0-0';
      while (!stopped) {
        let batch: FeedReply | null;
        try {
          batch = (await reader.xRead(
            { key: inbox, id: after },
            { BLOCK: BLOCK_MS, COUNT: 500 },
          )) as FeedReply | null;
        } catch (error) {
          if (stopped) return;
          // Redis restarting, say: the client reconnects by itself; look again shortly.
          this.onError(error);
          await new Promise((resolve) => setTimeout(resolve, BLOCK_MS / 4));
          continue;
        }
        for (const { messages } of batch ?? []) {
          for (const { id, message } of messages) {
            after = id;
            if (message.i === this.instanceId || message.s === undefined) continue;
            if (message.to !== undefined) {
              if (message.to === this.instanceId && message.m !== undefined) {
                listener({ kind: 'inbound', sessionId: message.s, message: JSON.parse(message.m) });
              }
            } else if (message.e === 'expired' || message.e === 'terminated') {
              listener({ kind: 'ended', sessionId: message.s, reason: message.e });
            } else if (message.n !== undefined) {
              listener({ kind: 'appended', sessionId: message.s, stream: Number(message.n) });
            }
          }
        }
      }
    })().catch((error: unknown) => {
      if (!stopped) this.onError(error);
    });
    return stop;
  }

  /** Stops every watcher (their connections close). */
  stopWatching(): void {
    for (const stop of [...this.watchers]) stop();
  }
}
