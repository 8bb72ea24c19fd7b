import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileCursorStore, MAX_CURSOR_FILE_BYTES } from '../../src/client/cursor-store.js';

/** The cursor file is read from disk at start: a file of any size or origin must not be trusted blindly. */
const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});
const tempFile = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'mcpc-cursor-'));
  dirs.push(dir);
  return join(dir, 'cursor.json');
};

describe('FileCursorStore bounds', () => {
  it(`refuses a file larger than ${MAX_CURSOR_FILE_BYTES} bytes instead of reading it`, async () => {
    const file = await tempFile();
    await writeFile(
      file,
      JSON.stringify({
        version: 1,
        record: { sessionId: 's', streams: {}, pad: 'x'.repeat(MAX_CURSOR_FILE_BYTES) },
      }),
    );
    await expect(new FileCursorStore(file).load()).rejects.toThrow(/more than a cursor record may hold/);
  });

  it('keeps the server URL a record belongs to', async () => {
    const file = await tempFile();
    const store = new FileCursorStore(file);
    await store.save({ serverUrl: 'http://127.0.0.1:1/mcp', sessionId: 's', streams: {} });
    expect((await new FileCursorStore(file).load())?.serverUrl).toBe('http://127.0.0.1:1/mcp');
  });
});
