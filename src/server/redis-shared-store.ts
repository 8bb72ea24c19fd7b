import { randomBytes } from 'node:crypto';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { SessionRecord, SharedSessionStore, StoreChange } from './event-log.js';
import type { RedisClientWith } from './redis-client.js';
import { script } from './redis-script.js';

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

export const SHARED_SCRIPTS = {
  mcpcCommit: script(1, COMMIT),
  mcpcTouch: script(1, TOUCH),
};
type Client = RedisClientWith<typeof SHARED_SCRIPTS>;

/** Change reports kept for instances that fall behind; beyond that, readers' polling catches up. */
const FEED_LENGTH = 10_000;
/** How long one blocking read waits before it looks again (and notices it was stopped). */
const BLOCK_MS = 1_000;

type FeedReply = Array<{ name: string; messages: Array<{ id: string; message: Record<string, string> }> }>;

/**
 * The parts of a {@link SharedSessionStore} that live beside a Redis event log: versioned session records,
 * leases, and the change feed, a Redis Stream every instance reads with blocking XREADs on a connection
 * of its own. Keys: `P{S}:record` (hash: v, json, t), `P:instance:<id>` (lease), `P:feed` (stream).
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

  private get feedKey(): string {
    return `${this.prefix}feed`;
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
    await (await this.client()).set(this.leaseKey(this.instanceId), '1', {
      expiration: { type: 'PX', value: Math.max(1, Math.ceil(leaseMs)) },
    });
  }

  async dropLease(): Promise<void> {
    await (await this.client()).del(this.leaseKey(this.instanceId));
  }

  async alive(instanceIds: readonly string[]): Promise<ReadonlySet<string>> {
    const c = await this.client();
    const unique = [...new Set(instanceIds)];
    const found = await Promise.all(unique.map((id) => c.exists(this.leaseKey(id))));
    return new Set(unique.filter((_, i) => Number(found[i]) > 0));
  }

  /** Reports an append or finish on a stream, for the instances tailing it elsewhere. */
  async announceAppended(sessionId: string, stream: number): Promise<void> {
    await this.report({ s: sessionId, n: String(stream) });
  }

  async forward(instanceId: string, sessionId: string, message: JsonRpcMessage): Promise<void> {
    await this.report({ s: sessionId, to: instanceId, m: JSON.stringify(message) });
  }

  async announceEnded(sessionId: string, reason: 'expired' | 'terminated'): Promise<void> {
    await this.report({ s: sessionId, e: reason });
  }

  private async report(fields: Record<string, string>): Promise<void> {
    await (await this.client()).xAdd(
      this.feedKey,
      '*',
      { i: this.instanceId, ...fields },
      { TRIM: { strategy: 'MAXLEN', strategyModifier: '~', threshold: FEED_LENGTH } },
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
      // Start after the newest report now in the feed: older ones are about appends already in the log.
      const newest = (await reader.xRevRange(this.feedKey, '+', '-', { COUNT: 1 })) as Array<{ id: string }>;
      let after = newest[0]?.id ?? '0-0';
      while (!stopped) {
        let batch: FeedReply | null;
        try {
          batch = (await reader.xRead(
            { key: this.feedKey, id: after },
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
