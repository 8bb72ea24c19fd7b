import { type Actor, createActor, type InspectionEvent, type Observer } from 'xstate';
import type { RequestId } from '../../machines/jsonrpc.js';
import { KEYED_STREAM, type KeyedWorkState, type MemoEntry } from '../../machines/server/keyed-memo.js';
import { type KeyedRequestEvent, keyedRequestMachine } from '../../machines/server/keyed-request.machine.js';

/** An XState inspector: an observer, or a function of each inspection event. */
export type InspectOption = Observer<InspectionEvent> | ((event: InspectionEvent) => void);

interface Mirror {
  readonly actor: Actor<typeof keyedRequestMachine>;
  /** The work it mirrors: a refused key that runs again is a new work with a new log. */
  readonly logId: string;
}

/** Mirrors kept at once; beyond, the least recently touched is stopped (its card ends on the page). */
const DEFAULT_MAX_MIRRORS = 200;

/**
 * The server's keyed requests, for the inspector. The keyed runtime (src/server/keyed) never runs
 * `keyedRequestMachine` as an actor: each stored memo entry is stepped with `xstate.transition`
 * (`stepMemoEntry`), so a key's work can move on any instance and survive in any store. To show it, this
 * keeps one mirror actor per key this instance handles, created with XState's `inspect` option and sent
 * the events the runtime records (the body started, a re-issue attached, the outcome recorded). When the
 * mirror is not in the state the memo holds (the work moved on another instance), it is restored from
 * the stored entry. It decides nothing and the runtime never reads it.
 */
export class KeyedInspection {
  private readonly mirrors = new Map<string, Mirror>();

  constructor(
    private readonly inspect: InspectOption,
    private readonly maxMirrors = DEFAULT_MAX_MIRRORS,
  ) {}

  /** This instance starts the body of `entry` for the attempt `attemptId`: a new work, from its start. */
  started(entry: MemoEntry, attemptId: RequestId): void {
    this.stop(entry.memoKey);
    const actor = createActor(keyedRequestMachine, {
      input: { memoKey: entry.memoKey, fingerprint: entry.fingerprint, attacher: String(attemptId) },
      inspect: this.inspect,
    });
    this.keep(entry, actor);
    actor.start();
  }

  /** An attempt is served from the key's log without starting anything (a re-issue, attached or replayed). */
  attached(entry: MemoEntry, attemptId: RequestId, afterSeq: number): void {
    this.mirrorOf(entry).send({
      type: 'reissue.arrived',
      attacher: String(attemptId),
      fingerprint: entry.fingerprint,
      resume: { kind: 'replay', stream: KEYED_STREAM, afterSeq },
    });
  }

  /**
   * The runtime recorded `event` over `before` (compare-and-set); `after` is what the memo holds now.
   * Without watchers the machine records `committed`, with them `answered`: the mirror is told who is
   * watching by letting its streams go first.
   */
  recorded(
    before: MemoEntry,
    event: KeyedRequestEvent,
    watched: boolean,
    after: MemoEntry | undefined,
  ): void {
    const mirror = this.mirrorOf(before);
    const finishing = event.type === 'tool.finished' || event.type === 'tool.refused';
    if (finishing && !watched) {
      for (const attacher of mirror.getSnapshot().context.attached)
        mirror.send({ type: 'stream.closed', attacher });
    }
    mirror.send(event);
    if (after && after.logId === before.logId) this.mirrorOf(after);
  }

  /** The mirror of `entry`'s work in `entry`'s state: the one kept, or one restored from the entry. */
  private mirrorOf(entry: MemoEntry): Actor<typeof keyedRequestMachine> {
    const kept = this.mirrors.get(entry.memoKey);
    if (kept && kept.logId === entry.logId && workState(kept.actor.getSnapshot().value) === entry.state) {
      this.mirrors.delete(entry.memoKey);
      this.mirrors.set(entry.memoKey, kept);
      return kept.actor;
    }
    this.stop(entry.memoKey);
    const snapshot = keyedRequestMachine.resolveState({
      value:
        entry.state === 'committed' || entry.state === 'answered' ? { finished: entry.state } : entry.state,
      context: {
        memoKey: entry.memoKey,
        fingerprint: entry.fingerprint,
        attached: [],
        outcome: entry.outcome,
      },
    });
    const actor = createActor(keyedRequestMachine, {
      snapshot,
      // Unused when restoring from a snapshot; the type asks for it.
      input: { memoKey: entry.memoKey, fingerprint: entry.fingerprint, attacher: '' },
      inspect: this.inspect,
    });
    this.keep(entry, actor);
    actor.start();
    return actor;
  }

  private keep(entry: MemoEntry, actor: Actor<typeof keyedRequestMachine>): void {
    this.mirrors.set(entry.memoKey, { actor, logId: entry.logId });
    for (const [key, mirror] of this.mirrors) {
      if (this.mirrors.size <= this.maxMirrors) break;
      mirror.actor.stop();
      this.mirrors.delete(key);
    }
  }

  private stop(memoKey: string): void {
    this.mirrors.get(memoKey)?.actor.stop();
    this.mirrors.delete(memoKey);
  }
}

/** The machine's state as the memo stores it (`finished.committed` → `committed`). */
function workState(value: unknown): KeyedWorkState | undefined {
  if (typeof value === 'string') return value as KeyedWorkState;
  const finished = (value as { finished?: unknown } | null)?.finished;
  return finished === 'committed' || finished === 'answered' ? finished : undefined;
}
