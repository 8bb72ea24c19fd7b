import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exactlyOnePerKey, forgetsKeys, runTasksWorld, tasksWorldArb } from './tasks/world.js';

/**
 * Issue 26's creation property: through cuts before and after the server, and re-issues racing each
 * other, a continuity key makes at most one task and one run, and the client is only ever handed that
 * task. The mutant that creates a second task on re-issue (a store that forgets key bindings) is caught.
 */
describe('tasks: exactly one task per key', () => {
  it('holds in every world', async () => {
    await fc.assert(
      fc.asyncProperty(tasksWorldArb, async (w) => exactlyOnePerKey(await runTasksWorld(w))),
      { numRuns: 200, seed: 26 },
    );
  });

  it('catches the mutant that creates a second task on re-issue', async () => {
    const result = await fc.check(
      fc.asyncProperty(tasksWorldArb, async (w) => exactlyOnePerKey(await runTasksWorld(w, forgetsKeys))),
      {
        numRuns: 200,
        seed: 26,
        endOnFailure: true,
      },
    );
    // Found by the search alone, with no directed example.
    expect(result.failed).toBe(true);
  });

  it('the directed world: a cut answer and its re-issue make one task, one run', async () => {
    const o = await runTasksWorld({
      attempts: [
        { key: 0, fate: 'lostAfter', racing: false },
        { key: 0, fate: 'lostAfter', racing: true },
        { key: 0, fate: 'answered', racing: false },
      ],
    });
    expect(o.created.get(0)).toBe(1);
    expect(o.runs.get(0)).toBe(1);
    expect(o.handles.get(0)?.size).toBe(1);
  });
});
