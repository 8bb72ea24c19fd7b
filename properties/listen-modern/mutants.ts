import { assign } from 'xstate';
import type { IoEvent } from '../../machines/client/io.js';
import {
  type ListenContext,
  type ListenEmitted,
  listenMachine,
  relistOf,
  reopenId,
} from '../../machines/client/listen.machine.js';
import { ListenMeta } from '../../machines/continuity-extension.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { ACKNOWLEDGED_METHOD } from '../../machines/listen-wire.js';
import {
  expireChanges,
  type ListenAttemptFacts,
  type ListenLog,
  type ListenLogLimits,
  positionedAck,
  positionOf,
  seqOf,
  streamSubscribed,
} from '../../machines/server/listen-log.js';
import type { ListenCheckName } from './checks.js';
import { CHANGES, type ListenWorldConfig } from './schedule.js';
import { type ListenServerDecisions, RUNTIME_LISTEN_DECISIONS } from './server.js';
import type { ListenVariant } from './world.js';

/**
 * Deliberately wrong variants of the listen part's decisions, each swapped in through a seam the runtime
 * itself uses: the server's decisions record (the functions `PositionedEventBus` and the endpoint's ack
 * rewrite call), `provide` on `listenMachine`, or what the client machine reads / tells the application
 * (the exchange actor and the emitted events the runtime relays). The listen properties must catch each.
 */
export interface ListenMutant {
  readonly name: string;
  /** The decision it breaks. */
  readonly branch: string;
  readonly variant: ListenVariant;
  /** The properties expected to catch it (documentation: the test prints which did). */
  readonly caughtBy: readonly ListenCheckName[];
}

type Ack = ListenServerDecisions['ack'];

/** The ack rewrite, told a different last position (how the wrong `missedSince` variants are made). */
const ackFrom =
  (
    lastPosition: (
      attempt: ListenAttemptFacts,
      log: ListenLog,
      now: number,
      limits: ListenLogLimits,
    ) => unknown,
  ): Ack =>
  (message, attempt, log, now, limits) =>
    positionedAck(
      message,
      attempt.lastPosition === undefined
        ? attempt
        : { ...attempt, lastPosition: lastPosition(attempt, log, now, limits) },
      log,
      now,
      limits,
    );

const server = (ack: Ack): ListenVariant => ({ server: { ...RUNTIME_LISTEN_DECISIONS, ack } });

const everyChangeFilter = {
  toolsListChanged: true,
  promptsListChanged: true,
  resourcesListChanged: true,
  resourceSubscriptions: CHANGES.flatMap((c) => ('uri' in c ? [c.uri] : [])),
};

/**
 * An ack whose `missed` is counted over every change, not the honoured filter's; with `keepRelist` only its
 * count is (its relist is still the filter's: nothing for the client to reject).
 */
const ackIgnoringFilter =
  (keepRelist: boolean): Ack =>
  (message, attempt, log, now, limits) => {
    const real = positionedAck(message, attempt, log, now, limits);
    if (!('method' in message) || message.method !== ACKNOWLEDGED_METHOD) return real;
    const wide = positionedAck(
      { ...message, params: { ...message.params, notifications: everyChangeFilter } },
      attempt,
      log,
      now,
      limits,
    ) as unknown as { params: { _meta: Record<string, unknown> } };
    const r = real as unknown as { params: { _meta: Record<string, unknown> } };
    const meta = { ...r.params._meta };
    const wrong = wide.params._meta[ListenMeta.missed] as { count: number; relist: string[] } | undefined;
    const right = meta[ListenMeta.missed] as { count: number; relist: string[] } | undefined;
    if (wrong !== undefined)
      meta[ListenMeta.missed] =
        keepRelist && right !== undefined && right.relist.length > 0
          ? { ...right, count: wrong.count }
          : wrong;
    return { ...real, params: { ...r.params, _meta: meta } } as JsonRpcMessage;
  };

/** Strips the position off every change notification the client machine reads (the ack keeps its own). */
const onlyAckPositions = (event: IoEvent): IoEvent => {
  if (event.type !== 'sse.events') return event;
  return {
    ...event,
    events: event.events.map((e) => {
      const m = e.message;
      if (m === undefined || !('method' in m) || m.method === ACKNOWLEDGED_METHOD) return e;
      const meta = { ...((m.params?._meta ?? {}) as Record<string, unknown>) };
      delete meta[ListenMeta.position];
      return { ...e, message: { ...m, params: { ...m.params, _meta: meta } } };
    }),
  };
};

/** The application told to re-list everything even when the count named what changed. */
const relistEverything = (e: ListenEmitted, config: ListenWorldConfig): ListenEmitted => {
  if (e.type === 'listen.gap' && e.gap.missed.kind === 'exact')
    return { ...e, gap: { ...e.gap, relist: relistOf(config.filter) } };
  if (e.type === 'listen.relist') return { ...e, what: relistOf(config.filter) };
  return e;
};

type StartReopen = Parameters<typeof listenMachine.provide>[0]['actions'];

/** `startReopen` as the machine has it, but deciding `reopenedFrom` otherwise. */
function reopenedFromIs(from: (ctx: ListenContext) => string | undefined): typeof listenMachine {
  const actions = {
    startReopen: assign(({ context }: { context: ListenContext }) => ({
      reopens: context.reopens + 1,
      currentId: reopenId(context.request.id, context.reopens + 1),
      reopenedFrom: from(context),
      attemptsInGap: context.attemptsInGap + 1,
    })),
  } as unknown as StartReopen;
  return listenMachine.provide({ actions });
}

export const LISTEN_MUTANTS: readonly ListenMutant[] = [
  {
    name: 'missedSince counts the last position itself (off by one)',
    branch: 'server: missed',
    variant: server(
      ackFrom((a, log) => {
        const seq = seqOf(log, a.lastPosition);
        return seq !== undefined && seq > 0 ? positionOf(log, seq - 1) : a.lastPosition;
      }),
    ),
    caughtBy: ['exactness'],
  },
  {
    name: 'missed ignores the filter (counts every change)',
    branch: 'server: missed',
    variant: server(ackIgnoringFilter(false)),
    // The client itself rejects a `missed` naming a type its filter never asked for: unknown instead.
    caughtBy: ['exact whenever it can be'],
  },
  {
    name: 'missed counts every change, its relist still the filter’s (only the count is wrong)',
    branch: 'server: missed',
    variant: server(ackIgnoringFilter(true)),
    caughtBy: ['exactness'],
  },
  {
    name: 'the stream starts at the head when its request arrived, not when it subscribed',
    branch: 'server: subscribedAt',
    variant: server((message, attempt, log, now, limits, arrivalHead) =>
      positionedAck(message, { ...attempt, subscribedAt: arrivalHead }, log, now, limits),
    ),
    caughtBy: ['exactness', 'no silent loss'],
  },
  {
    name: "the ack's position is the head when the request arrived (missed still counted to the subscription)",
    branch: 'server: subscribedAt',
    variant: server((message, attempt, log, now, limits, arrivalHead) => {
      const real = positionedAck(message, attempt, log, now, limits);
      if (!attempt.positions || !('method' in real) || real.method !== ACKNOWLEDGED_METHOD) return real;
      const params = real.params as { _meta: Record<string, unknown> };
      const meta = { ...params._meta, [ListenMeta.position]: positionOf(log, arrivalHead) };
      return { ...real, params: { ...params, _meta: meta } } as JsonRpcMessage;
    }),
    caughtBy: ['exactness'],
  },
  {
    name: 'missed vouched for after eviction (counts what is still held)',
    branch: 'server: vouching',
    variant: server(
      ackFrom((a, log, now, limits) => {
        expireChanges(log, now, limits);
        const seq = seqOf(log, a.lastPosition);
        const firstHeld = log.changes[0]?.seq ?? log.head + 1;
        return seq !== undefined && seq < firstHeld - 1 ? positionOf(log, firstHeld - 1) : a.lastPosition;
      }),
    ),
    caughtBy: ['exactness'],
  },
  {
    name: "missed vouched for a position of another epoch (a restart's)",
    branch: 'server: vouching',
    variant: server(
      ackFrom((a, log) => {
        const p = String(a.lastPosition);
        const dot = p.lastIndexOf('.');
        return dot < 0 ? p : `${log.epoch}${p.slice(dot)}`;
      }),
    ),
    caughtBy: ['exactness'],
  },
  {
    name: 'change notifications carry no position (only the ack does)',
    branch: 'server: positions',
    variant: {
      server: {
        ...RUNTIME_LISTEN_DECISIONS,
        subscribed: (log, attempt) => ({ ...streamSubscribed(log, attempt), positions: false }),
      },
    },
    caughtBy: ['exactness'],
  },
  {
    name: "the client keeps only the ack's position, not the notifications'",
    branch: 'client: lastPosition',
    variant: { client: { read: onlyAckPositions } },
    caughtBy: ['exactness'],
  },
  {
    name: 'the client never sends lastPosition on a re-open',
    branch: 'client: lastPosition',
    variant: { client: { machine: reopenedFromIs(() => undefined) } },
    caughtBy: ['exact whenever it can be'],
  },
  {
    name: "the client re-sends its first re-open's position on every later one (a stale lastPosition)",
    branch: 'client: lastPosition',
    variant: { client: { machine: reopenedFromIs((c) => c.reopenedFrom ?? c.lastPosition) } },
    caughtBy: ['exactness', 'exact whenever it can be'],
  },
  {
    name: 'the client re-lists everything on an exact gap',
    branch: 'client: relist',
    variant: { client: { emitted: relistEverything } },
    caughtBy: ['exactness'],
  },
];
