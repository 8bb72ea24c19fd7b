import { deepStrictEqual as equal } from 'node:assert/strict';
import { createActor, type SnapshotFrom } from 'xstate';
import { type RequestDecision, serverSessionMachine } from '../../../machines/server/session.machine.js';
import { coreOf, newEntries, watermarkOf } from '../../../machines/server/shared-record.js';
import type { EventLog, SessionRecord } from '../../server/event-log.js';
import { type ContractCase, ContractClock, withStores } from './harness.js';

type SessionSnapshot = SnapshotFrom<typeof serverSessionMachine>;

/** Stores a snapshot the way the session runtime does with this log: its shared store, its registry, or not at all. */
async function keep(
  log: EventLog,
  record: SessionRecord,
  before: SessionSnapshot | undefined,
  version: number,
) {
  const shared = log.shared;
  if (shared?.commitEntries && before) {
    const entries = newEntries(watermarkOf(before), record.snapshot) ?? [];
    await shared.commitEntries(
      { ...record, snapshot: coreOf(record.snapshot) },
      entries,
      watermarkOf(record.snapshot),
      version,
    );
  } else if (shared) await shared.commit(record, version);
  else await log.registry?.save(record);
}

/** What the log gives back to a process (or instance) restoring the session; undefined: it keeps nothing. */
async function restored(log: EventLog, id: string): Promise<unknown> {
  if (log.shared) return (await log.shared.load(id))?.record.snapshot;
  return (await log.registry?.load(id))?.snapshot;
}

/**
 * The request-id forgetting rule (machines/server/request-memory.ts) through a log: a session that
 * remembers 3 request streams admits 5; whatever the log keeps of it (a shared store's record, a
 * registry's, or nothing: the machine itself) remembers n:3..n:5 only. Restored from it, a re-send of a
 * remembered id is a duplicate on its original stream, a re-send of a forgotten one a new request.
 */
export function requestMemoryCase<L extends EventLog>(
  create: (now: () => number) => Promise<L> | L,
): ContractCase {
  return {
    name: 'a session restored from the log remembers the request ids the machine kept, and no others',
    run: () =>
      withStores<L>(async ({ open }) => {
        const clock = new ContractClock();
        const log = await open(create(clock.now));
        const input = { sessionId: 'memory', epoch: 'ep', idleTtlMs: 60_000, requestMemory: 3 };
        const actor = createActor(serverSessionMachine, { input }).start();
        const record = (snapshot: unknown): SessionRecord => ({
          id: 'memory',
          epoch: 'ep',
          initialize: { jsonrpc: '2.0', id: 0, method: 'initialize', params: {} },
          snapshot,
        });
        let before: SessionSnapshot | undefined;
        let version = 0;
        for (const batch of [
          [1, 2],
          [3, 4, 5],
        ]) {
          for (const i of batch) actor.send({ type: 'request.received', requestKey: `n:${i}` });
          const snapshot = actor.getPersistedSnapshot() as SessionSnapshot;
          await keep(log, record(snapshot), before, version++);
          before = structuredClone(snapshot);
        }
        const kept = ((await restored(log, 'memory')) ?? actor.getPersistedSnapshot()) as SessionSnapshot;
        equal(Object.keys(kept.context.requests).sort(), ['n:3', 'n:4', 'n:5'], 'the ids remembered');
        const again = createActor(serverSessionMachine, { input, snapshot: kept }).start();
        const decide = (requestKey: string): RequestDecision | undefined => {
          let decision: RequestDecision | undefined;
          const sub = again.on('decision.request', (e) => {
            decision = e.decision;
          });
          again.send({ type: 'request.received', requestKey });
          sub.unsubscribe();
          return decision;
        };
        equal(decide('n:4'), { kind: 'duplicate', stream: 4 }, 'a remembered id is never run again');
        equal(decide('n:1'), { kind: 'execute', stream: 6 }, 'a forgotten id is a new request');
        again.stop();
        actor.stop();
      }),
  };
}
