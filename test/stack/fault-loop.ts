import type { FaultProxy } from '../../src/testing/fault-proxy.js';

/**
 * What both real-stack worlds (stack-world.ts, modern-stack-world.ts) do to the network between the
 * client and the server, written once: the proxy faults, the waits, and the settle loop.
 */
export type NetworkCommand =
  | { readonly kind: 'wait'; readonly ms: number }
  /** Every chunk is delayed this much from now on, if more than now (never less: TCP keeps order). */
  | { readonly kind: 'latency'; readonly ms: number }
  /** One open proxied connection resets (chosen by position, so it stays valid while shrinking). */
  | { readonly kind: 'reset'; readonly pick: number }
  /** A load balancer recycles: every connection resets. */
  | { readonly kind: 'resetAll' }
  /** The next `count` new connections get 503. */
  | { readonly kind: 'serverError'; readonly count: number }
  /** One open connection stops forwarding without closing. */
  | { readonly kind: 'blackhole'; readonly pick: number };

export type ProxyConnection = FaultProxy['connections'] extends Set<infer C> ? C : never;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const NETWORK_KINDS: ReadonlySet<string> = new Set([
  'wait',
  'latency',
  'reset',
  'resetAll',
  'serverError',
  'blackhole',
]);

export const isNetworkCommand = (cmd: { readonly kind: string }): cmd is NetworkCommand =>
  NETWORK_KINDS.has(cmd.kind);

/** The network's state a world keeps across commands: latency never shrinks within a run. */
export class FaultLoop {
  private latencyMs = 0;

  constructor(private readonly proxy: FaultProxy) {}

  /** Applies one network command; returns the black-holed connection, if one was. */
  async apply(cmd: NetworkCommand): Promise<ProxyConnection | undefined> {
    const open = [...this.proxy.connections];
    const pick = (i: number) => (open.length === 0 ? undefined : open[i % open.length]);
    switch (cmd.kind) {
      case 'wait':
        await sleep(cmd.ms);
        return;
      case 'latency':
        this.latencyMs = Math.max(this.latencyMs, cmd.ms);
        this.proxy.setLatency(this.latencyMs);
        return;
      case 'reset': {
        const target = pick(cmd.pick);
        if (target) this.proxy.reset((c) => c === target);
        return;
      }
      case 'resetAll':
        this.proxy.reset();
        return;
      case 'serverError':
        this.proxy.failNext(cmd.count);
        return;
      case 'blackhole': {
        const target = pick(cmd.pick);
        if (target) this.proxy.blackhole((c) => c === target);
        return target;
      }
    }
  }
}

/** Waits (bounded, real time) until nothing is unsettled; returns how long it took. */
export async function settleWithin(unsettled: () => readonly unknown[], boundMs: number): Promise<number> {
  const start = Date.now();
  while (unsettled().length > 0 && Date.now() - start < boundMs) await sleep(20);
  return Date.now() - start;
}

/** The seed a property run uses: given, from the environment, or fresh (printed before the run). */
export function runSeed(given: number | undefined, envName: string): number {
  if (given !== undefined) return given;
  const env = process.env[envName];
  return env === undefined ? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0 : Number(env);
}
