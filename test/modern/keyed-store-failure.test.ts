import { describe, expect, it } from 'vitest';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import type { JsonRpcRequest } from '../../machines/jsonrpc.js';
import type { MemoEntry, MemoExpected } from '../../machines/server/keyed-memo.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';

/** A memo whose first compare-and-set away from `running` fails, as a store that is briefly down would. */
class FlakyMemo extends MemoryMemoStore {
  failures = 1;
  override async replace(next: MemoEntry, expected: MemoExpected): Promise<MemoEntry | undefined> {
    if (expected.state === 'running' && next.state !== 'running' && this.failures > 0) {
      this.failures--;
      throw new Error('the memo store is unreachable');
    }
    return super.replace(next, expected);
  }
}

/**
 * A body that answered while the memo could not store its outcome: the entry would stay `running` under
 * this instance's live lease, and its attached response would wait for ever. The lease tick stores the
 * end again, with the answer the body got, and the response ends with the real result.
 */
describe('keyed runtime: the outcome could not be stored when the body ended', () => {
  it('the lease tick stores it again; the attached response gets the real result', async () => {
    const memo = new FlakyMemo({ memoWindowMs: 60_000 });
    const errors: unknown[] = [];
    const keyed = createKeyedRequests({
      log: new MemoryEventLog(),
      memo,
      pollMs: 50,
      leaseMs: 300,
      onError: (e) => errors.push(e),
    });
    const message: JsonRpcRequest = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'charge', arguments: {}, _meta: { [ContinuityMeta.idempotencyKey]: 'flaky-1' } },
    };
    const run = async () =>
      Response.json({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'charged' }] } });
    try {
      const response = await keyed.serve(
        { message, principal: undefined, request: new Request('http://127.0.0.1/mcp') },
        run,
      );
      const text = await Promise.race([
        (response as Response).text(),
        new Promise<string>((_, reject) => setTimeout(() => reject(new Error('no end in 4 s')), 4_000)),
      ]);
      expect(text).toContain('charged');
      expect(memo.failures).toBe(0);
      expect(errors.map(String)).toEqual(['Error: the memo store is unreachable']);
      expect((await memo.running()).length).toBe(0);
    } finally {
      await keyed.close();
    }
  });
});
