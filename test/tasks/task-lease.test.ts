import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newTaskRecord } from '../../machines/tasks/task-decide.js';
import {
  decideLeaseLapse,
  decideRenewal,
  LEASE_LAPSED_ERROR,
  leaseLapsed,
  renewEveryMs,
} from '../../machines/tasks/task-lease.js';
import type { TaskRecord } from '../../machines/tasks/task-record.js';

/** Rows for the run lease's decisions (machines/tasks/task-lease.ts), and a property with a mutant. */
const T0 = 1_000_000;
const LEASE = 300;
const task = (over: Partial<TaskRecord> = {}): TaskRecord => ({
  ...newTaskRecord({
    taskId: 't1',
    principal: 'p',
    fingerprint: 'f',
    request: { name: 'charge' },
    now: T0,
    ttlMs: 3_600_000,
    pollIntervalMs: 100,
    keepExpiredMs: 0,
    leaseMs: LEASE,
  }),
  ...over,
});

describe('run leases', () => {
  it('a new task holds a lease of leaseMs; renewals every third of it', () => {
    expect(task().leaseUntil).toBe(T0 + LEASE);
    expect(renewEveryMs(LEASE)).toBe(100);
    expect(renewEveryMs(1)).toBe(1);
  });

  it('lapsed only once now reaches leaseUntil, and only while working', () => {
    expect(leaseLapsed(task(), T0 + LEASE - 1)).toBe(false);
    expect(leaseLapsed(task(), T0 + LEASE)).toBe(true);
    for (const status of ['input_required', 'completed', 'failed', 'cancelled'] as const)
      expect(leaseLapsed(task({ status }), T0 + 10 * LEASE)).toBe(false);
    const { leaseUntil: _, ...unleased } = task();
    expect(leaseLapsed(unleased, T0 + 10 * LEASE)).toBe(false);
  });

  it('a lapse fails the task with the outcome-unknown error, version + 1, lease dropped', () => {
    const next = decideLeaseLapse(task(), T0 + LEASE);
    expect(next).toMatchObject({ status: 'failed', error: LEASE_LAPSED_ERROR, version: 2 });
    expect(next).not.toHaveProperty('leaseUntil');
    expect(decideLeaseLapse(task(), T0)).toBeUndefined();
  });

  it('a renewal extends a working task of its round; stops the run when terminal or another round', () => {
    expect(decideRenewal(task(), 0, T0 + 100, LEASE)).toEqual({
      kind: 'renew',
      next: { ...task(), leaseUntil: T0 + 400, version: 2 },
    });
    expect(decideRenewal(task({ status: 'cancelled' }), 0, T0, LEASE)).toEqual({ kind: 'stop' });
    expect(decideRenewal(task({ round: 1 }), 0, T0, LEASE)).toEqual({ kind: 'stop' });
  });

  /**
   * Property: an instance that renews on schedule (every `renewEveryMs`, each renewal late by less than a
   * third of the lease) is never declared lapsed, whenever another instance reads; one that stopped
   * renewing is declared lapsed by any read at least a lease after its last renewal. The mutant that
   * renews with `leaseMs / 4` extension instead of `leaseMs` is caught.
   */
  const schedule = fc.record({
    lateness: fc.array(fc.integer({ min: 0, max: Math.floor(LEASE / 3) - 1 }), {
      minLength: 1,
      maxLength: 20,
    }),
    readAt: fc.integer({ min: 0, max: 1_000 }),
  });
  const honest = (extend: number) => (s: { lateness: number[]; readAt: number }) => {
    let r = task();
    let t = T0;
    for (const late of s.lateness) {
      t += renewEveryMs(LEASE) + late;
      const reader = t - late + Math.min(late, s.readAt % (late + 1));
      if (leaseLapsed(r, reader)) return false;
      const d = decideRenewal(r, 0, t, extend);
      if (d.kind !== 'renew') return false;
      r = d.next;
    }
    return leaseLapsed(r, t + LEASE + s.readAt) && !leaseLapsed(r, t + Math.min(s.readAt, LEASE - 1));
  };

  it('holds: renewing on schedule never lapses; stopping lapses a lease later', () => {
    fc.assert(fc.property(schedule, honest(LEASE)), { numRuns: 300, seed: 3 });
  });

  it('catches the mutant that extends a lease by a quarter of it', () => {
    expect(fc.check(fc.property(schedule, honest(LEASE / 4)), { numRuns: 300, seed: 3 }).failed).toBe(true);
  });
});
