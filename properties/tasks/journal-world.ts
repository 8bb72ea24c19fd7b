import fc from 'fast-check';
import {
  DEFAULT_JOURNAL_POLICY,
  type JournalEntry,
  journalBegin,
  journalEnd,
  journalHandle,
} from '../../machines/tasks/task-journal.js';

/**
 * A simulated world for the client's task journal (machines/tasks/task-journal.ts): one application
 * making the same keyed task-creating call in process after process on one durable journal, each process
 * ending its own way (killed before or after its send reached the server, before or after the handle was
 * journaled; the call ending as outcome unknown before or after the handle; or the task's result read),
 * until a process reads the result. The server binds each key to one task (as the tasks runtime does).
 * The shell's order is the real one: the journal decided and stored, then the send, then the handle
 * stored, then the follow, then the end stored.
 */

export type ProcessFate =
  /** Killed after the entry was stored, before the send left. */
  | 'killedBeforeSend'
  /** The send reached the server (a task started), then the process was killed. */
  | 'killedAfterSend'
  /** The handle arrived and was journaled, then the process was killed. */
  | 'killedAfterHandle'
  /** The call ended as outcome unknown before any handle (a balancer outage past the re-issue budget). */
  | 'unknownBeforeHandle'
  /** The handle arrived; the task was unreachable for the follow's whole budget (task_unreachable). */
  | 'unreachable'
  /** The task's result was read. */
  | 'completes';

export interface JournalWorld {
  /** The fates of the processes before the last one, which completes. */
  readonly fates: readonly ProcessFate[];
}

export const journalWorldArb: fc.Arbitrary<JournalWorld> = fc.record({
  fates: fc.array(
    fc.constantFrom<ProcessFate>(
      'killedBeforeSend',
      'killedAfterSend',
      'killedAfterHandle',
      'unknownBeforeHandle',
      'unreachable',
    ),
    { maxLength: 6 },
  ),
});

/** The journal's rules the world drives: the core's, or a mutant's. */
export interface JournalRules {
  readonly begin: typeof journalBegin;
  readonly handle: typeof journalHandle;
  readonly end: typeof journalEnd;
}

export const JOURNAL_RULES: JournalRules = { begin: journalBegin, handle: journalHandle, end: journalEnd };

export interface JournalRun {
  /** Tasks the server started, by key. */
  readonly tasks: ReadonlyMap<string, string>;
  /** The task whose result the last process read. */
  readonly resultOf: string | undefined;
  /** The journal after the last process. */
  readonly journal: readonly JournalEntry[];
}

/** Runs the world: each process on the same durable journal, with the same call, bounded by `fates`. */
export function runJournalWorld(w: JournalWorld, rules: JournalRules = JOURNAL_RULES): JournalRun {
  let stored: readonly JournalEntry[] = [];
  const tasks = new Map<string, string>();
  let resultOf: string | undefined;
  const fates: ProcessFate[] = [...w.fates, 'completes'];
  fates.forEach((fate, n) => {
    // A new process: nothing claimed, the clock moved on a little (well inside the entries' age).
    const begun = rules.begin(
      stored,
      {
        fingerprint: 'charge(7)',
        url: 'http://lb/mcp',
        toolName: 'charge',
        keyed: true,
        claimed: new Set(),
        now: 1_000 + n,
      },
      `key-${n}`,
      DEFAULT_JOURNAL_POLICY,
    );
    if (begun.changed) stored = begun.entries;
    const start = begun.decision;
    if (start.kind === 'none') return;
    const key = start.entry.key;
    let taskId = start.kind === 'follow' ? start.entry.taskId : undefined;
    if (taskId === undefined) {
      if (fate === 'killedBeforeSend') return;
      // The server: the key's task, or a new one bound to it.
      taskId = tasks.get(key) ?? `task-${tasks.size}`;
      tasks.set(key, taskId);
      if (fate === 'killedAfterSend') return;
      if (fate === 'unknownBeforeHandle') {
        stored = rules.end(stored, key, { kind: 'answer', outcomeUnknown: true });
        return;
      }
      stored = rules.handle(stored, key, taskId, undefined);
    }
    if (fate === 'killedAfterHandle' || fate === 'killedBeforeSend' || fate === 'killedAfterSend') return;
    if (fate === 'unknownBeforeHandle' || fate === 'unreachable') {
      stored = rules.end(stored, key, {
        kind: 'task',
        outcome: { kind: 'unknown', reason: 'task_unreachable' },
      });
      return;
    }
    resultOf = taskId;
    stored = rules.end(stored, key, { kind: 'task', outcome: { kind: 'completed', result: {} } });
  });
  return { tasks, resultOf, journal: stored };
}

/**
 * The journal's property: however the processes before it ended, the application's call started one
 * task on the server, the process that read a result read that task's, and the journal is empty after it.
 */
export function oneTaskPerCall(run: JournalRun): boolean {
  const started = new Set(run.tasks.values());
  return (
    started.size === 1 && run.resultOf !== undefined && started.has(run.resultOf) && run.journal.length === 0
  );
}

/** Mutant: the fresh entry is not in the journal the shell stores before the send (written after it). */
export const journalsAfterSend: JournalRules = {
  ...JOURNAL_RULES,
  begin: (entries, call, key, policy) => {
    const d = journalBegin(entries, call, key, policy);
    return d.decision.kind === 'fresh' ? { ...d, entries, changed: false } : d;
  },
};

/** Mutant: every end drops the entry, an outcome unknown too. */
export const dropsOnUnknown: JournalRules = {
  ...JOURNAL_RULES,
  end: (entries, key) => entries.filter((e) => e.key !== key),
};

/** Mutant: a journaled key without a task id is not sent again (a fresh key instead). */
export const ignoresJournaledKey: JournalRules = {
  ...JOURNAL_RULES,
  begin: (entries, call, key, policy) => {
    const d = journalBegin(entries, call, key, policy);
    if (d.decision.kind !== 'reissue') return d;
    const fresh: JournalEntry = {
      key,
      fingerprint: call.fingerprint,
      url: call.url,
      toolName: call.toolName,
      writtenAt: call.now,
    };
    return { entries: [...d.entries, fresh], changed: true, decision: { kind: 'fresh', entry: fresh } };
  },
};
