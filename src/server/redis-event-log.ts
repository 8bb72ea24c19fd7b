import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import {
  DEFAULT_RETENTION_POLICY,
  type RetentionPolicy,
  type StreamWindow,
} from '../../machines/server/retention.js';
import type { EventLog, EventLogObserver, SessionRecord, StoredEvent } from './event-log.js';
import { createRedisClient, type RedisClientWith } from './redis-client.js';
import { ENSURE_WINDOW, script } from './redis-script.js';
import { REPORT, RedisSharedStore, SHARED_SCRIPTS } from './redis-shared-store.js';

export interface RedisEventLogOptions {
  /** `redis://[[user]:password@]host[:port][/db]` (or `rediss://`). */
  readonly url: string;
  readonly maxEventsPerStream?: number;
  readonly retentionMs?: number;
  /** Injectable clock, for tests. Passed into the scripts: Redis's own clock is never used. */
  readonly now?: () => number;
  /** Prepended to every key, so several logs (or applications) can share a database. Defaults to `mcpc:`. */
  readonly keyPrefix?: string;
  /**
   * Connection errors the client reports while it (re)connects. Commands issued meanwhile are queued and
   * sent once it is connected again (node-redis's offline queue), so a short Redis restart only delays
   * them. Defaults to ignoring the errors.
   */
  readonly onError?: (error: unknown) => void;
}

/**
 * Shared by the stream scripts. KEYS: the window hash, the Redis stream, the session's key set.
 * ARGV: now (stored as the event's `at`), the age cutoff (now - retentionMs), maxEventsPerStream, then one
 * script-specific argument. Entries are `<seq>-0` with the fields `at` and `m` (the JSON message), in that
 * order, so `fields[2]` is `at` and `fields[4]` the message.
 */
const PRELUDE = `
local W, X, K = KEYS[1], KEYS[2], KEYS[3]
local NOW, CUTOFF, MAX = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
${ENSURE_WINDOW}
local function id(seq) return int(seq) .. '-0' end

-- Registers the stream if it is new. Returns oldest, head, finished.
local function ensure() return ensureWindow(W, X, K) end

-- retainFrom (machines/server/retention.ts): the count bound and the age bound, whichever keeps less.
-- firstSeqAtOrAfter(cutoff) scans the retained entries from the oldest; with a monotonic clock it stops
-- at the first entry, so the oldest is read alone first: a batch of 128 read on every append was most of
-- an append's time in Redis (~600 us). Trims the stream to the result and stores it as the window's oldest.
local function evict(oldest, head)
  local byAge = head + 1
  if oldest <= head then
    local start, done, size = id(oldest), false, 1
    while not done do
      local batch = redis.call('XRANGE', X, start, '+', 'COUNT', size)
      for _, e in ipairs(batch) do
        if tonumber(e[2][2]) >= CUTOFF then
          byAge = seqOf(e[1])
          done = true
          break
        end
      end
      if #batch < size then done = true end
      if not done then start = id(seqOf(batch[#batch][1]) + 1) end
      size = 128
    end
  end
  local from = math.max(oldest, head - MAX + 1, byAge)
  if from > oldest then
    redis.call('XTRIM', X, 'MINID', id(from))
    redis.call('HSET', W, 'oldest', int(from))
  end
  return from
end
`;

/**
 * Appends (and answers: finishing ones) of one session that arrived together, in order, as one script:
 * each exactly as APPEND or APPEND_FINAL would, one report per stream to the other instances (a report
 * is a hint to re-read the stream, machines/server/instances.ts). KEYS: W and X of the first entry's
 * stream, K, the instance set, then W and X of each further stream. ARGV[4..6]: this instance, the inbox
 * prefix, the session; then for each entry: the KEYS index of its W (X follows), its stream, '1' when it
 * finishes the stream, the message. Returns seq and evicted per entry; seq -1 for an answer to a stream
 * that was finished already (nothing appended). The append, its eviction and its report are one script:
 * one round trip for all of them.
 */
const APPEND_BATCH = `${PRELUDE}${REPORT}
local out, streams = {}, {}
for i = 7, #ARGV, 4 do
  local k = tonumber(ARGV[i])
  W, X = KEYS[k], KEYS[k + 1]
  local final = ARGV[i + 2] == '1'
  local oldest, head, finished = ensure()
  if final and finished == 1 then
    out[#out + 1] = -1
    out[#out + 1] = 0
  else
    local seq = head + 1
    redis.call('XADD', X, id(seq), 'at', NOW, 'm', ARGV[i + 3])
    if final then redis.call('HSET', W, 'head', int(seq), 'finished', 1)
    else redis.call('HSET', W, 'head', int(seq)) end
    out[#out + 1] = seq
    out[#out + 1] = evict(oldest, seq) - oldest
    streams[ARGV[i + 1]] = true
  end
end
for stream in pairs(streams) do
  report(KEYS[4], NOW, ARGV[4], ARGV[5], { 'i', ARGV[4], 's', ARGV[6], 'n', stream })
end
return out
`;

const OPEN = `${PRELUDE}
ensure()
return 1
`;

/**
 * Evicts by age, then answers the window and (unless ARGV[4] is empty) the retained events after the
 * cursor ARGV[4], in one script: trimming and reading never interleave. Nil for an unknown stream.
 */
const READ = `${PRELUDE}
if redis.call('EXISTS', W) == 0 and redis.call('EXISTS', X) == 0 then return false end
local oldest, head, finished = ensure()
local from = evict(oldest, head)
local entries = redis.call('XRANGE', X, id(from), '+')
-- The window says from..head are kept. Entries missing from its start were lost outside the retention
-- rules (the stream key evicted or deleted): the window moves past them, so a cursor before them is
-- answered 410 with the exact count instead of being silently skipped.
local present = head + 1
if #entries > 0 then present = seqOf(entries[1][1]) end
if present > from then
  from = present
  redis.call('HSET', W, 'oldest', int(from))
end
local evicted = from - oldest
local after = tonumber(ARGV[4])
local ats, events = {}, {}
for _, e in ipairs(entries) do
  ats[#ats + 1] = e[2][2]
  local seq = seqOf(e[1])
  if after ~= nil and seq > after then
    events[#events + 1] = seq
    events[#events + 1] = e[2][4]
  end
end
return { from, head, finished, ats, events, evicted }
`;

/**
 * KEYS: the session's key set, its registry record, the record's stream entries. Deletes every key the
 * set names, then all three.
 */
const DROP = `
local keys = redis.call('SMEMBERS', KEYS[1])
for i = 1, #keys, 512 do
  redis.call('DEL', unpack(keys, i, math.min(i + 511, #keys)))
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return #keys
`;

const SCRIPTS = {
  mcpcAppendBatch: script(undefined, APPEND_BATCH),
  ...SHARED_SCRIPTS,
  mcpcOpen: script(3, OPEN),
  mcpcRead: script(3, READ),
  mcpcDrop: script(3, DROP),
};

type Client = RedisClientWith<typeof SCRIPTS>;

type ReadReply = [number, number, number, string[], (number | string)[], number];

/** An append (or an answer, `final`) waiting for its session's next batch (`APPEND_BATCH`). */
interface QueuedAppend {
  readonly stream: number;
  readonly final: boolean;
  readonly message: string;
  readonly done: (seq: number | undefined) => void;
  readonly failed: (error: unknown) => void;
}

/** Entries per script call at most: one script runs alone in Redis, so a long one holds everyone up. */
const BATCH_ENTRIES = 256;

/**
 * A durable event log on Redis (>= 6.2). Each stream is a Redis Stream whose entry ids are the event
 * sequence numbers (`<seq>-0`, written explicitly) and whose fields are the append time and the message;
 * its window (oldest, head, finished) is a hash beside it. Every operation is one Lua script, so an
 * append, its eviction and any read of the window and its events are atomic with respect to each other,
 * also across several server processes sharing the database. What is retained is `retainFrom`'s rule
 * (machines/server/retention.ts), evaluated inside the script against the clock value the script is
 * given; the contract suite checks that it agrees.
 *
 * Keys (P: `keyPrefix`, S: the session id, n: the stream number) all carry the hash tag `{S}`:
 * `P{S}:w:n` (window hash), `P{S}:x:n` (stream), `P{S}:keys` (set of the session's stream keys, for
 * `dropSession`), `P{S}:record` (the {@link SessionRecord}: whole, or its core) and `P{S}:streams` (the
 * record's stream entries, machines/server/shared-record.ts).
 *
 * How durable it is depends on the server. With `appendonly yes` and `appendfsync always`, nothing
 * acknowledged is lost to a crash of the Redis process or of the machine. With the default `everysec`, a
 * power loss can take the last second or two of writes, and so can a crash of the Redis process while
 * the disk is slow (Redis then postpones its AOF write for up to 2 s but keeps acknowledging).
 * Streams nobody touches are not aged (as with SQLite); `dropSession` removes a session's keys.
 */
export class RedisEventLog implements EventLog {
  readonly durable = true;
  readonly policy: RetentionPolicy;
  readonly shared: RedisSharedStore;
  private readonly client: Client;
  private readonly ready: Promise<unknown>;
  private readonly now: () => number;
  private readonly prefix: string;
  private closed = false;
  private observer: EventLogObserver | undefined;
  private readonly onError: ((error: unknown) => void) | undefined;
  /** Numbered in call order (`EventLog.ordersAppends`): every append goes through one queue. */
  readonly ordersAppends = true;
  /** Appends waiting for the batch under way to come back, per session, in call order. */
  private queued = new Map<string, QueuedAppend[]>();
  /** The batches under way (one script call per session): what arrives meanwhile goes in the next. */
  private draining: Promise<void> | undefined;

  constructor(options: RedisEventLogOptions) {
    this.policy = {
      maxEventsPerStream: options.maxEventsPerStream ?? DEFAULT_RETENTION_POLICY.maxEventsPerStream,
      retentionMs: options.retentionMs ?? DEFAULT_RETENTION_POLICY.retentionMs,
    };
    this.now = options.now ?? Date.now;
    this.prefix = options.keyPrefix ?? 'mcpc:';
    this.client = createRedisClient(options.url, SCRIPTS);
    // Without a listener an 'error' event (a dropped connection the client is retrying) would crash.
    const onError = options.onError;
    this.onError = onError;
    this.client.on('error', (error: unknown) => onError?.(error));
    this.ready = this.client.connect();
    // Surfaced by the first operation (or close), never as an unhandled rejection.
    this.ready.catch(() => {});
    const recordKey = (id: string) => this.key(id, 'record');
    this.shared = new RedisSharedStore(
      () => this.c(),
      this.prefix,
      recordKey,
      (id) => this.key(id, 'streams'),
      (id, stream) => this.streamKeys(id, stream),
      this.now,
      (error) => onError?.(error),
    );
  }

  setObserver(observer: EventLogObserver | undefined): void {
    this.observer = observer;
  }

  private reportEvicted(count: number, sessionId: string, stream: number): void {
    if (count <= 0) return;
    // The user's observer must not break the log: a throw here would leave a batch's appends unanswered.
    try {
      this.observer?.evicted(count, sessionId, stream);
    } catch (error) {
      this.onError?.(error);
    }
  }

  private async c(): Promise<Client> {
    await this.ready;
    return this.client;
  }

  private key(sessionId: string, suffix: string): string {
    return `${this.prefix}{${sessionId}}:${suffix}`;
  }

  private streamKeys(sessionId: string, stream: number): string[] {
    return [
      this.key(sessionId, `w:${stream}`),
      this.key(sessionId, `x:${stream}`),
      this.key(sessionId, 'keys'),
    ];
  }

  /** now, the age cutoff, the count bound: the arguments every stream script starts with. */
  private clock(): string[] {
    const now = this.now();
    const finite = (n: number, otherwise: number): number => (Number.isFinite(n) ? n : otherwise);
    return [
      String(now),
      String(finite(now - this.policy.retentionMs, -Number.MAX_VALUE)),
      String(finite(this.policy.maxEventsPerStream, Number.MAX_SAFE_INTEGER)),
    ];
  }

  async openStream(sessionId: string, stream: number): Promise<void> {
    await (await this.c()).mcpcOpen(this.streamKeys(sessionId, stream), this.clock());
  }

  /**
   * Queues an append (or an answer) of a session. Appends that arrive while a batch is under way go
   * together in the next: one script call per session, instead of one per event (bench: notifications/s).
   */
  private enqueue(sessionId: string, stream: number, final: boolean, message: JsonRpcMessage) {
    return new Promise<number | undefined>((done, failed) => {
      const entry = { stream, final, message: JSON.stringify(message), done, failed };
      const queue = this.queued.get(sessionId);
      if (queue) queue.push(entry);
      else this.queued.set(sessionId, [entry]);
      // drain() answers every entry itself; what escapes it must not become an unhandled rejection.
      this.draining ??= this.drain().catch((error: unknown) => this.onError?.(error));
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.queued.size > 0) {
        // Taken after the wait for the client: what is appended together (in one tick) goes in one batch.
        let client: Client | undefined;
        let failure: unknown;
        try {
          client = await this.c();
        } catch (error) {
          failure = error;
        }
        const sessions = this.queued;
        this.queued = new Map();
        if (!client) {
          for (const queue of sessions.values()) for (const e of queue) e.failed(failure);
          continue;
        }
        const calls: Promise<void>[] = [];
        for (const [sessionId, queue] of sessions) calls.push(this.appendChunks(client, sessionId, queue));
        await Promise.all(calls);
      }
    } finally {
      this.draining = undefined;
    }
  }

  /**
   * A session's queue, in chunks of BATCH_ENTRIES, one after another: once a chunk fails, the rest fail
   * unsent, so no event is stored after one of the session's that was lost.
   */
  private async appendChunks(client: Client, sessionId: string, queue: QueuedAppend[]): Promise<void> {
    for (let i = 0; i < queue.length; i += BATCH_ENTRIES) {
      const failure = await this.appendBatch(client, sessionId, queue.slice(i, i + BATCH_ENTRIES));
      if (failure !== undefined) {
        for (const e of queue.slice(i + BATCH_ENTRIES)) e.failed(failure.error);
        return;
      }
    }
  }

  /** One chunk in one script call; answers its entries, and returns the error if it failed. */
  private async appendBatch(
    client: Client,
    sessionId: string,
    entries: QueuedAppend[],
  ): Promise<{ error: unknown } | undefined> {
    const [first, x, k] = this.streamKeys(sessionId, (entries[0] as QueuedAppend).stream);
    const keys = [first as string, x as string, k as string, this.shared.instancesKey];
    const at = new Map<number, number>();
    const args = [...this.clock(), this.shared.instanceId, this.shared.inboxPrefix, sessionId];
    for (const e of entries) {
      let index = at.get(e.stream);
      if (index === undefined) {
        index = at.size === 0 ? 1 : keys.length + 1;
        if (at.size > 0)
          keys.push(this.key(sessionId, `w:${e.stream}`), this.key(sessionId, `x:${e.stream}`));
        at.set(e.stream, index);
      }
      args.push(String(index), String(e.stream), e.final ? '1' : '0', e.message);
    }
    let reply: number[];
    try {
      reply = ((await client.mcpcAppendBatch(keys, args)) as unknown[]).map(Number);
    } catch (error) {
      for (const e of entries) e.failed(error);
      return { error };
    }
    entries.forEach((e, i) => {
      const seq = reply[2 * i] as number;
      this.reportEvicted(reply[2 * i + 1] as number, sessionId, e.stream);
      e.done(seq < 0 ? undefined : seq);
    });
    return undefined;
  }

  async append(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number> {
    return (await this.enqueue(sessionId, stream, false, message)) as number;
  }

  async appendFinal(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number | undefined> {
    return this.enqueue(sessionId, stream, true, message);
  }

  private async readStream(
    sessionId: string,
    stream: number,
    afterSeq: number | undefined,
  ): Promise<{ events: StoredEvent[]; window: StreamWindow } | undefined> {
    const reply = (await (
      await this.c()
    ).mcpcRead(this.streamKeys(sessionId, stream), [
      ...this.clock(),
      afterSeq === undefined ? '' : String(afterSeq),
    ])) as ReadReply | null;
    if (reply === null) return undefined;
    const [oldest, head, finished, ats, flat, evicted] = reply;
    this.reportEvicted(Number(evicted), sessionId, stream);
    const events: StoredEvent[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      events.push({ seq: Number(flat[i]), message: JSON.parse(String(flat[i + 1])) as JsonRpcMessage });
    }
    return {
      events,
      window: {
        oldest: Number(oldest),
        head: Number(head),
        appendedAt: ats.map(Number),
        finished: finished === 1,
      },
    };
  }

  async window(sessionId: string, stream: number): Promise<StreamWindow | undefined> {
    return (await this.readStream(sessionId, stream, undefined))?.window;
  }

  async read(
    sessionId: string,
    stream: number,
    afterSeq: number,
  ): Promise<{ events: StoredEvent[]; window: StreamWindow } | undefined> {
    return this.readStream(sessionId, stream, afterSeq);
  }

  async dropSession(sessionId: string): Promise<void> {
    await (await this.c()).mcpcDrop(
      [this.key(sessionId, 'keys'), this.key(sessionId, 'record'), this.key(sessionId, 'streams')],
      [],
    );
  }

  /**
   * Waits for the commands in flight, then disconnects; a client still (re)connecting is destroyed and
   * its queued commands fail. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.shared.stopWatching();
    if (this.client.isReady) await this.client.close();
    else if (this.client.isOpen) this.client.destroy();
  }
}
