import { createParser, type ParserCallbacks } from 'eventsource-parser';
import { overByteCap } from '../../machines/client/limits.js';

/**
 * A response body as text, read chunk by chunk, or `undefined` once it passes `limit` bytes (nothing
 * more is read: the rest is cancelled). Whether a size is over the cap is the machines' decision
 * (`overByteCap`); this only reads. `onChunk` is told the size of every chunk (activity for a stall
 * clock). Both eras' clients read non-stream bodies with it.
 */
export async function readCappedText(
  response: Response,
  limit: number,
  onChunk: (bytes: number) => void = () => undefined,
): Promise<string | undefined> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const decoder = new TextDecoder();
  let text = '';
  let size = 0;
  for (;;) {
    const chunk = await reader.read();
    if (chunk.done) return text + decoder.decode();
    size += chunk.value.byteLength;
    if (overByteCap(size, limit)) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    onChunk(chunk.value.byteLength);
    text += decoder.decode(chunk.value, { stream: true });
  }
}

/**
 * An SSE parser that holds at most `limit` bytes of one event: `feed` answers `over-cap` once an event
 * passed it (the caller cuts the stream; the parser's buffer is what bounds the memory). Both eras'
 * clients read event streams with it.
 */
export function cappedEventParser(
  limit: number,
  callbacks: Omit<ParserCallbacks, 'onError'>,
): { feed(text: string): 'ok' | 'over-cap' } {
  let overflow = false;
  const parser = createParser({
    ...callbacks,
    maxBufferSize: limit,
    onError: (error) => {
      if (error.type === 'max-buffer-size-exceeded') overflow = true;
    },
  });
  return {
    feed(text) {
      parser.feed(text);
      return overflow ? 'over-cap' : 'ok';
    },
  };
}
