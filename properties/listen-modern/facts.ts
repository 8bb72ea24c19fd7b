import type { ListenMissed } from '../../machines/client/listen.machine.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { ChangeKind } from '../../machines/server/listen-log.js';
import type { ListenWorldConfig } from './schedule.js';

/**
 * What a listen world saw, recorded by the world itself (never read off the log or the machine's context),
 * so the oracle (checks.ts) judges from the outside. `order` is one counter over publishes and
 * subscriptions, so "published before this stream subscribed" needs no tie-breaking by time.
 */

/** Where a message the client received stands: after the first `point` changes of server run `run`. */
export interface WorldPoint {
  readonly run: number;
  readonly point: number;
}

export interface PublishFact {
  readonly id: number;
  readonly order: number;
  readonly at: number;
  readonly run: number;
  /** 1-based, among the changes published on its run. */
  readonly index: number;
  readonly kind: ChangeKind;
  readonly uri?: string;
}

export interface StreamFact {
  /** 1-based: the client's attempts in order. */
  readonly n: number;
  readonly sentAt: number;
  /** The last positioned message the client had received when this attempt's request left. */
  readonly lastPointAtSend: WorldPoint | undefined;
  run?: number;
  /** The run that received it serves the listen part. */
  extension?: boolean;
  /** Changes published on its run when the request arrived. */
  arrivedPoint?: number;
  subscribedOrder?: number;
  /** Changes published on its run when the SDK subscribed it. */
  subscribePoint?: number;
  /** When the acknowledgement was computed (the log's limits are judged then). */
  ackAt?: number;
  /** The acknowledgement reached the client machine; `ackOrder`: the how-manieth ack to do so. */
  ackDelivered: boolean;
  ackOrder?: number;
  /** Cut after its ack was written and before it arrived. */
  ackLost: boolean;
  refused: boolean;
  /** Black-holed, and ended by the client's stall timer. */
  stalledOut?: boolean;
}

export interface GapFact {
  /** The stream whose acknowledgement made the client report it. */
  readonly stream: number;
  readonly missed: ListenMissed;
  readonly relist: readonly string[];
  /** `listen.relist` events emitted with it. */
  readonly relistEvents: string[][];
  /** What the synthesized notifications delivered with it name (`tools`, `resource:<uri>`, ...). */
  readonly synthesized: string[];
}

export interface ListenWorldOutcome {
  readonly config: ListenWorldConfig;
  readonly firstId: string;
  readonly publishes: readonly PublishFact[];
  readonly streams: readonly StreamFact[];
  readonly gaps: readonly GapFact[];
  /** Everything the application was given (`listen.deliver`), in order. */
  readonly delivered: readonly JsonRpcMessage[];
  /** The ids of the server runs there were (1 + restarts). */
  readonly runs: number;
  /** Quiescence reached: acknowledged, no gap open, nothing in flight. */
  readonly settled: boolean;
  /** Things the world saw that are wrong whatever the oracle says (a synthesized message with no gap). */
  readonly anomalies: readonly string[];
}

/** The `_meta` key the world tags each published change with (a world fact the oracle reads back). */
export const CHANGE_TAG = 'sim/change';
