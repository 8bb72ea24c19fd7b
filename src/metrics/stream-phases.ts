/**
 * Reads the client stream machine's state (machines/client/stream.machine.ts) as the phases a reconnect
 * goes through. Only names the machine already has: the machine decides, this only looks.
 */
export type StreamPhase = 'awaiting' | 'streaming' | 'deciding' | 'backoff' | 'done' | 'ended';

export function phaseOf(value: unknown): StreamPhase {
  if (typeof value === 'object' && value !== null && 'connecting' in value) {
    return (value as { connecting: unknown }).connecting === 'streaming' ? 'streaming' : 'awaiting';
  }
  if (value === 'deciding' || value === 'backoff' || value === 'done') return value;
  return 'ended';
}

/** What a stream machine's context says about the close being handled (see `CloseDecision`). */
export function closeReasonOf(context: unknown): string {
  const d = (context as { decision?: { action?: string; reason?: string } } | undefined)?.decision;
  if (d?.action === 'reconnect' && d.reason) return d.reason;
  return d?.action?.replace(/-/g, '_') ?? 'unknown';
}
