import type { ClientKind, ServerKind } from './lib/stacks.js';
import { callsStack } from './rows/calls.js';
import { coldStart } from './rows/cold-start.js';
import { memoMemory } from './rows/memo-memory.js';
import { appendCost, eventsMemory, manySessions, sessionBreakdown, sessionsMemory } from './rows/memory.js';
import { callsModern, type ModernKind, notifyModern } from './rows/modern.js';
import { resumeModern } from './rows/modern-resume.js';
import { resumeLatency } from './rows/resume.js';
import { storeCalls, storeKeyedCalls, storeNotify, storeSessionAge } from './rows/stores.js';
import { notifyRaw, notifySdkClientOnly, notifyStack } from './rows/throughput.js';
import { exploreSpeed, propertyRuns } from './rows/verification.js';
import type { StoreKind } from './serve.js';

type Args = Record<string, unknown>;

const num = (args: Args, key: string, fallback: number): number =>
  typeof args[key] === 'number' ? (args[key] as number) : fallback;

/** Every task a child process can run, by name. Arguments come as one JSON object. */
export const TASKS: Record<string, (args: Args) => Promise<unknown>> = {
  notify: (a) =>
    notifyStack(
      a.server as ServerKind | 'raw',
      a.client as ClientKind,
      num(a, 'count', 100_000),
      num(a, 'timeoutMs', 120_000),
    ),
  'notify-client-only': (a) => notifySdkClientOnly(num(a, 'count', 100_000), num(a, 'timeoutMs', 120_000)),
  'notify-v2': (a) =>
    notifyModern(
      (a.server as ModernKind | undefined) ?? 'v2',
      num(a, 'count', 100_000),
      num(a, 'timeoutMs', 120_000),
    ),
  'calls-v2': (a) =>
    callsModern(
      (a.server as ModernKind | undefined) ?? 'v2',
      num(a, 'total', 5_000),
      num(a, 'concurrency', 50),
      num(a, 'timeoutMs', 120_000),
      a.tool === 'peek' ? 'peek' : 'echo',
      num(a, 'fresh', 1_000),
    ),
  'notify-raw': (a) => notifyRaw(num(a, 'count', 100_000), num(a, 'timeoutMs', 120_000)),
  calls: (a) =>
    callsStack(
      a.server as ServerKind,
      a.client as ClientKind,
      num(a, 'total', 5_000),
      num(a, 'concurrency', 50),
      num(a, 'timeoutMs', 120_000),
      num(a, 'fresh', 1_000),
    ),
  resume: (a) =>
    resumeLatency(
      a.server as 'ours' | 'sdk-store',
      (a.sizes as number[] | undefined) ?? [1_000, 10_000],
      num(a, 'repetitions', 30),
    ),
  'resume-2026': (a) =>
    resumeModern((a.sizes as number[] | undefined) ?? [1_000, 10_000], num(a, 'repetitions', 30)),
  'memory-sessions': (a) =>
    sessionsMemory(
      a.server as 'ours' | 'sdk',
      (a.mcp as 'bench' | 'bare' | undefined) ?? 'bench',
      num(a, 'n', 1_000),
      num(a, 'concurrency', 20),
    ),
  'memory-breakdown': (a) => sessionBreakdown(num(a, 'count', 1_000)),
  'memory-events': (a) => eventsMemory(num(a, 'events', 100_000)),
  'append-cost': (a) => appendCost(num(a, 'capacity', 10_000)),
  'cold-start': (a) => coldStart(num(a, 'rounds', 5)),
  'memo-memory': (a) => memoMemory(num(a, 'calls', 5_000), num(a, 'timeoutMs', 180_000)),
  'many-sessions': (a) => manySessions(num(a, 'n', 10_000), num(a, 'concurrency', 50)),
  'store-calls': (a) =>
    storeCalls(
      a.store as StoreKind,
      num(a, 'instances', 1),
      a.proxy === true,
      num(a, 'total', 1_000),
      num(a, 'concurrency', 50),
      num(a, 'timeoutMs', 180_000),
    ),
  'store-keyed': (a) =>
    storeKeyedCalls(
      a.store as StoreKind,
      num(a, 'instances', 1),
      num(a, 'total', 1_000),
      num(a, 'concurrency', 20),
      num(a, 'timeoutMs', 180_000),
      num(a, 'window', 1_000),
    ),
  'store-notify': (a) =>
    storeNotify(a.store as StoreKind, num(a, 'count', 10_000), num(a, 'timeoutMs', 180_000)),
  'store-age': (a) =>
    storeSessionAge(
      num(a, 'calls', 1_000),
      (a.marks as number[] | undefined) ?? [100, 1_000],
      num(a, 'timeoutMs', 200_000),
    ),
  'property-runs': async (a) => propertyRuns(num(a, 'runs', 2_000), num(a, 'seed', 42)),
  explore: async (a) => exploreSpeed(num(a, 'depth', 3)),
};
