import { describe, expect, it } from 'vitest';
import { EXHAUSTIVE_DEPTH } from './budget.js';
import { explore } from './exhaustive.js';
import { MUTANTS } from './mutants.js';
import { DEFAULT_WORLD } from './world/world.js';

/**
 * Distinct world states, breadth first (properties/exhaustive.ts). Heartbeats on is searched one level
 * deeper than off: about the time the search over schedules took for depth 3 with both.
 */
describe('bounded exhaustive exploration of distinct world states', () => {
  for (const heartbeat of [true, false]) {
    const depth = heartbeat ? EXHAUSTIVE_DEPTH : EXHAUSTIVE_DEPTH - 1;
    it(`every state up to depth ${depth} holds every property (heartbeat ${heartbeat ? 'on' : 'off'})`, {
      // A bound on states, not on time: a busy machine only makes it slower.
      timeout: 900_000,
    }, () => {
      const report = explore(depth, { ...DEFAULT_WORLD, heartbeat });
      console.info(
        `depth ${report.depthReached}, heartbeat ${heartbeat}: ${report.distinctStates} distinct world states ` +
          `(${report.pruned} schedules led to a state seen before), ${Math.round(report.elapsedMs)} ms`,
      );
      expect(report.violations.slice(0, 3)).toEqual([]);
      expect(report.depthReached).toBe(depth);
      expect(report.distinctStates).toBeGreaterThan(300);
    });
  }

  it('catches the design note incident client within depth 2', () => {
    const incident = MUTANTS[0];
    if (!incident) throw new Error('no mutants');
    const report = explore(2, { ...DEFAULT_WORLD, heartbeat: true }, incident.variant, true);
    expect(report.violations.length).toBeGreaterThan(0);
  });
});
