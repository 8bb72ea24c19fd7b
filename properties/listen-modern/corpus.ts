import type { ListenMissed } from '../../machines/client/listen.machine.js';
import { BIG_LIMITS, type ListenScenario, type ListenWorldConfig } from './schedule.js';

/**
 * Directed listen worlds: one per branch the properties judge, each with the gaps it must end with. They
 * run in the properties test (their expectations), and seed the mutants test (fast-check examples), so a
 * mutant of a branch meets that branch in its first worlds.
 */
export interface DirectedListen extends ListenScenario {
  readonly name: string;
  readonly gaps: readonly { readonly missed: ListenMissed; readonly relist: readonly string[] }[];
}

const base: ListenWorldConfig = {
  filter: { toolsListChanged: true, resourceSubscriptions: ['file:///a'] },
  limits: BIG_LIMITS,
  latencyMaxMs: 1,
  subscribeGapMaxMs: 0,
  extension: true,
  seed: 3,
};
const ALL = ['tools', 'resource:file:///a'];

export const DIRECTED_LISTEN: readonly DirectedListen[] = [
  {
    name: 'a break: the changes the filter accepts, exactly, and only their types re-listed',
    config: base,
    commands: [
      { kind: 'advance', ms: 10 },
      { kind: 'publish', change: 0 },
      { kind: 'advance', ms: 10 },
      { kind: 'cut', clean: false, afterMs: 0 },
      { kind: 'publish', change: 3 },
      { kind: 'publish', change: 5 },
      { kind: 'publish', change: 1 },
      { kind: 'publish', change: 3 },
      { kind: 'advance', ms: 200 },
    ],
    gaps: [{ missed: { kind: 'exact', count: 2 }, relist: ['resource:file:///a'] }],
  },
  {
    name: 'a break with nothing missed: exact 0, nothing re-listed',
    config: base,
    commands: [
      { kind: 'advance', ms: 10 },
      { kind: 'publish', change: 0 },
      { kind: 'advance', ms: 10 },
      { kind: 'cut', clean: true, afterMs: 0 },
      { kind: 'publish', change: 1 },
      { kind: 'advance', ms: 200 },
    ],
    gaps: [{ missed: { kind: 'exact', count: 0 }, relist: [] }],
  },
  {
    name: 'a change published while the re-open waits to be subscribed is counted on it, once',
    config: { ...base, subscribeGapMaxMs: 30, seed: 5 },
    commands: [
      { kind: 'advance', ms: 40 },
      { kind: 'cut', clean: false, afterMs: 0 },
      // The re-open leaves at 44 (its backoff), arrives at 45; the SDK subscribes it later than 46.
      { kind: 'advance', ms: 6 },
      { kind: 'publish', change: 0 },
      { kind: 'advance', ms: 200 },
      // The next break counts from where that re-open subscribed: nothing.
      { kind: 'cut', clean: false, afterMs: 0 },
      { kind: 'advance', ms: 200 },
    ],
    gaps: [
      { missed: { kind: 'exact', count: 1 }, relist: ['tools'] },
      { missed: { kind: 'exact', count: 0 }, relist: [] },
    ],
  },
  {
    name: "a re-open whose ack was lost: the next one's gap spans both, exactly",
    config: base,
    commands: [
      { kind: 'advance', ms: 10 },
      { kind: 'cut', clean: false, afterMs: 0 },
      { kind: 'publish', change: 0 },
      { kind: 'cut', clean: false, afterMs: 1 },
      { kind: 'publish', change: 0 },
      { kind: 'advance', ms: 200 },
    ],
    gaps: [{ missed: { kind: 'exact', count: 2 }, relist: ['tools'] }],
  },
  {
    name: 'a black hole: silence until the stall timer, then the changes swallowed, exactly',
    config: base,
    commands: [
      { kind: 'advance', ms: 10 },
      { kind: 'publish', change: 0 },
      { kind: 'advance', ms: 10 },
      { kind: 'blackhole', afterMs: 0 },
      { kind: 'publish', change: 0 },
      { kind: 'publish', change: 3 },
      { kind: 'advance', ms: 400 },
    ],
    gaps: [{ missed: { kind: 'exact', count: 2 }, relist: ['tools', 'resource:file:///a'] }],
  },
  {
    name: 'a restart: another epoch, unknown, everything re-listed',
    config: base,
    commands: [
      { kind: 'advance', ms: 10 },
      { kind: 'publish', change: 0 },
      { kind: 'restart', downMs: 10 },
      { kind: 'advance', ms: 200 },
    ],
    gaps: [{ missed: { kind: 'unknown' }, relist: ALL }],
  },
  {
    name: 'more changes than the log holds: unknown',
    config: { ...base, limits: { retentionMs: BIG_LIMITS.retentionMs, maxChanges: 2 } },
    commands: [
      { kind: 'advance', ms: 10 },
      { kind: 'cut', clean: false, afterMs: 0 },
      { kind: 'publish', change: 0 },
      { kind: 'publish', change: 0 },
      { kind: 'publish', change: 0 },
      { kind: 'advance', ms: 200 },
    ],
    gaps: [{ missed: { kind: 'unknown' }, relist: ALL }],
  },
  {
    name: 'changes older than the log keeps: unknown',
    config: { ...base, limits: { retentionMs: 5, maxChanges: BIG_LIMITS.maxChanges } },
    commands: [
      { kind: 'advance', ms: 10 },
      { kind: 'cut', clean: false, afterMs: 0 },
      { kind: 'publish', change: 0 },
      { kind: 'cut', clean: false, afterMs: 0 },
      { kind: 'cut', clean: false, afterMs: 0 },
      { kind: 'advance', ms: 200 },
    ],
    gaps: [{ missed: { kind: 'unknown' }, relist: ALL }],
  },
  {
    name: 'a server without the listen part: unknown, everything re-listed',
    config: { ...base, extension: false },
    commands: [
      { kind: 'advance', ms: 10 },
      { kind: 'cut', clean: false, afterMs: 0 },
      { kind: 'advance', ms: 200 },
    ],
    gaps: [{ missed: { kind: 'unknown' }, relist: ALL }],
  },
];
