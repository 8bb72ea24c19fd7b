import type { FollowOutcome } from '../../../machines/tasks/task-follow.js';
import type { JournalEnding } from '../../../machines/tasks/task-journal.js';
import type { JournalBook, JournaledCall } from './task-journal.js';

/** What a journaled call's run tells the journal: the key it is sent with, its handle, its end. */
export interface CallJournal {
  /** The idempotency key every attempt carries (a resumed entry's, or a fresh one already journaled). */
  readonly key: string;
  /** The handle arrived: resolves once its task id is stored, before the first poll. */
  readonly handle: (taskId: string, lastEventId: string | undefined) => Promise<void>;
  /** The call ended: resolves once its entry is dropped or kept. */
  readonly ended: (ending: JournalEnding) => Promise<void>;
  /** The call stopped without an ending (its send or follow threw): the entry is kept and unclaimed. */
  readonly release: () => void;
}

/**
 * Runs one task-declaring `tools/call` through the journal (`machines/tasks/task-journal.ts` decides):
 * the entry is stored before `send` is called; a journaled task is followed by its id with `follow`
 * instead (the call is not sent again). A journal that cannot be written fails the call before anything
 * is sent.
 */
export async function journaledCall(
  book: JournalBook,
  call: JournaledCall,
  freshKey: string,
  send: (journal: CallJournal | undefined) => Promise<Response>,
  follow: (
    taskId: string,
    ended: (outcome: FollowOutcome) => Promise<void>,
    release: () => void,
  ) => Promise<Response>,
): Promise<Response> {
  const start = await book.begin(call, freshKey);
  if (start.kind === 'none') return send(undefined);
  const key = start.entry.key;
  const ended = (ending: JournalEnding) => book.end(key, ending);
  const release = () => book.release(key);
  // A call that fails before its Response exists (an aborted signal, a refused send) ends nothing: release.
  const released = (error: unknown) => {
    release();
    throw error;
  };
  if (start.kind === 'follow')
    return follow(start.entry.taskId as string, (outcome) => ended({ kind: 'task', outcome }), release).catch(
      released,
    );
  return send({
    key,
    handle: (taskId, lastEventId) => book.handle(key, taskId, lastEventId),
    ended,
    release,
  }).catch(released);
}
