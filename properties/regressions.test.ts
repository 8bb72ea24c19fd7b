import { describe, expect, it } from 'vitest';
import { CHECKS, excusedHeadAttachLosses, excusedQueuedAtEnd } from './checks.js';
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

/**
 * Open findings of the widened model (latency per message, faults before the first byte, long schedules).
 * The fixes belong in machines/; until then the checks excuse exactly these cases and `npm run verify`
 * counts them. Each test shows its finding still happens: when one fails, the machines were fixed, and
 * its excuse in checks.ts goes with it.
 */
describe('open findings, excused by the checks and counted', () => {
  const LOSSY: WorldConfig = {
    heartbeat: false,
    maxEventsPerStream: 5,
    retentionMs: 5_000,
    idleTtlMs: 30_000,
    latencyMaxMs: 10,
    seed: 0,
    dedupe: false,
  };

  it('a call queued while re-initializing is never answered when the application closes', () => {
    const outcome = runSchedule(
      [
        { kind: 'call', tool: 'charge' },
        { kind: 'serverRestart', durable: false },
        { kind: 'reset', pick: 0 },
        { kind: 'call', tool: 'charge' },
        { kind: 'closeAndReconnect' },
      ],
      LOSSY,
    );
    expect(outcome.hung).toEqual(['c2']);
    expect(excusedQueuedAtEnd(outcome)).toBe(1);
  });

  it('calls queued while re-initializing are never answered when the new initialize fails', () => {
    const outcome = runSchedule(
      [
        { kind: 'advance', ms: 28 },
        { kind: 'serverRestart', durable: false },
        { kind: 'advance', ms: 21 },
        { kind: 'partition', ms: 15_519 },
        { kind: 'advance', ms: 5_305 },
        { kind: 'advance', ms: 1_952 },
        { kind: 'serverError', count: 1 },
        { kind: 'advance', ms: 22 },
        { kind: 'advance', ms: 4_751 },
        { kind: 'call', tool: 'upsert' },
        { kind: 'advance', ms: 4_139 },
        { kind: 'call', tool: 'charge' },
      ],
      { ...LOSSY, heartbeat: true, maxEventsPerStream: 3, latencyMaxMs: 40, seed: 1308297749, dedupe: true },
    );
    expect(outcome.hung).toEqual(['c1', 'c2']);
    expect(excusedQueuedAtEnd(outcome)).toBe(2);
  });

  it('a standalone GET reset before its first byte: the next GET starts at the head and loses events', () => {
    const outcome = runSchedule(
      [
        { kind: 'call', tool: 'charge' },
        { kind: 'serverRestart', durable: false },
        { kind: 'call', tool: 'charge' },
        { kind: 'reset', pick: 0 },
        { kind: 'serverNotify' },
      ],
      { ...LOSSY, latencyMaxMs: 1 },
    );
    expect(excusedHeadAttachLosses(outcome)).toBe(1);
    expect(outcome.recorder.gaps.filter((g) => g.sessionId === 's2')).toEqual([]);
  });
});
