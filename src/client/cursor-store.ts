import { randomBytes } from 'node:crypto';
import { open, readFile, rename, stat, unlink } from 'node:fs/promises';
import type { CursorRecord } from '../../machines/client/cursor.js';
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

/**
 * The largest cursor file `FileCursorStore` reads. A record holds a session id, the initialize request and
 * one bounded event id per open stream (`MAX_EVENT_ID_LENGTH`), so a larger file is not one of ours.
 */
export const MAX_CURSOR_FILE_BYTES = 4 * 1024 * 1024;

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
      const { size } = await stat(this.path);
      if (size > MAX_CURSOR_FILE_BYTES)
        throw new Error(
          `${this.path}: ${size} bytes, more than a cursor record may hold (${MAX_CURSOR_FILE_BYTES})`,
        );
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
    const parsed = JSON.parse(text) as { version?: number; record?: CursorRecord | null };
    if (parsed.version !== 1)
      throw new Error(`${this.path}: not an mcp-continuity cursor file (version ${parsed.version})`);
    return parsed.record ?? null;
  }

  save(record: CursorRecord | null): Promise<void> {
    return this.saves.push(record);
  }

  private async write(record: CursorRecord | null): Promise<void> {
    const temp = `${this.path}.${randomBytes(4).toString('hex')}.tmp`;
    const file = await open(temp, 'w');
    try {
      await file.writeFile(JSON.stringify({ version: 1, record }));
      await file.sync();
    } finally {
      await file.close();
    }
    try {
      await rename(temp, this.path);
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw error;
    }
  }
}
