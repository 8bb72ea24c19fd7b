import { readFile, stat } from 'node:fs/promises';
import {
  type CursorRecord,
  cursorFileSizeRefusal,
  MAX_CURSOR_FILE_BYTES,
  recordOfCursorFile,
} from '../../machines/client/cursor.js';
import { replaceFileDurably } from './durable-file.js';
import { LatestWrite } from './latest-write.js';

/**
 * Where the client keeps its cursor (session id and last event id per stream), written once the events
 * of each network chunk are delivered. Only a durable store satisfies the design note's condition 1
 * across a restart. `cursorStoreContract` (`mcp-continuity/testing`) is the suite every store passes.
 */
export interface CursorStore {
  /** True when the record survives the process. */
  readonly durable: boolean;
  load(): Promise<CursorRecord | null>;
  /** Writes the latest record (null: forget it). Writes may be coalesced; the last one wins. */
  save(record: CursorRecord | null): Promise<void>;
}

/** Keeps the cursor in memory: resumes across dropped connections, not across a restart. The default. */
export class MemoryCursorStore implements CursorStore {
  readonly durable = false;
  private record: CursorRecord | null = null;
  async load(): Promise<CursorRecord | null> {
    return this.record;
  }
  async save(record: CursorRecord | null): Promise<void> {
    this.record = record;
  }
}

/** The largest cursor file `FileCursorStore` reads (machines/client/cursor.ts says why). */
export { MAX_CURSOR_FILE_BYTES };

/**
 * Keeps the cursor in a JSON file, written atomically: a temporary file, fsync, then rename over the
 * old one, so a crash leaves either the old record or the new one, never half of one. Saves that arrive
 * while a write is under way are coalesced into one more write of the newest record.
 */
export class FileCursorStore implements CursorStore {
  readonly durable = true;
  private readonly saves = new LatestWrite<CursorRecord | null>((record) => this.write(record));

  constructor(readonly path: string) {}

  async load(): Promise<CursorRecord | null> {
    let text: string;
    try {
      const refusal = cursorFileSizeRefusal((await stat(this.path)).size);
      if (refusal !== undefined) throw new Error(`${this.path}: ${refusal}`);
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
    const file = recordOfCursorFile(JSON.parse(text));
    if ('refusal' in file) throw new Error(`${this.path}: ${file.refusal}`);
    return file.record;
  }

  save(record: CursorRecord | null): Promise<void> {
    return this.saves.push(record);
  }

  private async write(record: CursorRecord | null): Promise<void> {
    await replaceFileDurably(this.path, JSON.stringify({ version: 1, record }));
  }
}
