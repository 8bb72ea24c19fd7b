import {
  type CursorRecord,
  cursorFileSizeRefusal,
  recordOfCursorFile,
} from '../../machines/client/cursor.js';

/** The cursor-file checks a restarted process reads its file through (mutants swap one of them). */
export interface CursorFileRules {
  readonly sizeRefusal: typeof cursorFileSizeRefusal;
  readonly recordOf: typeof recordOfCursorFile;
}

export const CURSOR_FILE_RULES: CursorFileRules = {
  sizeRefusal: cursorFileSizeRefusal,
  recordOf: recordOfCursorFile,
};

/**
 * The client's cursor store, as a durable file store keeps it (src/client/cursor-store.ts `FileCursorStore`):
 * what a process saves is the file's content; a new process reads it back through the runtime's checks
 * (its size, then its version), and a file they refuse is not used (that process starts a session afresh).
 * The file is written only when it is read: records are never changed once saved, so the last one saved
 * is the text the file would hold.
 */
export class CursorStore {
  record: CursorRecord | null = null;

  /** What a restarted process reads: the record, or null when there is none or the checks refuse it. */
  readBack(rules: CursorFileRules): CursorRecord | null {
    const text = JSON.stringify({ version: 1, record: this.record });
    if (rules.sizeRefusal(Buffer.byteLength(text)) !== undefined) return null;
    const file = rules.recordOf(JSON.parse(text));
    return 'refusal' in file ? null : file.record;
  }
}
