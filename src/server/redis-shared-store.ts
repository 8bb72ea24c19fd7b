import { randomBytes } from 'node:crypto';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { feedReaderWait } from '../../machines/server/deadlines.js';
import {
  joinSnapshot,
  numberedCore,
  REBASE_SPAN,
  type StreamEntry,
  type Watermark,
} from '../../machines/server/shared-record.js';
import type { LoadedSince, Rebased, SessionRecord, SharedSessionStore, StoreChange } from './event-log.js';
import type { RedisClientWith } from './redis-client.js';
import { ENSURE_WINDOW, script } from './redis-script.js';

/** Change reports kept in an inbox for an instance that falls behind; beyond that, its polling catches up. */
const INBOX_LENGTH = 10_000;
/** An inbox nobody wrote to for this long is dropped (its instance died without dropping its lease). */
const INBOX_IDLE_MS = 600_000;

/**
 * KEYS: the record hash, the entries hash. ARGV: the expected version, the record JSON, now. The record
 * is a hash of `v` (version), `json`, `t` (last touched) and, when `json` is a core with its streams
 * stored beside it (machines/server/shared-record.ts), `split` 1, `n` (next stream number) and `sa`
 * (standalone stream registered). It is written only over the version its writer read. This one writes
 * the whole record: the entries beside it go.
 */
const COMMIT = `
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', v + 1, 'json', ARGV[2], 't', ARGV[3], 'split', 0)
redis.call('DEL', KEYS[2])
return 1
`;

/**
 * KEYS: the record hash, the entries hash (stream number → entry JSON), the session's key set, then the
 * window hash and Redis Stream of each entry, in order. ARGV: the expected version, the core JSON, now,
 * next stream, standalone (1/0), the forget point, the core's settled facts (`rf`), then for a rebase
 * (else three ''): the request memory's capacity, the base's next stream, the session's key prefix; then
 * stream number, entry JSON, … The delta of shared-record.ts in one step: only the entries the decision
 * numbered are written, their streams are opened in the log, and the entries the forget point passed
 * (stored as `f`) are deleted. Replies 1 (written), 0 (a newer version: a plain conflict), or, when the
 * decision only admitted requests and may be rebased (`rebaseAdmissions` in shared-record.ts, which this
 * follows), {new version, the numbering it was rebased onto (n, f), the entries numbered since the base}.
 */
const COMMIT_ENTRIES = `${ENSURE_WINDOW}
local FIRST = 11
-- Entries of streams that fell behind the forget point go (request-memory.ts): the hash stays bounded.
local function forget(from, to)
  local gone = {}
  for n = math.max(from, 1), to - 1 do gone[#gone + 1] = tostring(n) end
  for i = 1, #gone, 512 do redis.call('HDEL', KEYS[2], unpack(gone, i, math.min(i + 511, #gone))) end
end

local function rebase(v)
  if ARGV[8] == '' then return 0 end
  local r = redis.call('HMGET', KEYS[1], 'split', 'n', 'sa', 'rf', 'f')
  if r[1] ~= '1' or r[3] ~= ARGV[5] or r[4] ~= ARGV[7] then return 0 end
  local from, to = tonumber(ARGV[9]), tonumber(r[2])
  if to < from or to - from > ${REBASE_SPAN} then return 0 end
  local mine = {}
  for i = FIRST, #ARGV, 2 do
    local e = cjson.decode(ARGV[i + 1])
    if e.kind ~= 'request' or tonumber(ARGV[i]) < from then return 0 end
    mine[e.requestKey] = true
  end
  local since = {}
  if to > from then
    local fields = {}
    for n = from, to - 1 do fields[#fields + 1] = tostring(n) end
    local values = redis.call('HMGET', KEYS[2], unpack(fields))
    for j, f in ipairs(fields) do
      if values[j] then
        local e = cjson.decode(values[j])
        -- The same request admitted elsewhere meanwhile: decided again, it is a duplicate there.
        if e.kind == 'request' and mine[e.requestKey] then return 0 end
        since[#since + 1] = f
        since[#since + 1] = values[j]
      end
    end
  end
  local nextStream = tonumber(ARGV[4]) - from + to
  local oldF = tonumber(r[5] or '1')
  local f = math.max(oldF, nextStream - tonumber(ARGV[8]))
  forget(oldF, f)
  -- The core stays: the numbering fields are the record's numbering (numberedCore puts them back).
  redis.call('HSET', KEYS[1], 'v', v + 1, 't', ARGV[3], 'n', int(nextStream), 'f', int(f))
  for i = FIRST, #ARGV, 2 do
    local n = int(tonumber(ARGV[i]) - from + to)
    redis.call('HSET', KEYS[2], n, ARGV[i + 1])
    ensureWindow(ARGV[10] .. 'w:' .. n, ARGV[10] .. 'x:' .. n, KEYS[3])
  end
  return { v + 1, to, oldF, since }
end

local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return rebase(v) end
if v > 0 and redis.call('HGET', KEYS[1], 'split') ~= '1' then
  -- Written whole (by \`commit\`, or a version without this layout): its streams move beside it, once.
  local whole = cjson.decode(redis.call('HGET', KEYS[1], 'json'))
  for n, entry in pairs(whole.snapshot.context.streams) do redis.call('HSET', KEYS[2], n, cjson.encode(entry)) end
end
forget(tonumber(redis.call('HGET', KEYS[1], 'f') or '1'), tonumber(ARGV[6]))
redis.call('HSET', KEYS[1], 'v', v + 1, 'json', ARGV[2], 't', ARGV[3], 'split', 1, 'n', ARGV[4], 'sa', ARGV[5],
  'f', ARGV[6], 'rf', ARGV[7])
for i = FIRST, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  local k = 4 + (i - FIRST)
  ensureWindow(KEYS[k], KEYS[k + 1], KEYS[3])
end
return 1
`;

/**
 * KEYS: the record hash, the entries hash. ARGV: the known version ('' none), the base's next stream
 * ('' : every entry), the base's standalone flag. Replies nil (gone), {v} (unchanged), or {v, json,
 * split, entries (flat: number, JSON, …), n, f}: the entries `entriesToRead` (shared-record.ts) names,
 * and the record's numbering (a rebase moves it without rewriting the core).
 */
const LOAD_SINCE = `
local r = redis.call('HMGET', KEYS[1], 'v', 'json', 'split', 'n', 'sa', 'f')
if not r[1] or not r[2] then return false end
if ARGV[1] ~= '' and r[1] == ARGV[1] then return { r[1] } end
if r[3] ~= '1' then return { r[1], r[2], 0, {} } end
if ARGV[2] == '' then return { r[1], r[2], 1, redis.call('HGETALL', KEYS[2]), r[4], r[6] or '1' } end
local fields = {}
if r[5] == '1' and ARGV[3] ~= '1' then fields[#fields + 1] = '0' end
for n = math.max(tonumber(ARGV[2]), 1), tonumber(r[4]) - 1 do fields[#fields + 1] = tostring(n) end
local entries = {}
for i = 1, #fields, 512 do
  local chunk = { unpack(fields, i, math.min(i + 511, #fields)) }
  local values = redis.call('HMGET', KEYS[2], unpack(chunk))
  for j, f in ipairs(chunk) do
    if values[j] then
      entries[#entries + 1] = f
      entries[#entries + 1] = values[j]
    end
  end
end
return { r[1], r[2], 1, entries, r[4], r[6] or '1' }
`;

/** KEYS: the record hash. ARGV: now. Touching a session that is gone must not bring a husk of it back. */
const TOUCH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 't', ARGV[1])
return 1
`;

/**
 * KEYS: the record hash. ARGV: now, the version the decision was made on. A decision that changed nothing
 * every instance must see is confirmed this way: 1 (and touched) when it was made on the stored version,
 * 0 when another instance moved on (or the session is gone). Version 0 with no record: a new session not
 * stored yet, confirmed without creating a husk.
 */
const CONFIRM = `
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[2]) then return 0 end
if v > 0 then redis.call('HSET', KEYS[1], 't', ARGV[1]) end
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
  mcpcCommit: script(2, COMMIT),
  mcpcCommitEntries: script(undefined, COMMIT_ENTRIES),
  mcpcLoadSince: script(2, LOAD_SINCE),
  mcpcTouch: script(1, TOUCH),
  mcpcConfirm: script(1, CONFIRM),
  mcpcBroadcast: script(1, BROADCAST),
  mcpcSend: script(1, SEND),
  mcpcLease: script(2, LEASE),
  mcpcUnlease: script(3, UNLEASE),
};
type Client = RedisClientWith<typeof SHARED_SCRIPTS>;

/** Stream entries from a script's flat reply: number, JSON, … */
function entriesOf(flat: readonly unknown[]): Array<[number, StreamEntry]> {
  const entries: Array<[number, StreamEntry]> = [];
  for (let i = 0; i < flat.length; i += 2) {
    entries.push([Number(flat[i]), JSON.parse(String(flat[i + 1])) as StreamEntry]);
  }
  return entries;
}

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
    private readonly entriesKey: (sessionId: string) => string,
    /** A stream's window hash, its Redis Stream and the session's key set (redis-event-log.ts). */
    private readonly streamKeys: (sessionId: string, stream: number) => string[],
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
      [this.recordKey(record.id), this.entriesKey(record.id)],
      [String(expectedVersion), JSON.stringify(record), String(this.now())],
    );
    return Number(reply) === 1;
  }

  async commitEntries(
    core: SessionRecord,
    entries: ReadonlyArray<readonly [number, StreamEntry]>,
    watermark: Watermark,
    expectedVersion: number,
    facts = '',
    rebase?: { readonly base: Watermark; readonly capacity: number },
  ): Promise<boolean | Rebased> {
    const c = await this.client();
    const args = [
      String(expectedVersion),
      JSON.stringify(core),
      String(this.now()),
      String(watermark.nextStream),
      watermark.standalone ? '1' : '0',
      String(watermark.forgottenBelow ?? 1),
      facts,
      rebase ? String(rebase.capacity) : '',
      rebase ? String(rebase.base.nextStream) : '',
      rebase ? this.sessionKeyPrefix(core.id) : '',
    ];
    const keys = [
      this.recordKey(core.id),
      this.entriesKey(core.id),
      this.streamKeys(core.id, 0)[2] as string,
    ];
    for (const [n, entry] of entries) {
      args.push(String(n), JSON.stringify(entry));
      const [window, stream] = this.streamKeys(core.id, n);
      keys.push(window as string, stream as string);
    }
    const reply = (await c.mcpcCommitEntries(keys, args)) as number | [number, number, number, string[]];
    if (!Array.isArray(reply)) return Number(reply) === 1;
    const [version, nextStream, forgottenBelow, flat] = reply;
    return {
      kind: 'rebased',
      version: Number(version),
      onto: { nextStream: Number(nextStream), forgottenBelow: Number(forgottenBelow) },
      since: entriesOf(flat),
    };
  }

  /**
   * What a session's keys start with: a rebase opens streams whose numbers the script picks, so it names
   * their keys itself (all of one session's keys share its hash tag, so they stay in one slot).
   */
  private sessionKeyPrefix(id: string): string {
    const window = this.streamKeys(id, 0)[0] as string;
    return window.slice(0, window.length - 'w:0'.length);
  }

  async confirm(id: string, version: number): Promise<boolean> {
    const reply = await (await this.client()).mcpcConfirm(
      [this.recordKey(id)],
      [String(this.now()), String(version)],
    );
    return Number(reply) === 1;
  }

  async load(id: string): Promise<{ record: SessionRecord; version: number } | undefined> {
    const loaded = await this.loadSince(id, -1, undefined);
    if (!loaded?.record) return undefined;
    const { record, entries } = loaded;
    return {
      record: entries ? { ...record, snapshot: joinSnapshot(record.snapshot, entries) } : record,
      version: loaded.version,
    };
  }

  async loadSince(
    id: string,
    knownVersion: number,
    base: Watermark | undefined,
  ): Promise<LoadedSince | undefined> {
    const reply = (await (
      await this.client()
    ).mcpcLoadSince(
      [this.recordKey(id), this.entriesKey(id)],
      [
        knownVersion < 0 ? '' : String(knownVersion),
        base === undefined ? '' : String(base.nextStream),
        base?.standalone ? '1' : '0',
      ],
    )) as [string, string?, number?, string[]?, string?, string?] | null;
    if (reply === null) return undefined;
    const version = Number(reply[0]);
    if (reply[1] === undefined) return { version };
    const record = JSON.parse(reply[1]) as SessionRecord;
    if (Number(reply[2]) !== 1) return { version, record };
    // A rebase moves the numbering without rewriting the core: the record's fields are the numbering.
    const numbering = { nextStream: Number(reply[4]), forgottenBelow: Number(reply[5] ?? 1) };
    return {
      version,
      record: { ...record, snapshot: numberedCore(record.snapshot, numbering) },
      entries: entriesOf(reply[3] ?? []),
    };
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
            { BLOCK: feedReaderWait(false).ms, COUNT: 500 },
          )) as FeedReply | null;
        } catch (error) {
          if (stopped) return;
          // Redis restarting, say: the client reconnects by itself; look again after the pause decided.
          this.onError(error);
          await new Promise((resolve) => setTimeout(resolve, feedReaderWait(true).ms));
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
