import type { SseEvent } from '../../machines/client/io.js';

/**
 * About the size of an SSE event on the wire, as the progress rule counts bytes (machines/client/progress.ts).
 * The simulated events carry parsed messages, not text: a tool result's text is counted, plus the event's
 * id and field names, which is close enough to tell a large result (the `bulky` tool) from a small one.
 */
export function wireBytes(event: SseEvent): number {
  const result = (event.message as { result?: { content?: ReadonlyArray<{ text?: unknown }> } } | undefined)
    ?.result;
  let text = event.data?.length ?? 0;
  for (const part of result?.content ?? []) if (typeof part.text === 'string') text += part.text.length;
  return text + (event.id?.length ?? 0) + 8;
}

/**
 * A message larger than this reaches the client a chunk at a time, one `TRICKLE_GAP_MS` apart (a large
 * result on a slow link): so a result of a few hundred KiB takes longer than the stall timeout to arrive,
 * and only the progress rule keeps its stream from being cut as stalled.
 */
export const TRICKLE_CHUNK_BYTES = 16 * 1024;
export const TRICKLE_GAP_MS = 400;
