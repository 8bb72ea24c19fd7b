import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  dropsOnUnknown,
  ignoresJournaledKey,
  type JournalRules,
  journalsAfterSend,
  journalWorldArb,
  oneTaskPerCall,
  runJournalWorld,
} from './tasks/journal-world.js';

/**
 * Issue 26's journal property: an application making the same keyed task-creating call in process after
 * process on one durable journal (processes killed before or after the send, before or after the handle,
 * calls ending as outcome unknown) starts ONE task on the server, reads that task's result, and leaves an
 * empty journal. Each way of getting the journal's rules wrong, written as a mutant, is found by the
 * search alone.
 */
const caught = (rules: JournalRules) =>
  fc.check(
    fc.property(journalWorldArb, (w) => oneTaskPerCall(runJournalWorld(w, rules))),
    { numRuns: 300, seed: 2626, endOnFailure: true },
  ).failed;

describe('tasks: the client journal makes one task per call across restarts', () => {
  it('holds in every world', () => {
    fc.assert(
      fc.property(journalWorldArb, (w) => oneTaskPerCall(runJournalWorld(w))),
      { numRuns: 500, seed: 2626 },
    );
  });

  it('catches the mutant that journals the key after the send', () => {
    expect(caught(journalsAfterSend)).toBe(true);
  });

  it('catches the mutant that drops the entry of a call whose outcome is unknown', () => {
    expect(caught(dropsOnUnknown)).toBe(true);
  });

  it('catches the mutant that sends a journaled key-only call with a fresh key', () => {
    expect(caught(ignoresJournaledKey)).toBe(true);
  });

  it('the directed world: killed after the send, then after the handle, then done: one task', () => {
    const run = runJournalWorld({ fates: ['killedAfterSend', 'killedAfterHandle'] });
    expect([...run.tasks.values()]).toEqual(['task-0']);
    expect(run.resultOf).toBe('task-0');
    expect(run.journal).toEqual([]);
  });
});
