import { describe, expect, it } from 'vitest';
import { ContinuityErrorCode, ContinuityMeta } from '../../machines/continuity-extension.js';
import type { JsonRpcRequest } from '../../machines/jsonrpc.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';

/**
 * The SDK's response breaking before its answer (its stream errors): the side effect may have happened,
 * so the runtime declares the key outcome unknown (`keyedBodyEndSteps`) and the attached response ends
 * with -32012, instead of the entry staying `running` under its live owner forever.
 */
describe('keyed runtime: a body whose SDK stream breaks before the answer', () => {
  it('the attached response ends -32012 and the entry is no longer running', async () => {
    const memo = new MemoryMemoStore({ memoWindowMs: 60_000 });
    const keyed = createKeyedRequests({ log: new MemoryEventLog(), memo, pollMs: 50 });
    const message: JsonRpcRequest = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'charge', arguments: {}, _meta: { [ContinuityMeta.idempotencyKey]: 'broken-1' } },
    };
    const encoder = new TextEncoder();
    // What the SDK answers: one progress event, then the stream fails.
    const run = async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(controller) {
            const progress = { jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } };
            controller.enqueue(encoder.encode(`data: ${JSON.stringify(progress)}\n\n`));
            setTimeout(() => controller.error(new Error('the SDK stream broke')), 20);
          },
        }),
        { headers: { 'content-type': 'text/event-stream' } },
      );
    try {
      const response = await keyed.serve(
        { message, principal: undefined, request: new Request('http://127.0.0.1/mcp') },
        run,
      );
      expect(response?.status).toBe(200);
      // Bounded: the response must end by itself well inside the test's time.
      const text = await Promise.race([
        (response as Response).text(),
        new Promise<string>((_, reject) => setTimeout(() => reject(new Error('no end in 4 s')), 4_000)),
      ]);
      expect(text).toContain(`"code":${ContinuityErrorCode.OUTCOME_UNKNOWN}`);
      expect(keyed.stats().runningHere).toBe(0);
    } finally {
      await keyed.close();
    }
  });
});
