import { abandonedCalls, foreignOwners, isOwnerAlive } from '../../machines/server/instances.js';
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

  /** The other instances running calls on streams attached here (or on `only`): their leases to read. */
  foreignOwners(only: Iterable<number> = this.streams.attachedStreams()): string[] {
    return foreignOwners(this.host.actor.getSnapshot().context.streams, this.shared?.instanceId, only);
  }

  /**
   * Answers every abandoned call among the session's streams (or `only` those), given the instances
   * holding a lease. `appendFinal` makes it exactly one answer per call even when the instance running
   * it is merely slow, or several instances reap at once.
   */
  async reap(leased: ReadonlySet<string>, only?: ReadonlySet<number>): Promise<void> {
    const { streams } = this.host.actor.getSnapshot().context;
    const numbers = only ? [...only] : Object.keys(streams).map(Number);
    const windows = new Map<number, StreamWindow | undefined>();
    for (const n of numbers) windows.set(n, await this.log.window(this.id, n));
    const self = this.shared?.instanceId;
    // Decided on the machine's streams as they are now: the window reads above gave other events time.
    const abandoned = abandonedCalls(
      this.host.actor.getSnapshot().context.streams,
      (n) => windows.get(n),
      (owner) => isOwnerAlive(owner, self, leased),
      this.shared !== undefined,
      only ?? new Set(numbers),
    );
    for (const call of abandoned) {
      if (await this.streams.storeFinal(call.stream, call.answer)) this.metrics?.outcomeUnknown(call.reason);
    }
  }

  /** A restored session: every call of the old process, or of an instance since gone, is answered. */
  async reapRestored(): Promise<void> {
    const owners = this.foreignOwners(Object.keys(this.host.actor.getSnapshot().context.streams).map(Number));
    await this.reap(await this.leased(owners));
  }

  /** A client resumes `stream`: if the instance running its call is gone, answer for it first. */
  async reapIfOwnerGone(stream: number): Promise<void> {
    const owners = this.foreignOwners([stream]);
    if (owners.length === 0) return;
    const leased = await this.leased(owners);
    const self = this.shared?.instanceId;
    if (owners.some((owner) => !isOwnerAlive(owner, self, leased)))
      await this.reap(leased, new Set([stream]));
  }

  private async leased(owners: readonly string[]): Promise<ReadonlySet<string>> {
    return this.shared && owners.length > 0 ? this.shared.alive(owners) : new Set();
  }
}
