import { type Actor, createActor, fromCallback, SimulatedClock } from 'xstate';
import type { ReconnectPolicy } from '../../machines/backoff.js';
import type { Exchange, IoEvent } from '../../machines/client/io.js';
import {
  LISTEN_METHOD,
  type ListenEmitted,
  listenMachine,
  RELIST_META_KEY,
} from '../../machines/client/listen.machine.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../machines/jsonrpc.js';
import { seededRandom } from '../world/random.js';
import type { GapFact, ListenWorldOutcome } from './facts.js';
import { type Conn, ListenNetwork } from './network.js';
import { CHANGES, type ListenCommand, type ListenWorldConfig } from './schedule.js';
import {
  KEEP_ALIVE_MS,
  ListenServer,
  type ListenServerDecisions,
  RUNTIME_LISTEN_DECISIONS,
} from './server.js';

export { type ListenServerDecisions, RUNTIME_LISTEN_DECISIONS } from './server.js';

/**
 * The listen world: the REAL `listenMachine` as the client (its exchange actor backed by the simulated
 * network, network.ts), on an xstate `SimulatedClock`, against the simulated server (server.ts: the real
 * listen-log decisions in front of a simulated v2 SDK listen router). It records what the application was
 * given and which stream's acknowledgement each gap came with; the oracle (checks.ts) judges the rest.
 */

/** A client variant: the machine (a `provide` of it), or what it reads and what it tells the application. */
export interface ListenClientVariant {
  readonly machine?: typeof listenMachine;
  readonly read?: (event: IoEvent) => IoEvent;
  readonly emitted?: (event: ListenEmitted, config: ListenWorldConfig) => ListenEmitted;
}

export interface ListenVariant {
  readonly server?: ListenServerDecisions;
  readonly client?: ListenClientVariant;
}

export const LISTEN_POLICY: ReconnectPolicy = {
  initialDelayMs: 20,
  maxDelayMs: 200,
  factor: 2,
  maxRetries: 3,
  jitter: 'full',
};
const FIRST_ID = 'listen-1';
/** The client's stall timeout: three keep-alives missed (the request and subscription take far less). */
export const LISTEN_STALL_MS = 3 * KEEP_ALIVE_MS;
/** After the schedule, how long (virtual) the client may take to be acknowledged again and idle. */
export const LISTEN_SETTLE_MS = 30_000;

class ListenWorld {
  readonly clock = new SimulatedClock();
  readonly net: ListenNetwork;
  readonly server: ListenServer;
  readonly gaps: GapFact[] = [];
  readonly delivered: JsonRpcMessage[] = [];
  readonly anomalies: string[] = [];
  /** The stream whose frames the client is being given now (its emitted events are attributed to it). */
  private delivering: number | undefined;
  private currentGap: GapFact | undefined;
  readonly actor: Actor<typeof listenMachine>;

  constructor(
    readonly config: ListenWorldConfig,
    readonly variant: ListenVariant,
  ) {
    this.net = new ListenNetwork(this.clock, seededRandom(config.seed), config.latencyMaxMs);
    this.server = new ListenServer(config, variant.server ?? RUNTIME_LISTEN_DECISIONS, this.net);
    this.net.onArrive = (conn) => this.server.arrive(conn);
    this.net.give = (conn, events) => this.give(conn, events);
    const machine = (variant.client?.machine ?? listenMachine).provide({
      actors: {
        exchange: fromCallback<IoEvent, Exchange>(({ input, sendBack }) => {
          const conn = this.net.open(input, sendBack);
          // The machine is done with the exchange: the client closes the connection.
          return () => {
            if (!conn.open) return;
            if (conn.blackholed) conn.fact.stalledOut = true;
            this.net.drop(conn);
          };
        }),
      },
    });
    const request: JsonRpcRequest = {
      jsonrpc: '2.0',
      id: FIRST_ID,
      method: LISTEN_METHOD,
      params: { notifications: { ...config.filter } },
    };
    this.actor = createActor(machine, {
      input: {
        request,
        policy: LISTEN_POLICY,
        jitterSeed: config.seed,
        useExtension: true,
        stallTimeoutMs: LISTEN_STALL_MS,
      },
      clock: this.clock,
    });
    const distort = variant.client?.emitted ?? ((e: ListenEmitted) => e);
    this.actor.on('*', (e) => this.record(distort(e as ListenEmitted, config)));
    this.actor.start();
  }

  private give(conn: Conn, events: IoEvent[]): void {
    const read = this.variant.client?.read ?? ((e: IoEvent) => e);
    this.delivering = conn.fact.n;
    try {
      for (const e of events) this.actor.send(read(e));
    } finally {
      this.delivering = undefined;
      this.currentGap = undefined;
    }
  }

  private record(e: ListenEmitted): void {
    if (e.type === 'listen.gap') {
      const gap: GapFact = {
        stream: this.delivering ?? 0,
        missed: e.gap.missed,
        relist: e.gap.relist,
        relistEvents: [],
        synthesized: [],
      };
      this.gaps.push(gap);
      this.currentGap = gap;
    } else if (e.type === 'listen.relist') {
      if (this.currentGap) this.currentGap.relistEvents.push([...e.what]);
      else this.anomalies.push(`listen.relist ${JSON.stringify(e.what)} with no gap`);
    } else if (e.type === 'listen.deliver') {
      for (const m of e.messages) {
        this.delivered.push(m);
        const item = synthesizedItem(m);
        if (item === undefined) continue;
        if (this.currentGap) this.currentGap.synthesized.push(item);
        else this.anomalies.push(`a synthesized ${item} with no gap`);
      }
    }
  }

  handedOver(): boolean {
    return this.actor.getSnapshot().context.handedOver;
  }

  settled(): boolean {
    const snap = this.actor.getSnapshot();
    return (
      this.server.up &&
      snap.matches({ exchanging: 'streaming' }) &&
      snap.context.acknowledged &&
      !snap.context.gapOpen &&
      this.net.idle()
    );
  }

  step(c: ListenCommand): void {
    const net = this.net;
    switch (c.kind) {
      case 'publish':
        this.server.publish(CHANGES[c.change % CHANGES.length] as (typeof CHANGES)[number]);
        break;
      case 'advance':
        net.runUntil(net.now() + c.ms);
        break;
      // Before the application holds a stream, a failure is its own answer (`notOpened`): the model
      // starts its faults once the first stream is handed over.
      case 'cut': {
        net.waitFor(() => net.current() !== undefined && this.handedOver());
        net.runUntil(net.now() + c.afterMs);
        const conn = net.current();
        if (conn && this.handedOver()) net.cut(conn, c.clean);
        break;
      }
      case 'blackhole': {
        net.waitFor(() => net.current() !== undefined && this.handedOver());
        net.runUntil(net.now() + c.afterMs);
        const conn = net.current();
        if (conn && this.handedOver()) net.blackhole(conn);
        break;
      }
      case 'restart':
        net.waitFor(() => this.handedOver());
        if (this.handedOver()) this.server.restart(c.downMs, c.withoutExtension === true);
        break;
    }
  }
}

/** What a synthesized change notification tells the application to re-list; `undefined` for any other. */
function synthesizedItem(m: JsonRpcMessage): string | undefined {
  if (!('method' in m)) return undefined;
  const params = m.params as { _meta?: Record<string, unknown>; uri?: string } | undefined;
  if (params?._meta?.[RELIST_META_KEY] !== true) return undefined;
  switch (m.method) {
    case 'notifications/tools/list_changed':
      return 'tools';
    case 'notifications/prompts/list_changed':
      return 'prompts';
    case 'notifications/resources/list_changed':
      return 'resources';
    default:
      return `resource:${params.uri ?? ''}`;
  }
}

/** Runs one schedule, then quiescence (no more faults: until acknowledged again and idle, bounded). */
export function runListenWorld(
  commands: readonly ListenCommand[],
  config: ListenWorldConfig,
  variant: ListenVariant = {},
): ListenWorldOutcome {
  const w = new ListenWorld(config, variant);
  try {
    for (const c of commands) w.step(c);
    const end = w.net.now() + LISTEN_SETTLE_MS;
    while (!w.settled() && w.net.now() < end) w.net.runUntil(w.net.now() + 5);
    return {
      config,
      firstId: FIRST_ID,
      publishes: w.server.publishes,
      streams: w.net.streams,
      gaps: w.gaps,
      delivered: w.delivered,
      runs: w.server.run,
      settled: w.settled(),
      anomalies: w.anomalies,
    };
  } finally {
    w.actor.stop();
  }
}
