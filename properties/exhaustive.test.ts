import { describe, expect, it } from 'vitest';
import { EXHAUSTIVE_DEPTH } from './budget.js';
import { explore } from './exhaustive.js';
import { MUTANTS } from './mutants.js';
import { DEFAULT_WORLD } from './world/world.js';

describe('bounded exhaustive exploration', () => {
  for (const heartbeat of [true, false]) {
    it(`every schedule up to depth ${EXHAUSTIVE_DEPTH} holds every property (heartbeat ${heartbeat ? 'on' : 'off'})`, () => {
      const report = explore(EXHAUSTIVE_DEPTH, { ...DEFAULT_WORLD, heartbeat });
      console.info(
        `depth ${EXHAUSTIVE_DEPTH}, heartbeat ${heartbeat}: ${report.schedules} schedules, ` +
          `${report.distinctStates} distinct world states, ${Math.round(report.elapsedMs)} ms`,
      );
      expect(report.violations.slice(0, 3)).toEqual([]);
      expect(report.schedules).toBeGreaterThan(1_000);
    });
  }

  it('catches the design note incident client within depth 2', () => {
    const incident = MUTANTS[0];
    if (!incident) throw new Error('no mutants');
    const report = explore(2, { ...DEFAULT_WORLD, heartbeat: true }, incident.variant, true);
    expect(report.violations.length).toBeGreaterThan(0);
  });
});
