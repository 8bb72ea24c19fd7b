import { RawSession } from '../lib/raw.js';
import { startRemote } from '../lib/remote.js';
import { summarize } from '../lib/stats.js';

/** Row 3: time to receive every replayed event of a retained stream, resuming from its start. */
export interface ResumeResult {
  readonly server: 'ours' | 'sdk-store' | 'ours-2026';
  readonly events: number;
  readonly repetitions: number;
  readonly medianMs: number;
  readonly p99Ms: number;
  readonly minMs: number;
  readonly maxMs: number;
  /** Messages the last replay delivered (expected: events + 1, the call's result included). */
  readonly delivered: number;
  /** Progress notifications of the last replay that came out of order. */
  readonly outOfOrder: number;
}

/** After the last replayed message, the SDK's resumed stream stays open: this much silence ends a replay. */
const SDK_IDLE_END_MS = 250;

/**
 * For each size: a fresh session; a `stream {count}` call leaves `count` notifications + its result on one
 * request stream; then `repetitions` times: GET + Last-Event-ID = the stream's priming id, read with fetch
 * + eventsource-parser (every data line JSON-parsed), timed from the GET to the last replayed message.
 *
 * Ours ends the response once a finished stream is replayed, so its time is the time to the end of the
 * response, and it must deliver exactly count + 1 messages in order. The SDK keeps a resumed stream open:
 * its replay ends after 250 ms of silence, and is timed to its last message.
 */
export async function resumeLatency(
  server: 'ours' | 'sdk-store',
  sizes: readonly number[],
  repetitions: number,
): Promise<ResumeResult[]> {
  const maxEventsPerStream = Math.max(...sizes) + 10;
  const remote = await startRemote(server, server === 'ours' ? { maxEventsPerStream } : {});
  const results: ResumeResult[] = [];
  try {
    for (const events of sizes) {
      const session = new RawSession(remote.url);
      await session.initialize();
      const call = await session.call('stream', { count: events }, 120_000);
      if (call.messages !== events + 1 || call.firstId === undefined) {
        throw new Error(
          `${server}: the stream call delivered ${call.messages} messages, expected ${events + 1}`,
        );
      }
      let delivered = 0;
      let outOfOrder = 0;
      const resumeOnce = async () => {
        const start = performance.now();
        const r = await session.resume(
          call.firstId as string,
          server === 'ours'
            ? { timeoutMs: 60_000 }
            : { timeoutMs: 60_000, stopAfter: events + 1, idleEndMs: SDK_IDLE_END_MS },
        );
        const end = server === 'ours' ? performance.now() : r.lastMessageAt;
        if (r.status !== 200) throw new Error(`${server}: resume got HTTP ${r.status} ${r.text ?? ''}`);
        if (server === 'ours' && (r.messages !== events + 1 || r.outOfOrder > 0)) {
          throw new Error(
            `${server}: resume delivered ${r.messages} of ${events + 1}, ${r.outOfOrder} out of order`,
          );
        }
        delivered = r.messages;
        outOfOrder = r.outOfOrder;
        return end - start;
      };
      for (let i = 0; i < 3; i++) await resumeOnce();
      const samples: number[] = [];
      for (let i = 0; i < repetitions; i++) samples.push(await resumeOnce());
      const s = summarize(samples);
      results.push({
        server,
        events,
        repetitions,
        medianMs: s.median,
        p99Ms: s.p99,
        minMs: s.min,
        maxMs: s.max,
        delivered,
        outOfOrder,
      });
      await session.terminate();
    }
  } finally {
    await remote.close();
  }
  return results;
}
