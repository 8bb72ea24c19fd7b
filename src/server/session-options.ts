import type { InspectionEvent, Observer } from 'xstate';
import type { ServerLimits } from '../../machines/server/limits.js';
import type { ServerAdvertisement } from '../../machines/validity.js';
import type { ServerMetrics } from '../metrics/server.js';
import type { EventLog } from './event-log.js';
import type { RuntimeSessionOptions } from './session.js';
import type { WakePort } from './wake-port.js';

/** The options every session of one server shares: one object for all of them. */
export type SessionServerOptions = Pick<
  RuntimeSessionOptions,
  | 'pollMs'
  | 'wakes'
  | 'log'
  | 'idleTtlMs'
  | 'heartbeatMs'
  | 'retryMs'
  | 'advertisement'
  | 'onEnded'
  | 'inspect'
  | 'onError'
  | 'metrics'
  | 'limits'
>;

/** What is a session's own among its options. */
export type SessionOwnOptions = Pick<
  RuntimeSessionOptions,
  'epoch' | 'principal' | 'initialize' | 'createdAt' | 'snapshot' | 'version'
>;

/**
 * One session's options: its own values are fields, the server's are read through to the one object
 * all its sessions share. Every idle session keeps its options; as a plain object of all 21 keys they
 * were ~190 bytes each, about a tenth of an idle session (docs/benchmarks.md, row 4). Every field is set
 * in the constructor, in one order: one object shape for all sessions.
 */
export class SessionOptions implements RuntimeSessionOptions {
  readonly epoch: string;
  readonly principal: string | undefined;
  readonly initialize: RuntimeSessionOptions['initialize'];
  readonly createdAt: number | undefined;
  readonly snapshot: unknown;
  readonly version: number | undefined;

  constructor(
    readonly id: string,
    own: SessionOwnOptions,
    readonly headers: Record<string, string>,
    private readonly server: SessionServerOptions,
  ) {
    this.epoch = own.epoch;
    this.principal = own.principal;
    this.initialize = own.initialize;
    this.createdAt = own.createdAt;
    this.snapshot = own.snapshot;
    this.version = own.version;
  }

  get pollMs(): number | undefined {
    return this.server.pollMs;
  }
  get wakes(): WakePort {
    return this.server.wakes;
  }
  get log(): EventLog {
    return this.server.log;
  }
  get idleTtlMs(): number {
    return this.server.idleTtlMs;
  }
  get heartbeatMs(): number {
    return this.server.heartbeatMs;
  }
  get retryMs(): number {
    return this.server.retryMs;
  }
  get advertisement(): ServerAdvertisement {
    return this.server.advertisement;
  }
  get onEnded(): (id: string) => void {
    return this.server.onEnded;
  }
  get inspect(): Observer<InspectionEvent> | ((event: InspectionEvent) => void) | undefined {
    return this.server.inspect;
  }
  get onError(): (error: unknown) => void {
    return this.server.onError;
  }
  get metrics(): ServerMetrics | undefined {
    return this.server.metrics;
  }
  get limits(): Pick<ServerLimits, 'maxOpenRequestStreamsPerSession' | 'retryAfterSeconds'> | undefined {
    return this.server.limits;
  }
}
