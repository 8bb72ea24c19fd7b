import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  failsOnFault,
  followWorldArb,
  freesKeysOnFault,
  honestFollow,
  runFollowWorld,
  type Step,
} from './tasks/follow-world.js';

/**
 * Issue 26's client property: through requests lost before the server, answers lost after it and a
 * balancer's 503s, the client following a task reports the task's own end (never "failed" for a network
 * fault), asks each input key once and has each answered once. The official ext-tasks 0.2.2 client's
 * two faults, written as mutants of the core, are caught by the search.
 */
const caught = (mutant: Step) =>
  fc.check(
    fc.property(followWorldArb, (w) => honestFollow(runFollowWorld(w, mutant))),
    { numRuns: 300, seed: 2663, endOnFailure: true },
  ).failed;

describe('tasks: the client follows a task honestly', () => {
  it('holds in every world', () => {
    fc.assert(
      fc.property(followWorldArb, (w) => honestFollow(runFollowWorld(w))),
      { numRuns: 500, seed: 2663 },
    );
  });

  it('catches the mutant that reads a failed poll as a failed task', () => {
    expect(caught(failsOnFault)).toBe(true);
  });

  it('catches the mutant that frees the keys of a failed tasks/update', () => {
    expect(caught(freesKeysOnFault)).toBe(true);
  });
});
