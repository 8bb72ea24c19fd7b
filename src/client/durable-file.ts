import { randomBytes } from 'node:crypto';
import { open, rename, unlink } from 'node:fs/promises';

/**
 * Replaces the file at `path` with `text` so that a crash (kill -9, power loss) leaves the old content or
 * the new, never half of one: written to a temporary file beside it, fsynced, then renamed over it. What
 * the client keeps to survive a restart (the 2025 cursor record, the task journal) is written this way.
 */
export async function replaceFileDurably(path: string, text: string): Promise<void> {
  const temp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  const file = await open(temp, 'w');
  try {
    await file.writeFile(text);
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
}
