import { type CursorRecord, newToken, type TokenMove, tokenMove } from '../../machines/client/cursor.js';

/**
 * The SDK's `onresumptiontoken` callbacks, by stream key (a call's, or a `resumeStream`'s): each new event id
 * of a watched stream is reported once, in order. A stream that has left the cursor record has ended, and
 * its callback is forgotten with it.
 */
export class ResumptionTokens {
  private readonly watched = new Map<string, { report: (token: string) => void; last?: string }>();

  constructor(private readonly onError: (error: unknown) => void) {}

  /** Reports each new event id of stream `key`; `from`, the id it resumes from, is not new. */
  watch(key: string, report: (token: string) => void, from?: string): void {
    this.watched.set(key, { report, last: from });
  }

  forget(key: string): void {
    this.watched.delete(key);
  }

  /** A message was handed to the application from event `eventId` of stream `key`. */
  delivered(key: string | undefined, eventId: string | undefined): void {
    if (this.watched.size === 0 || key === undefined || eventId === undefined) return;
    this.apply(key, newToken(eventId, this.watched.get(key)?.last));
  }

  /** The cursor record was written: a cursor that moved without a message is reported too. */
  persisted(record: CursorRecord | null): void {
    if (this.watched.size === 0) return;
    for (const [key, watcher] of [...this.watched]) this.apply(key, tokenMove(record, key, watcher.last));
  }

  /** Does what the cursor rules (machines/client/cursor.ts) say of one watched stream's token. */
  private apply(key: string, move: TokenMove): void {
    if (move.kind === 'forget') this.watched.delete(key);
    const watcher = this.watched.get(key);
    if (move.kind !== 'report' || !watcher) return;
    const token = move.token;
    watcher.last = token;
    try {
      watcher.report(token);
    } catch (error) {
      // The application's callback threw: reported, and the stream goes on.
      this.onError(error);
    }
  }
}
