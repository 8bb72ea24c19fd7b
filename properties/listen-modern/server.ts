import type { JsonRpcMessage, JsonRpcRequest } from '../../machines/jsonrpc.js';
import {
  createListenLog,
  type ListenAttemptFacts,
  type ListenFilter,
  type ListenLog,
  type ListenLogLimits,
  listenAttemptOf,
  type PublishedEvent,
  positionedAck,
  publishChange,
  streamSubscribed,
} from '../../machines/server/listen-log.js';
import { CHANGE_TAG, type PublishFact } from './facts.js';
import type { Conn, ListenNetwork } from './network.js';
import type { CHANGES, ListenWorldConfig } from './schedule.js';
import { acknowledgement, honoredFilter, notificationOf, routerAccepts } from './sdk-peer.js';

/**
 * The listen world's server: the modern endpoint's listen glue making the REAL listen-log decisions (the
 * functions `PositionedEventBus` and the endpoint's ack rewrite call: `listenAttemptOf`, `publishChange`,
 * `streamSubscribed`, `positionedAck`) in front of the simulated v2 SDK listen router (sdk-peer.ts). The
 * SDK subscribes a stream some time after its request arrived (its own awaits); changes published in
 * between exist. A restart cuts every stream and comes back with a new log (a new epoch), or as a version
 * without the listen part (the SDK's plain bus, no ack rewrite).
 */

/** The server's decisions, as the runtime makes them; a mutant swaps one. */
export interface ListenServerDecisions {
  readonly attemptOf: typeof listenAttemptOf;
  readonly subscribed: typeof streamSubscribed;
  readonly publish: typeof publishChange;
  /** The ack rewrite (`positionedAck`); `arrivalHead`: the log's head when the request arrived. */
  readonly ack: (
    message: JsonRpcMessage,
    attempt: ListenAttemptFacts,
    log: ListenLog,
    now: number,
    limits: ListenLogLimits,
    arrivalHead: number,
  ) => JsonRpcMessage;
}

export const RUNTIME_LISTEN_DECISIONS: ListenServerDecisions = {
  attemptOf: listenAttemptOf,
  subscribed: streamSubscribed,
  publish: publishChange,
  ack: (message, attempt, log, now, limits) => positionedAck(message, attempt, log, now, limits),
};

/** The SDK's keep-alive period, scaled to the world (the client's stall timeout is a few of these). */
export const KEEP_ALIVE_MS = 40;

interface Listener {
  readonly conn: Conn;
  readonly positions: boolean;
  /**
   * The world's fact: its request declared the extension to a server serving it, so the frames on it
   * carry positions (what the client's last position is judged by; `positions` is what the bus decided).
   */
  readonly declared: boolean;
  readonly filter: ListenFilter;
}

export class ListenServer {
  readonly publishes: PublishFact[] = [];
  readonly listeners = new Set<Listener>();
  run = 1;
  up = true;
  /** This run serves the listen part (the endpoint with `keyed`: the positioned bus and the ack rewrite). */
  extension: boolean;
  log: ListenLog = createListenLog('run1');
  /** One counter over publishes and subscriptions: "published before it subscribed" needs no clock. */
  order = 0;
  private generation = 0;

  constructor(
    readonly config: ListenWorldConfig,
    readonly decisions: ListenServerDecisions,
    readonly net: ListenNetwork,
  ) {
    this.extension = config.extension;
  }

  private runPublishes(): number {
    return this.publishes.filter((p) => p.run === this.run).length;
  }

  arrive(conn: Conn): void {
    const net = this.net;
    if (!this.up) {
      net.send(conn, { at: net.now() + net.latency(), kind: 'refused' });
      return;
    }
    // Without the listen part the endpoint hands the request to the SDK as it is (no attempt, no log).
    const attempt = !this.extension
      ? { positions: false }
      : conn.body === undefined
        ? undefined
        : this.decisions.attemptOf(conn.body);
    if (attempt === undefined) throw new Error('the listen world only sends listen requests');
    conn.phase = 'arrived';
    conn.attempt = { ...attempt };
    conn.fact.run = this.run;
    conn.fact.extension = this.extension;
    conn.fact.arrivedPoint = this.runPublishes();
    const run = this.run;
    const arrivalHead = this.log.head;
    conn.serveTimer = net.clock.setTimeout(
      () => {
        conn.serveTimer = undefined;
        if (!conn.open) return;
        if (this.up && this.run === run) this.serve(conn, arrivalHead);
        else net.cut(conn, false);
      },
      Math.floor(net.random() * (this.config.subscribeGapMaxMs + 1)),
    );
  }

  /** The SDK's router serving the request: the ack first, then (synchronously) the bus subscription. */
  private serve(conn: Conn, arrivalHead: number): void {
    const net = this.net;
    const attempt = conn.attempt as ListenAttemptFacts & { subscribedAt?: number };
    const request = conn.body as JsonRpcRequest;
    const honored = honoredFilter((request.params?.notifications ?? {}) as ListenFilter);
    const ack = acknowledgement(honored, request.id);
    const { subscribedAt, positions } = this.extension
      ? this.decisions.subscribed(this.log, attempt)
      : { subscribedAt: undefined, positions: false };
    attempt.subscribedAt = subscribedAt;
    const listener: Listener = { conn, positions, declared: attempt.positions, filter: honored };
    this.listeners.add(listener);
    // The SDK's keep-alive comments, until the stream is torn down.
    let keepAlive: number | undefined;
    const beat = () => {
      net.send(conn, { at: net.now() + net.latency(), kind: 'keepalive' });
      keepAlive = net.clock.setTimeout(beat, KEEP_ALIVE_MS);
    };
    keepAlive = net.clock.setTimeout(beat, KEEP_ALIVE_MS);
    conn.teardown = () => {
      this.listeners.delete(listener);
      if (keepAlive !== undefined) net.clock.clearTimeout(keepAlive);
    };
    conn.phase = 'served';
    const point = this.runPublishes();
    conn.fact.subscribePoint = point;
    conn.fact.subscribedOrder = ++this.order;
    conn.fact.ackAt = net.now();
    const rewritten = this.extension
      ? this.decisions.ack(ack, attempt, this.log, net.now(), this.config.limits, arrivalHead)
      : ack;
    const at = net.now() + net.latency();
    net.send(conn, { at, kind: 'headers' });
    // The ack may come in the headers' chunk or a later one.
    net.send(conn, {
      at: at + Math.floor(net.random() * 2),
      kind: 'message',
      message: rewritten,
      point: { run: this.run, point },
      positioned: attempt.positions,
      ack: true,
    });
  }

  publish(change: (typeof CHANGES)[number]): void {
    if (!this.up) return;
    const net = this.net;
    const id = this.publishes.length + 1;
    const event: PublishedEvent = { ...change, params: { _meta: { [CHANGE_TAG]: id } } };
    const positionedParams = this.extension
      ? this.decisions.publish(this.log, event, net.now(), this.config.limits).positionedParams
      : event.params;
    const index = this.runPublishes() + 1;
    this.publishes.push({
      id,
      order: ++this.order,
      at: net.now(),
      run: this.run,
      index,
      kind: change.kind,
      ...('uri' in change ? { uri: change.uri } : {}),
    });
    for (const listener of [...this.listeners]) {
      if (!routerAccepts(listener.filter, event)) continue;
      const subscriptionId = (listener.conn.body as JsonRpcRequest).id;
      net.send(listener.conn, {
        at: net.now() + net.latency(),
        kind: 'message',
        message: notificationOf(event, listener.positions ? positionedParams : event.params, subscriptionId),
        point: { run: this.run, point: index },
        positioned: listener.declared,
        ack: false,
      });
    }
  }

  restart(downMs: number, withoutExtension: boolean): void {
    this.up = false;
    for (const conn of [...this.net.conns]) this.net.cut(conn, false);
    // A restart while down postpones the comeback: the latest one decides when.
    const generation = ++this.generation;
    const back = () => {
      if (generation !== this.generation) return;
      this.run += 1;
      this.log = createListenLog(`run${this.run}`);
      this.extension = !withoutExtension;
      this.up = true;
    };
    if (downMs === 0) back();
    else this.net.clock.setTimeout(back, downMs);
  }
}
