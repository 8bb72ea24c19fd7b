import { randomUUID } from 'node:crypto';
import { createParser } from 'eventsource-parser';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import { PROTOCOL_2026, startModernOurs } from '../lib/modern.js';
import { summarize } from '../lib/stats.js';
import type { ResumeResult } from './resume.js';

/**
 * Row 3 on MCP 2026-07-28 with the continuity extension: the revision has no `Last-Event-ID`, but a keyed
 * call's events are kept in its key's log, and a re-issue (a new id, the same key, `lastEventId: null`)
 * gets every one of them and the recorded result. For each size: one keyed `stream {count}` call, then
 * `repetitions` re-issues, each timed from its POST to the end of its response (count + 1 messages, in
 * order), read with fetch + eventsource-parser (every data line JSON-parsed). After 3 warm-up re-issues.
 */
export async function resumeModern(sizes: readonly number[], repetitions: number): Promise<ResumeResult[]> {
  const remote = await startModernOurs({ maxEventsPerStream: Math.max(...sizes) + 10 });
  const results: ResumeResult[] = [];
  let ids = 0;
  const post = async (count: number, key: string, reissue: boolean) => {
    const id = ++ids;
    const meta: Record<string, unknown> = {
      'io.modelcontextprotocol/protocolVersion': PROTOCOL_2026,
      'io.modelcontextprotocol/clientInfo': { name: 'bench-2026', version: '1.0.0' },
      'io.modelcontextprotocol/clientCapabilities': {},
      progressToken: `p${id}`,
      [ContinuityMeta.idempotencyKey]: key,
      ...(reissue ? { [ContinuityMeta.lastEventId]: null } : {}),
    };
    const response = await fetch(remote.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': PROTOCOL_2026,
        'mcp-method': 'tools/call',
        'mcp-name': 'stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'stream', arguments: { count }, _meta: meta },
      }),
      signal: AbortSignal.timeout(120_000),
    });
    if (response.status !== 200 || !response.body) throw new Error(`ours-2026: HTTP ${response.status}`);
    let messages = 0;
    let outOfOrder = 0;
    let last = 0;
    let answered = false;
    const parser = createParser({
      onEvent: (e) => {
        const m = JSON.parse(e.data) as { id?: unknown; params?: { progress?: number } };
        messages++;
        if (m.id === id) answered = true;
        const n = m.params?.progress;
        if (typeof n === 'number') {
          if (n !== last + 1) outOfOrder++;
          last = n;
        }
      },
    });
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
    if (!answered) throw new Error('ours-2026: the response ended without the answer');
    return { messages, outOfOrder };
  };
  try {
    for (const events of sizes) {
      const key = randomUUID();
      const first = await post(events, key, false);
      if (first.messages !== events + 1) {
        throw new Error(`ours-2026: the call delivered ${first.messages} messages, expected ${events + 1}`);
      }
      let delivered = 0;
      let outOfOrder = 0;
      const reissueOnce = async () => {
        const start = performance.now();
        const r = await post(events, key, true);
        const ms = performance.now() - start;
        if (r.messages !== events + 1 || r.outOfOrder > 0) {
          throw new Error(
            `ours-2026: re-issue delivered ${r.messages} of ${events + 1}, ${r.outOfOrder} out of order`,
          );
        }
        delivered = r.messages;
        outOfOrder = r.outOfOrder;
        return ms;
      };
      for (let i = 0; i < 3; i++) await reissueOnce();
      const samples: number[] = [];
      for (let i = 0; i < repetitions; i++) samples.push(await reissueOnce());
      const s = summarize(samples);
      results.push({
        server: 'ours-2026',
        events,
        repetitions,
        medianMs: s.median,
        p99Ms: s.p99,
        minMs: s.min,
        maxMs: s.max,
        delivered,
        outOfOrder,
      });
    }
  } finally {
    await remote.close();
  }
  return results;
}
