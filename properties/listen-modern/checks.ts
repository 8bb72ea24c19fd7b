import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { SUBSCRIPTION_ID_META_KEY } from '../../machines/listen-wire.js';
import { CHANGE_TAG, type ListenWorldOutcome, type PublishFact, type StreamFact } from './facts.js';
import type { ListenWorldConfig } from './schedule.js';

/**
 * The oracle of the listen world: judged from world facts only (what was published when, which stream
 * subscribed when and whose acknowledgement reached the client, what the application was given), never
 * with the listen log's functions. The rules it encodes are the spec's (docs/continuity-extension.md §12):
 *
 * - The application's subscription starts where the stream of its first acknowledgement subscribed; every
 *   change its filter accepts after that is owed to it.
 * - A change owed and never delivered is ATTRIBUTED to the first stream that subscribed after it was
 *   published and whose acknowledgement reached the client: that re-open's gap is where it was missed.
 */
export const LISTEN_CHECKS = [
  'exactness',
  'no silent loss',
  'exact whenever it can be',
  'one ack, one id, nothing twice',
  'settles',
] as const;
export type ListenCheckName = (typeof LISTEN_CHECKS)[number];
export type ListenVerdict = Partial<Record<ListenCheckName, string[]>>;

/** Why a gap could not be exact (world facts): empty when the server could have vouched for a count. */
export type UnknownReason =
  | 'no extension'
  | 'no position'
  | 'restart'
  | 'evicted by count'
  | 'evicted by time';

/** The spec's filter rule, written here independently of the log's. */
export function acceptedBy(filter: ListenWorldConfig['filter'], p: PublishFact): boolean {
  switch (p.kind) {
    case 'tools_list_changed':
      return filter.toolsListChanged === true;
    case 'prompts_list_changed':
      return filter.promptsListChanged === true;
    case 'resources_list_changed':
      return filter.resourcesListChanged === true;
    case 'resource_updated':
      return (filter.resourceSubscriptions ?? []).includes(p.uri ?? '');
  }
}

/** What a change asks the application to re-list, as the spec names it. */
export function itemOf(p: PublishFact): string {
  switch (p.kind) {
    case 'tools_list_changed':
      return 'tools';
    case 'prompts_list_changed':
      return 'prompts';
    case 'resources_list_changed':
      return 'resources';
    case 'resource_updated':
      return `resource:${p.uri ?? ''}`;
  }
}

function allItems(filter: ListenWorldConfig['filter']): string[] {
  return [
    ...(filter.toolsListChanged ? ['tools'] : []),
    ...(filter.promptsListChanged ? ['prompts'] : []),
    ...(filter.resourcesListChanged ? ['resources'] : []),
    ...(filter.resourceSubscriptions ?? []).map((u) => `resource:${u}`),
  ];
}

/**
 * Why the re-open `s` cannot be told an exact count: the server it reached does not serve the listen part,
 * the client had no position, its position is from
 * another server run, or a change after it was gone from the log when the ack was written (the log holds
 * each change `retentionMs` and the newest `maxChanges`).
 */
export function unknownReasons(o: ListenWorldOutcome, s: StreamFact): UnknownReason[] {
  if (s.extension !== true) return ['no extension'];
  const last = s.lastPointAtSend;
  if (last === undefined) return ['no position'];
  if (last.run !== s.run) return ['restart'];
  const head = s.subscribePoint ?? 0;
  const next = o.publishes.find((p) => p.run === s.run && p.index === last.point + 1);
  if (next === undefined || next.index > head) return [];
  const reasons: UnknownReason[] = [];
  if (head - next.index >= o.config.limits.maxChanges) reasons.push('evicted by count');
  if ((s.ackAt ?? 0) - next.at > o.config.limits.retentionMs) reasons.push('evicted by time');
  return reasons;
}

const sameSet = (a: readonly string[], b: readonly string[]) =>
  new Set(a).size === new Set(b).size && [...new Set(a)].every((x) => b.includes(x));

function metaOf(m: JsonRpcMessage): Record<string, unknown> | undefined {
  if ('method' in m) return (m.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  return 'result' in m ? (m.result._meta as Record<string, unknown> | undefined) : undefined;
}

/** The attribution of every owed change the application never got: change id → stream n (or none). */
export function attribution(o: ListenWorldOutcome): {
  undelivered: PublishFact[];
  streamOf: Map<number, number | undefined>;
  received: number[];
} {
  const first = o.streams.find((s) => s.ackOrder === 1);
  const received: number[] = [];
  for (const m of o.delivered) {
    const tag = metaOf(m)?.[CHANGE_TAG];
    if (typeof tag === 'number') received.push(tag);
  }
  const got = new Set(received);
  const owed = first
    ? o.publishes.filter((p) => p.order > (first.subscribedOrder ?? 0) && acceptedBy(o.config.filter, p))
    : [];
  const undelivered = owed.filter((p) => !got.has(p.id));
  const acked = o.streams
    .filter((s) => s.ackDelivered)
    .sort((a, b) => (a.subscribedOrder ?? 0) - (b.subscribedOrder ?? 0));
  const streamOf = new Map<number, number | undefined>();
  for (const p of undelivered) streamOf.set(p.id, acked.find((s) => (s.subscribedOrder ?? 0) > p.order)?.n);
  return { undelivered, streamOf, received };
}

export function judgeListen(o: ListenWorldOutcome): ListenVerdict {
  const verdict: ListenVerdict = {};
  const fail = (name: ListenCheckName, why: string) => {
    const list = verdict[name] ?? [];
    list.push(why);
    verdict[name] = list;
  };
  if (!o.settled) fail('settles', 'the client was not acknowledged again and idle within the settle bound');
  for (const a of o.anomalies) fail('exactness', a);

  const { undelivered, streamOf, received } = attribution(o);
  const byStream = new Map(o.streams.map((s) => [s.n, s]));
  const all = allItems(o.config.filter);

  // 1 and 3: each gap against the changes attributed to its stream.
  const gapStreams = new Set<number>();
  for (const gap of o.gaps) {
    const s = byStream.get(gap.stream);
    if (s === undefined) {
      fail('exactness', `a gap reported outside any stream's delivery`);
      continue;
    }
    gapStreams.add(s.n);
    const mine = undelivered.filter((p) => streamOf.get(p.id) === s.n);
    const items = [...new Set(mine.map(itemOf))];
    const reasons = unknownReasons(o, s);
    const tag = `gap at stream ${s.n} (${JSON.stringify(gap.missed)}, relist ${JSON.stringify(gap.relist)})`;
    if (gap.missed.kind === 'exact') {
      if (gap.missed.count !== mine.length)
        fail('exactness', `${tag}: ${mine.length} change(s) missed there (ids ${mine.map((p) => p.id)})`);
      if (!sameSet(gap.relist, items))
        fail('exactness', `${tag}: the missed types are ${JSON.stringify(items)}`);
      if (reasons.length > 0) fail('exactness', `${tag}: vouched for though ${reasons.join(', ')}`);
      if (gap.missed.count === 0 && (gap.relistEvents.length > 0 || gap.synthesized.length > 0))
        fail('exactness', `${tag}: a count of 0 re-listed or synthesized something`);
    } else {
      if (!sameSet(gap.relist, all)) fail('no silent loss', `${tag}: unknown, but not everything re-listed`);
      if (reasons.length === 0)
        fail('exact whenever it can be', `${tag}: unknown, though the server could vouch for a count`);
    }
    if (
      gap.relist.length > 0 &&
      !(gap.relistEvents.length === 1 && sameSet(gap.relistEvents[0] ?? [], gap.relist))
    )
      fail('exactness', `${tag}: listen.relist was ${JSON.stringify(gap.relistEvents)}`);
    if (!sameSet(gap.synthesized, gap.relist) || gap.synthesized.length !== gap.relist.length)
      fail('exactness', `${tag}: synthesized ${JSON.stringify(gap.synthesized)}`);
  }

  // 2: every owed change the application never got is covered by a gap where it was missed.
  for (const p of undelivered) {
    const n = streamOf.get(p.id);
    if (n === undefined)
      fail('no silent loss', `change ${p.id} (${itemOf(p)}) never delivered, no later stream`);
    else if (!gapStreams.has(n))
      fail('no silent loss', `change ${p.id} (${itemOf(p)}) missed before stream ${n}, no gap`);
  }

  // 4: the application's view.
  const acks = o.delivered.filter(
    (m) => 'method' in m && m.method === 'notifications/subscriptions/acknowledged',
  );
  if (acks.length !== 1) fail('one ack, one id, nothing twice', `${acks.length} acknowledgements delivered`);
  for (const m of o.delivered) {
    const id = metaOf(m)?.[SUBSCRIPTION_ID_META_KEY];
    if (id !== o.firstId || (!('method' in m) && m.id !== o.firstId))
      fail('one ack, one id, nothing twice', `delivered under ${JSON.stringify(id)}: ${JSON.stringify(m)}`);
  }
  const seen = new Set<number>();
  let lastOrder = 0;
  for (const id of received) {
    if (seen.has(id)) fail('one ack, one id, nothing twice', `change ${id} delivered twice`);
    seen.add(id);
    const order = o.publishes.find((p) => p.id === id)?.order ?? 0;
    if (order < lastOrder) fail('one ack, one id, nothing twice', `change ${id} delivered out of order`);
    lastOrder = order;
  }
  return verdict;
}

export function describeListenVerdict(v: ListenVerdict, max = 4): string {
  return Object.entries(v)
    .map(([name, why]) => `${name}:\n    ${(why ?? []).slice(0, max).join('\n    ')}`)
    .join('\n');
}
