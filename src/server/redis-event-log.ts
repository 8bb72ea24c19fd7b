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
 * The append scripts also take KEYS[4], the instance set, and ARGV[5..8]: this instance, the inbox prefix,
 * the session and the stream. The append, its eviction and its report to the other instances are one
 * script: one round trip.
 */
const APPENDED = `${REPORT}
local function reportAppended()
  report(KEYS[4], NOW, ARGV[5], ARGV[6], { 'i', ARGV[5], 's', ARGV[7], 'n', ARGV[8] })
end
`;

const APPEND = `${PRELUDE}${APPENDED}
local oldest, head = ensure()
local seq = head + 1
redis.call('XADD', X, id(seq), 'at', NOW, 'm', ARGV[4])
redis.call('HSET', W, 'head', int(seq))
local evicted = evict(oldest, seq) - oldest
reportAppended()
return { seq, evicted }
`;

/** Appends ARGV[4] and finishes the stream, unless it is finished: then nil (the answer was written). */
const APPEND_FINAL = `${PRELUDE}${APPENDED}
local oldest, head, finished = ensure()
if finished == 1 then return false end
local seq = head + 1
redis.call('XADD', X, id(seq), 'at', NOW, 'm', ARGV[4])
redis.call('HSET', W, 'head', int(seq), 'finished', 1)
local evicted = evict(oldest, seq) - oldest
reportAppended()
return { seq, evicted }
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
  mcpcAppend: script(4, APPEND),
  mcpcAppendFinal: script(4, APPEND_FINAL),
  ...SHARED_SCRIPTS,
  mcpcOpen: script(3, OPEN),
  mcpcRead: script(3, READ),
  mcpcDrop: script(3, DROP),
};

type Client = RedisClientWith<typeof SCRIPTS>;

type ReadReply = [number, number, number, string[], (number | string)[], number];

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
    if (count > 0) this.observer?.evicted(count, sessionId, stream);
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

  /** Keys and arguments of the append scripts: the stream's keys and clock, the message, the report's. */
  private appendArgs(sessionId: string, stream: number, message: JsonRpcMessage): [string[], string[]] {
    return [
      [...this.streamKeys(sessionId, stream), this.shared.instancesKey],
      [
        ...this.clock(),
        JSON.stringify(message),
        this.shared.instanceId,
        this.shared.inboxPrefix,
        sessionId,
        String(stream),
      ],
    ];
  }

  async append(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number> {
    const reply = await (await this.c()).mcpcAppend(...this.appendArgs(sessionId, stream, message));
    const [seq, evicted] = reply as [number, number];
    this.reportEvicted(Number(evicted), sessionId, stream);
    return Number(seq);
  }

  async appendFinal(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number | undefined> {
    const reply = await (await this.c()).mcpcAppendFinal(...this.appendArgs(sessionId, stream, message));
    if (reply === null) return undefined;
    const [seq, evicted] = reply as [number, number];
    this.reportEvicted(Number(evicted), sessionId, stream);
    return Number(seq);
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
