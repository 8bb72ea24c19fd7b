import {
  declaresContinuity,
  ListenMeta,
  type ListenMissedReport,
  MAX_POSITION_LENGTH,
} from '../continuity-extension.js';
import type { JsonRpcMessage } from '../jsonrpc.js';
import { ACKNOWLEDGED_METHOD, LISTEN_METHOD } from '../listen-wire.js';

/**
 * The change log behind the continuity extension's `subscriptions/listen` part (docs/continuity-extension.md
 * §12): every change the endpoint publishes gets the next sequence number, each listen stream that declared
 * the extension carries the positions, and a re-open that says where its predecessor stopped is told exactly
 * how many changes its filter accepts were published in between, when the log still holds them all.
 *
 * Decisions, all here (the runtime's bus, `src/server/modern/positioned-bus.ts`, and the simulated world
 * call these and nothing else):
 * - A stream's position starts at the log's head AT THE MOMENT IT SUBSCRIBED, not when its request arrived:
 *   a change published in between is neither on the new stream nor before the head, so counting from the
 *   request's arrival would lose it without a word.
 * - `missed` is vouched for only when the position is this log's (its epoch: another instance or a restart
 *   has another) and no change after it has been evicted; otherwise nothing is said and the client reports
 *   a gap of unknown size, as without the extension. A count is never a guess.
 * - Nothing is replayed: re-listing is the recovery; the count says whether it is needed and for what.
 */

/** The four change events the v2 SDK's bus carries (its `ServerEvent` kinds). */
export type ChangeKind =
  | 'tools_list_changed'
  | 'prompts_list_changed'
  | 'resources_list_changed'
  | 'resource_updated';

/** A change as published: its kind, and the resource for `resource_updated`. */
export interface ChangeFacts {
  readonly kind: ChangeKind;
  readonly uri?: string;
}

/** One change the log holds. */
export interface ListenChange extends ChangeFacts {
  readonly seq: number;
  /** When it was published (the clock the limits are in). */
  readonly at: number;
}

export interface ListenLog {
  /** Names this log: a position from another log (another instance, an earlier run) is not comparable. */
  readonly epoch: string;
  /** The newest change's sequence number; 0 before the first. */
  head: number;
  /** The changes still held, oldest first, with consecutive sequence numbers. */
  readonly changes: ListenChange[];
}

export interface ListenLogLimits {
  /** Each change is held at least this long after it was published, for a count to be vouched for. */
  readonly retentionMs: number;
  /** At most this many changes are held; the oldest go first (a re-open from before them: unknown). */
  readonly maxChanges: number;
}

export const DEFAULT_LISTEN_LOG_LIMITS: ListenLogLimits = { retentionMs: 600_000, maxChanges: 10_000 };

/**
 * The limits an application's partial setting gives: each value a whole number ≥ 0, or the default (an
 * `undefined`, a NaN or a negative would otherwise turn eviction off and let the log grow without bound).
 */
export function listenLogLimits(partial: Partial<ListenLogLimits> | undefined): ListenLogLimits {
  const pick = (v: number | undefined, fallback: number) =>
    typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : fallback;
  return {
    retentionMs: pick(partial?.retentionMs, DEFAULT_LISTEN_LOG_LIMITS.retentionMs),
    maxChanges: pick(partial?.maxChanges, DEFAULT_LISTEN_LOG_LIMITS.maxChanges),
  };
}

/** The filter of the v2 SDK's `subscriptions/listen` (the spec's `SubscriptionFilter`), as honored. */
export interface ListenFilter {
  readonly toolsListChanged?: boolean;
  readonly promptsListChanged?: boolean;
  readonly resourcesListChanged?: boolean;
  readonly resourceSubscriptions?: readonly string[];
}

export function createListenLog(epoch: string): ListenLog {
  return { epoch, head: 0, changes: [] };
}

/** Drops what the limits no longer keep: past `retentionMs`, or beyond `maxChanges`, oldest first. */
export function expireChanges(log: ListenLog, now: number, limits: ListenLogLimits): void {
  let drop = Math.max(0, log.changes.length - limits.maxChanges);
  while (drop < log.changes.length && now - (log.changes[drop] as ListenChange).at > limits.retentionMs)
    drop++;
  if (drop > 0) log.changes.splice(0, drop);
}

/** Appends a published change; returns its sequence number. */
export function recordChange(
  log: ListenLog,
  change: ChangeFacts,
  at: number,
  limits: ListenLogLimits,
): number {
  log.head += 1;
  log.changes.push({
    seq: log.head,
    at,
    kind: change.kind,
    ...(change.uri !== undefined ? { uri: change.uri } : {}),
  });
  expireChanges(log, at, limits);
  return log.head;
}

/** The opaque position of sequence number `seq` in this log. */
export function positionOf(log: ListenLog, seq: number): string {
  return `${log.epoch}.${seq}`;
}

/** The sequence number a position names in this log; `undefined` when it is another log's, or malformed. */
export function seqOf(log: ListenLog, position: unknown): number | undefined {
  if (typeof position !== 'string' || position.length > MAX_POSITION_LENGTH) return undefined;
  const dot = position.lastIndexOf('.');
  if (dot < 0 || position.slice(0, dot) !== log.epoch) return undefined;
  const digits = position.slice(dot + 1);
  if (!/^(0|[1-9][0-9]{0,15})$/.test(digits)) return undefined;
  const seq = Number(digits);
  return seq <= log.head ? seq : undefined;
}

/** Whether a filter accepts a change: the same rule as the v2 SDK's listen router (`listenFilterAccepts`). */
export function changeAccepted(filter: ListenFilter, change: ChangeFacts): boolean {
  return filterAccepts(compileFilter(filter), change);
}

/**
 * A filter read once for many look-ups: its resource URIs in a set. A re-open checks every held change
 * against its filter; with the URIs in an array that is changes × URIs (10,000 × 100,000 blocked the
 * event loop for seconds), with a set it is changes + URIs.
 */
export interface CompiledFilter {
  readonly filter: ListenFilter;
  readonly uris: ReadonlySet<string>;
}

export function compileFilter(filter: ListenFilter): CompiledFilter {
  const uris = Array.isArray(filter.resourceSubscriptions) ? filter.resourceSubscriptions : [];
  return { filter, uris: new Set(uris) };
}

/** `changeAccepted` on a compiled filter: constant time per change. */
export function filterAccepts(compiled: CompiledFilter, change: ChangeFacts): boolean {
  const { filter } = compiled;
  switch (change.kind) {
    case 'tools_list_changed':
      return filter.toolsListChanged === true;
    case 'prompts_list_changed':
      return filter.promptsListChanged === true;
    case 'resources_list_changed':
      return filter.resourcesListChanged === true;
    case 'resource_updated':
      return change.uri !== undefined && compiled.uris.has(change.uri);
  }
}

/** What a change tells the client to re-list: `tools`, `prompts`, `resources`, `resource:<uri>`. */
export function relistItemOf(change: ChangeFacts): string {
  switch (change.kind) {
    case 'tools_list_changed':
      return 'tools';
    case 'prompts_list_changed':
      return 'prompts';
    case 'resources_list_changed':
      return 'resources';
    case 'resource_updated':
      return `resource:${change.uri ?? ''}`;
  }
}

/**
 * What a re-open missed: the changes its filter accepts after `lastPosition` up to `subscribedAt` (the head
 * when the new stream subscribed; later ones are on it). `undefined` when the log cannot vouch: the
 * position is not its own, is ahead of the subscription, or changes after it were evicted.
 */
export function missedSince(
  log: ListenLog,
  lastPosition: unknown,
  subscribedAt: number,
  filter: ListenFilter,
  now: number,
  limits: ListenLogLimits,
): ListenMissedReport | undefined {
  expireChanges(log, now, limits);
  const last = seqOf(log, lastPosition);
  if (last === undefined || last > subscribedAt) return undefined;
  const firstHeld = log.changes[0]?.seq ?? log.head + 1;
  if (last < firstHeld - 1) return undefined;
  // Linear in the held changes and the filter: the filter's URIs and the re-list items are sets (the
  // re-list keeps its first-seen order: a Set iterates in insertion order).
  const compiled = compileFilter(filter);
  let count = 0;
  const relist = new Set<string>();
  // The changes are held oldest first with consecutive numbers: the first after `last` is found by index.
  const start = Math.max(0, last + 1 - firstHeld);
  for (let i = start; i < log.changes.length; i++) {
    const change = log.changes[i] as ListenChange;
    if (change.seq <= last) continue;
    if (change.seq > subscribedAt) break;
    if (!filterAccepts(compiled, change)) continue;
    count++;
    relist.add(relistItemOf(change));
  }
  return { count, relist: [...relist] };
}

/** A change event's params with its position added to `_meta` (the SDK forwards them onto the notification). */
export function positionedParams(
  params: Record<string, unknown> | undefined,
  position: string,
): Record<string, unknown> {
  const meta = params?._meta;
  const others = typeof meta === 'object' && meta !== null ? (meta as Record<string, unknown>) : {};
  return { ...params, _meta: { ...others, [ListenMeta.position]: position } };
}

/** A change event as the v2 SDK's bus carries it, as far as the log reads it. */
export interface PublishedEvent extends ChangeFacts {
  readonly params?: Record<string, unknown>;
}

/**
 * What publishing a change does (the runtime's bus, and the simulated world, call this): records it, and
 * gives the params a listener served positions gets (the SDK forwards them onto the notification); a
 * listener without positions gets the event as published.
 */
export function publishChange(
  log: ListenLog,
  event: PublishedEvent,
  at: number,
  limits: ListenLogLimits,
): { readonly seq: number; readonly positionedParams: Record<string, unknown> } {
  const seq = recordChange(
    log,
    { kind: event.kind, ...(event.kind === 'resource_updated' ? { uri: event.uri } : {}) },
    at,
    limits,
  );
  return { seq, positionedParams: positionedParams(event.params, positionOf(log, seq)) };
}

/**
 * What the bus decides when the SDK's listen router subscribes a stream, while serving `attempt` (or outside
 * any listen request: `undefined`): the stream starts at the head NOW (a change published since its request
 * arrived is before it, so `missed` counts it), and it is served positions only if its request declared the
 * extension.
 */
export function streamSubscribed(
  log: ListenLog,
  attempt: Pick<ListenAttemptFacts, 'positions'> | undefined,
): { readonly subscribedAt: number; readonly positions: boolean } {
  return { subscribedAt: log.head, positions: attempt?.positions === true };
}

/** What the endpoint knows of one listen request when its acknowledgement passes. */
export interface ListenAttemptFacts {
  /** The request declared the extension in its client capabilities: positions are served. */
  readonly positions: boolean;
  /** `_meta[lastPosition]` of the request, as sent (a re-open); absent on a first listen. */
  readonly lastPosition?: unknown;
  /** The log's head when the SDK's listen router subscribed this stream; absent if it never did. */
  readonly subscribedAt?: number;
}

/**
 * What a request tells the endpoint before it is served, when it is a `subscriptions/listen` request
 * (`undefined` for any other message: it is served without the log).
 */
export function listenAttemptOf(body: unknown): Omit<ListenAttemptFacts, 'subscribedAt'> | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const message = body as { method?: unknown; id?: unknown; params?: unknown };
  if (message.method !== LISTEN_METHOD || message.id === undefined) return undefined;
  const params = message.params;
  const meta = (params as { _meta?: unknown } | undefined)?._meta;
  const hasLast = typeof meta === 'object' && meta !== null && ListenMeta.lastPosition in meta;
  return {
    positions: declaresContinuity(params),
    ...(hasLast ? { lastPosition: (meta as Record<string, unknown>)[ListenMeta.lastPosition] } : {}),
  };
}

/**
 * The first message of a listen stream as the client gets it. When it is the acknowledgement and the client
 * declared the extension: with its position (the head when the stream subscribed; a stream that never
 * subscribed, an empty filter, delivers nothing, so the head now) and, on a re-open, `missed` when the log
 * vouches for it. Anything else passes unchanged.
 */
export function positionedAck(
  message: JsonRpcMessage,
  attempt: ListenAttemptFacts,
  log: ListenLog,
  now: number,
  limits: ListenLogLimits,
): JsonRpcMessage {
  if (!attempt.positions || !('method' in message) || message.method !== ACKNOWLEDGED_METHOD) return message;
  const ack = message;
  const params = (ack.params ?? {}) as Record<string, unknown>;
  const filter = (params.notifications ?? {}) as ListenFilter;
  const at = attempt.subscribedAt ?? log.head;
  const missed =
    attempt.lastPosition !== undefined
      ? missedSince(log, attempt.lastPosition, at, filter, now, limits)
      : undefined;
  const withPosition = positionedParams(params, positionOf(log, at));
  const meta = withPosition._meta as Record<string, unknown>;
  return {
    ...ack,
    params: { ...withPosition, _meta: missed ? { ...meta, [ListenMeta.missed]: missed } : meta },
  };
}
