import {
  abandonedCalls,
  foreignOwners,
  type LeaseRead,
  leaseRead,
  ownerLostOn,
} from '../../machines/server/instances.js';
import type { StreamWindow } from '../../machines/server/retention.js';
import type { ServerMetrics } from '../metrics/server.js';
import type { EventLog, SharedSessionStore } from './event-log.js';
import type { SessionHost } from './session-host.js';
import type { SessionStreams } from './session-streams.js';

/**
 * Reaping: the calls of one session whose runner is gone (the process restarted, or the instance
 * running them lost its lease) and whose answer was never written get an outcome-unknown answer. Which
 * calls, why, and who counts as alive is decided in machines/server/instances.ts.
 */
export class SessionReaping {
  constructor(
    private readonly id: string,
    private readonly log: EventLog,
    private readonly host: SessionHost,
    private readonly streams: SessionStreams,
    private readonly metrics?: ServerMetrics,
  ) {}

  private get shared(): SharedSessionStore | undefined {
    return this.log.shared;
  }

  private get self(): string | undefined {
    return this.shared?.instanceId;
  }

  /** The other instances running calls on streams attached here (or on `only`): their leases to read. */
  foreignOwners(only: Iterable<number> = this.streams.attachedStreams()): string[] {
    return foreignOwners(this.host.actor.getSnapshot().context.streams, this.self, only);
  }

  /** Whether `read` shows an owner of a call on `only` (default: the attached streams) lost. */
  ownerLost(read: LeaseRead, only?: Iterable<number>): boolean {
    return this.foreignOwners(only).some((owner) => ownerLostOn(owner, this.self, read));
  }

  /**
   * Answers every abandoned call among the session's streams (or `only` those). The leases are read
   * here, after the windows, for exactly the owners of the streams decided on: a read made earlier for
   * other streams would count an owner it never asked about as gone. `appendFinal` makes it exactly one
   * answer per call even when the instance running it is merely slow, or several instances reap at once.
   */
  async reap(only?: ReadonlySet<number>): Promise<void> {
    const numbers = only ? [...only] : Object.keys(this.host.actor.getSnapshot().context.streams).map(Number);
    const windows = new Map<number, StreamWindow | undefined>();
    for (const n of numbers) windows.set(n, await this.log.window(this.id, n));
    // Decided on the machine's streams as they are after the window reads (they gave other events time),
    // and on a lease read of their owners made after that.
    const { streams } = this.host.actor.getSnapshot().context;
    const self = this.self;
    const read = await this.readLeases(foreignOwners(streams, self, numbers));
    const abandoned = abandonedCalls(
      streams,
      (n) => windows.get(n),
      (owner) => !ownerLostOn(owner, self, read),
      this.shared !== undefined,
      new Set(numbers),
    );
    for (const call of abandoned) {
      if (await this.streams.storeFinal(call.stream, call.answer)) this.metrics?.outcomeUnknown(call.reason);
    }
  }

  /** A restored session: every call of the old process, or of an instance since gone, is answered. */
  async reapRestored(): Promise<void> {
    await this.reap();
  }

  /** A client resumes `stream`: if the instance running its call is gone, answer for it first. */
  async reapIfOwnerGone(stream: number): Promise<void> {
    const owners = this.foreignOwners([stream]);
    if (owners.length === 0) return;
    if (this.ownerLost(await this.readLeases(owners), [stream])) await this.reap(new Set([stream]));
  }

  /** The leases of `owners`, read now. */
  private async readLeases(owners: readonly string[]): Promise<LeaseRead> {
    const leased = this.shared && owners.length > 0 ? await this.shared.alive(owners) : new Set<string>();
    return leaseRead(owners, leased);
  }
}
