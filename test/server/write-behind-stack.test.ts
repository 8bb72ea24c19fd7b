import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { JsonRpcCode, OutcomeUnknownReason } from '../../machines/codes.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { ContinuityMetrics } from '../../src/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { clientFixture } from '../support/client-fixture.js';

/**
 * A log that numbers appends in call order (`ordersAppends`: the session does not wait for a notification
 * to be stored) and refuses the notification whose progress is `lose`: a port with an outage, not a
 * stand-in for the server under test.
 */
class LosingLog extends MemoryEventLog {
  readonly ordersAppends = true;
  lose = 0;
  refused = 0;

  override async append(sessionId: string, stream: number, message: JsonRpcMessage) {
    const params = (message as { params?: { progress?: number } }).params;
    if (this.lose > 0 && params?.progress === this.lose) {
      this.refused++;
      throw new Error('the store lost a notification');
    }
    return super.append(sessionId, stream, message);
  }
}

const { serverProcess, connect } = clientFixture('write-behind');

/**
 * Over real HTTP on 127.0.0.1, the SDK Client with our transport, a tool sending 3 notifications whose
 * sends do not wait for the log (write-behind.ts): a lost one is never hidden. The sender learns of it at
 * its next send; the last one lost, the answer is not vouched for (outcome unknown).
 */
describe('notifications stored behind the sender', () => {
  it('the last notification lost: the answer is outcome unknown (answer_unstored), not a success', async () => {
    const log = new LosingLog();
    const metrics = new ContinuityMetrics();
    const p = await serverProcess({ eventLog: log, metrics });
    const { client } = await connect(p.url);
    log.lose = 3;
    const error = await client.callTool({ name: 'chatty', arguments: { count: 3, intervalMs: 0 } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(log.refused).toBe(1);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(JsonRpcCode.OUTCOME_UNKNOWN);
    expect((error as McpError).data).toMatchObject({ reason: OutcomeUnknownReason.answerUnstored });
    expect(metrics.figures()['mcp_continuity.server.outcome_unknown{reason=answer_unstored}']).toBe(1);
  });

  it("a notification lost before the last: the tool's next send fails, so its answer says so", async () => {
    const log = new LosingLog();
    const p = await serverProcess({ eventLog: log });
    const { client } = await connect(p.url);
    log.lose = 2;
    const progress: number[] = [];
    const result = await client.callTool(
      { name: 'chatty', arguments: { count: 3, intervalMs: 0 } },
      undefined,
      {
        onprogress: (e) => progress.push(e.progress),
      },
    );
    expect(log.refused).toBe(1);
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('the store lost a notification');
    expect(progress).not.toContain(2);
    // The session is still served, its notifications stored again.
    log.lose = 0;
    const again = await client.callTool({ name: 'chatty', arguments: { count: 2, intervalMs: 0 } });
    expect(again.content).toEqual([{ type: 'text', text: 'sent 2' }]);
  });
});
