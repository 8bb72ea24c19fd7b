import { describe, expect, it } from 'vitest';
import { CHECKS } from './checks.js';
import type { Command, WorldConfig } from './world/world.js';
import { runSchedule } from './world/world.js';

/**
 * Counterexamples that long `npm run verify` runs found, kept as fixed schedules once fixed, so they
 * stay fixed. Each names what was wrong.
 */
const NO_HEARTBEAT: WorldConfig = {
  heartbeat: false,
  maxEventsPerStream: 2,
  retentionMs: 5_000,
  idleTtlMs: 30_000,
};

const cases: Array<{ name: string; config: WorldConfig; commands: Command[] }> = [
  {
    name: 'a restored request stream with no cursor flagged its loss without the session id',
    config: NO_HEARTBEAT,
    commands: [
      { kind: 'clientRestart', durable: false },
      { kind: 'serverRestart', durable: false },
      { kind: 'call', tool: 'upsert' },
      { kind: 'clientRestart', durable: true },
      { kind: 'advance', ms: 1 },
    ],
  },
  {
    name: 'after a 410 the new cursor was not persisted, so a restarted client reported the gap twice',
    config: NO_HEARTBEAT,
    commands: [
      { kind: 'advance', ms: 1 },
      { kind: 'serverError', count: 4 },
      { kind: 'endStream', pick: 0 },
      { kind: 'serverNotify' },
      { kind: 'advance', ms: 4985 },
      { kind: 'call', tool: 'charge' },
      { kind: 'clientRestart', durable: true },
      { kind: 'clientRestart', durable: true },
      { kind: 'advance', ms: 1 },
    ],
  },
  {
    name: 'an initialize that gave up during a partition left the application waiting',
    config: NO_HEARTBEAT,
    commands: [
      { kind: 'partition', ms: 12300 },
      { kind: 'clientRestart', durable: false },
      { kind: 'advance', ms: 377 },
      { kind: 'call', tool: 'charge' },
      { kind: 'advance', ms: 5576 },
      { kind: 'advance', ms: 1064 },
      { kind: 'advance', ms: 5247 },
    ],
  },
  {
    name: 'a restored request stream that gave up during a partition lost its answer without a gap report',
    config: NO_HEARTBEAT,
    commands: [
      { kind: 'call', tool: 'charge' },
      { kind: 'partition', ms: 9123 },
      { kind: 'clientRestart', durable: true },
      { kind: 'advance', ms: 5251 },
      { kind: 'reset', pick: 0 },
      { kind: 'call', tool: 'charge' },
      { kind: 'advance', ms: 5992 },
      { kind: 'serverNotify' },
      { kind: 'endStream', pick: 3 },
    ],
  },
  {
    name: 'closing while a call waited to be re-sent on a new session settled it twice',
    config: NO_HEARTBEAT,
    commands: [
      { kind: 'call', tool: 'chatty' },
      { kind: 'serverRestart', durable: false },
      { kind: 'endStream', pick: 0 },
      { kind: 'serverNotify' },
      { kind: 'advance', ms: 83 },
      { kind: 'closeAndReconnect' },
      { kind: 'clientRestart', durable: false },
    ],
  },
  {
    name: 'a response that ended before its status line left the stream waiting forever',
    config: { heartbeat: true, maxEventsPerStream: 9, retentionMs: 5_000, idleTtlMs: 30_000 },
    commands: [
      { kind: 'endStream', pick: 0 },
      { kind: 'call', tool: 'slow' },
      { kind: 'serverNotify' },
      { kind: 'advance', ms: 5997 },
      { kind: 'advance', ms: 4946 },
      { kind: 'endStream', pick: 4 },
    ],
  },
];

describe('regressions found by long verification', () => {
  for (const c of cases) {
    it(c.name, () => {
      const outcome = runSchedule(c.commands, c.config);
      const violations = Object.entries(CHECKS).flatMap(([name, check]) =>
        check(outcome).map((v) => `${name}: ${v}`),
      );
      expect(violations).toEqual([]);
    });
  }
});
