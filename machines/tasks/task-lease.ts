import { stepTaskStatus } from './task.machine.js';
import type { TaskError, TaskRecord } from './task-record.js';

/**
 * Leases for task runs, pure. A run is a process on one instance: when that instance dies (kill -9, a
 * crash, a deploy), nothing writes the task's end, and without a lease it would read `working` until its
 * TTL. So a running task carries `leaseUntil`, which the instance running it renews; any instance reading
 * the task after the lease lapsed (a `tasks/*` request) declares it failed, with an error saying the
 * outcome is unknown (the run may or may not have taken effect): the honest answer the draft's statuses
 * allow. A renewal that finds the task terminal (cancelled on another instance) stops the local run.
 */

/** The default lease of a run: renewed every third of it, so two renewals may be lost before it lapses. */
export const DEFAULT_LEASE_MS = 30_000;

/**
 * The server's other task timings, decided here with the lease: how long a task lives (`ttlMs`, 1 h), the
 * poll interval suggested to clients and used by a task listen between store reads (`pollIntervalMs`,
 * 1 s), and how long an expired task is still answered as expired rather than unknown (10 min).
 */
export const DEFAULT_TASK_TIMING = {
  ttlMs: 3_600_000,
  pollIntervalMs: 1_000,
  keepExpiredMs: 600_000,
} as const;

/** How often the running instance renews a lease of `leaseMs` (a deadline: decided here, not in the shell). */
export function renewEveryMs(leaseMs: number): number {
  return Math.max(1, Math.floor(leaseMs / 3));
}

/**
 * How long a task listen waits between two reads of the store (a change made on this instance wakes it
 * sooner): the poll interval suggested to clients, so a listen sees a change no later than a poll would.
 */
export function listenReadEveryMs(pollIntervalMs: number): number {
  return Math.max(1, pollIntervalMs);
}

/** The error a lapsed task fails with: the run's outcome is unknown, not "it failed". */
export const LEASE_LAPSED_ERROR: TaskError = {
  code: -32603,
  message: 'Task run lost: the instance running it stopped renewing its lease; its effect is unknown',
  data: { reason: 'lease_lapsed' },
};

/** True when the task is working and nobody renewed its run's lease in time. */
export function leaseLapsed(record: Pick<TaskRecord, 'status' | 'leaseUntil'>, now: number): boolean {
  return record.status === 'working' && record.leaseUntil !== undefined && now >= record.leaseUntil;
}

/** A lapsed lease read by any instance: the task becomes failed with `LEASE_LAPSED_ERROR`; else no change. */
export function decideLeaseLapse(record: TaskRecord, now: number): TaskRecord | undefined {
  if (!leaseLapsed(record, now)) return undefined;
  const step = stepTaskStatus(record.status, { type: 'run.failed' });
  if (!step.changed) return undefined;
  const { leaseUntil: _l, ...rest } = record;
  return {
    ...rest,
    status: step.status,
    error: LEASE_LAPSED_ERROR,
    statusMessage: LEASE_LAPSED_ERROR.message,
    lastUpdatedAt: now,
    version: record.version + 1,
  };
}

/** What the running instance does at a renewal: extend the lease, stop its run, or nothing. */
export type LeaseRenewal =
  | { readonly kind: 'renew'; readonly next: TaskRecord }
  /** The task is terminal (cancelled or lapsed elsewhere) or awaits input: the local run has no business. */
  | { readonly kind: 'stop' }
  | { readonly kind: 'keep' };

/**
 * A renewal by the instance running the task's round `round`: a working task of that round gets
 * `leaseUntil = now + leaseMs`; a task that is terminal, or has moved to another round, stops this run.
 */
export function decideRenewal(record: TaskRecord, round: number, now: number, leaseMs: number): LeaseRenewal {
  if (record.status !== 'working' || record.round !== round) return { kind: 'stop' };
  return { kind: 'renew', next: { ...record, leaseUntil: now + leaseMs, version: record.version + 1 } };
}
