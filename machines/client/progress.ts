import { STALL_PROGRESS_BYTES } from './limits.js';

/**
 * The progress rule, one for both eras' clients (the 2025 exchange core, `exchange-core.ts`, and the
 * 2026 call core, `call-core.ts`): bytes that complete a unit (an SSE event, a comment, a `retry:`)
 * prove life at once; bytes that complete nothing (an event still arriving, a JSON body) prove it only
 * once `threshold` of them have arrived since the last unit. So a large message arriving steadily is not
 * stalled, while a trickle of a few bytes per stall interval is.
 */
export interface ProgressStep {
  /** Bytes since the last complete unit or the last proof of life, after this chunk. */
  readonly partial: number;
  /** This chunk's incomplete bytes, with those before it, reached the threshold: the stream is alive. */
  readonly alive: boolean;
}

/**
 * One chunk of `bytes` after `partial` bytes that completed nothing; `completed`: the chunk completed a
 * unit (which is proof of life on its own: the caller reports it as such). Pure.
 */
export function progressStep(
  partial: number,
  bytes: number,
  completed: boolean,
  threshold: number = STALL_PROGRESS_BYTES,
): ProgressStep {
  if (completed) return { partial: 0, alive: false };
  const next = partial + bytes;
  return next >= threshold ? { partial: 0, alive: true } : { partial: next, alive: false };
}
