import { outcomeUnknownError } from '../client/ledger.js';
import { OutcomeUnknownReason } from '../codes.js';
import { idFromKey, type JsonRpcMessage } from '../jsonrpc.js';
import { interruptedRequests, type StreamWindow } from './retention.js';
import type { ServerSessionEvent } from './session.machine.js';

/**
 * Who runs what, across a restart or several instances sharing a store, and what becomes of a call whose
 * runner is gone. The runtime (src/server) and the simulated world (properties/world) both ask here.
 */

type StreamRecords = Readonly<
  Record<number, { readonly kind: string; readonly requestKey?: string; readonly owner?: string }>
>;

/**
 * The one liveness rule: a call's owner is alive when it is this instance or holds a lease. A call with
 * no owner was admitted by a process without a shared store: after a restart nobody runs it any more.
 */
export function isOwnerAlive(
  owner: string | undefined,
  self: string | undefined,
  leased: ReadonlySet<string>,
): boolean {
  return owner !== undefined && (owner === self || leased.has(owner));
}

/**
 * One read of the shared store's leases: the owners it asked about, and those of them holding a lease.
 * A read answers only for the owners it asked about.
 */
export interface LeaseRead {
  readonly asked: ReadonlySet<string>;
  readonly leased: ReadonlySet<string>;
}

/** A read that asked about `asked` and found `leased` of them holding a lease. */
export const leaseRead = (asked: Iterable<string>, leased: ReadonlySet<string>): LeaseRead => ({
  asked: new Set(asked),
  leased,
});

/**
 * Whether a reap may count `owner`'s call as lost on `read`: the owner is neither this instance nor
 * leased, and `read` asked about it. An owner the read did not ask about is not lost on it: the read was
 * made for other streams (a stream attached, or adopted from another instance's commit, after the read
 * was sent) and says nothing of it; a reap reads that owner's lease before it decides. A call with no
 * owner is lost (`isOwnerAlive`).
 */
export function ownerLostOn(owner: string | undefined, self: string | undefined, read: LeaseRead): boolean {
  if (isOwnerAlive(owner, self, read.leased)) return false;
  return owner === undefined || read.asked.has(owner);
}

/** The owners of `streams` (all, or only those in `only`) that are another instance: their leases to read. */
export function foreignOwners(
  streams: StreamRecords,
  self: string | undefined,
  only?: Iterable<number>,
): string[] {
  const numbers = only ? [...only] : Object.keys(streams).map(Number);
  const owners: string[] = [];
  for (const n of numbers) {
    const owner = streams[n]?.owner;
    if (owner !== undefined && owner !== self) owners.push(owner);
  }
  return owners;
}

/** Alone, a call's runner is gone because the process restarted; sharing a store, because its instance died. */
export const outcomeUnknownReason = (sharedStore: boolean): OutcomeUnknownReason =>
  sharedStore ? OutcomeUnknownReason.instanceLost : OutcomeUnknownReason.serverRestarted;

/** One call nobody will answer, and the outcome-unknown answer to write (once: `appendFinal`) on its stream. */
export interface AbandonedCall {
  readonly stream: number;
  readonly requestKey: string;
  readonly reason: OutcomeUnknownReason;
  readonly answer: JsonRpcMessage;
}

/**
 * The calls among `streams` (all, or only those in `only`) whose runner is gone and whose answer was
 * never written, each with its outcome-unknown answer.
 */
export function abandonedCalls(
  streams: StreamRecords,
  windowOf: (stream: number) => StreamWindow | undefined,
  isAlive: (owner: string | undefined) => boolean,
  sharedStore: boolean,
  only?: ReadonlySet<number>,
): AbandonedCall[] {
  const candidates = only
    ? Object.fromEntries(Object.entries(streams).filter(([n]) => only.has(Number(n))))
    : streams;
  const reason = outcomeUnknownReason(sharedStore);
  return interruptedRequests(candidates, windowOf, isAlive).map(({ stream, requestKey }) => ({
    stream,
    requestKey,
    reason,
    answer: outcomeUnknownError(idFromKey(requestKey), reason),
  }));
}

/**
 * What the shared store said when this instance's idle TTL ran out, as the machine's event. A missing
 * record is a session ended elsewhere; a store that cannot be read counts as in use (asked again after a
 * full TTL), so an outage never ends sessions.
 */
export type ExpiryRead =
  | { readonly kind: 'idle'; readonly idleMs: number }
  | { readonly kind: 'missing' }
  | { readonly kind: 'failed' };

export function expiryEvent(read: ExpiryRead): ServerSessionEvent {
  if (read.kind === 'missing') return { type: 'session.gone', reason: RECORD_MISSING_MEANS };
  return { type: 'expiry.checked', idleMs: read.kind === 'idle' ? read.idleMs : 0 };
}

/**
 * A session's shared record is gone while this instance still holds it: another instance ended it and its
 * change report did not arrive. Why it ended is unknown here; it is terminated (the client starts anew).
 */
export const RECORD_MISSING_MEANS = 'terminated' as const;

/**
 * Whether this instance tells the others sharing the store that the session ended: only where the end
 * was decided (not when it heard of it), and not for a stop of this process (the session lives on).
 */
export const announcesEnd = (facts: {
  readonly sharedStore: boolean;
  readonly endedElsewhere: boolean;
  readonly reason: 'expired' | 'terminated' | 'shutdown';
}): facts is { sharedStore: true; endedElsewhere: false; reason: 'expired' | 'terminated' } =>
  facts.sharedStore && !facts.endedElsewhere && facts.reason !== 'shutdown';
