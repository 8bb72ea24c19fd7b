import type { CursorRecord } from '../../machines/client/cursor.js';

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
    this.moved(key, eventId);
  }

  /** The cursor record was written: a cursor that moved without a message is reported too. */
  persisted(record: CursorRecord | null): void {
    if (this.watched.size === 0) return;
    for (const key of [...this.watched.keys()]) {
      const cursor = record?.streams[key];
      if (cursor === undefined) this.watched.delete(key);
      else if (cursor.lastEventId !== undefined) this.moved(key, cursor.lastEventId);
    }
  }

  private moved(key: string, token: string): void {
    const watcher = this.watched.get(key);
    if (!watcher || watcher.last === token) return;
    watcher.last = token;
    try {
      watcher.report(token);
    } catch (error) {
      // The application's callback threw: reported, and the stream goes on.
      this.onError(error);
    }
  }
}
