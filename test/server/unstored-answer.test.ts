import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { JsonRpcCode, OutcomeUnknownReason } from '../../machines/codes.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { ContinuityMetrics } from '../../src/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { clientFixture } from '../support/client-fixture.js';

/**
 * A log whose store is down for the next `failures` answers (`appendFinal`), then back: a port with an
 * outage, not a stand-in for the server under test.
 */
class OutageLog extends MemoryEventLog {
  failures = 0;
  refused = 0;

  override async appendFinal(sessionId: string, stream: number, message: JsonRpcMessage) {
    if (this.failures > 0) {
      this.failures--;
      this.refused++;
      throw new Error('the store is down');
    }
    return super.appendFinal(sessionId, stream, message);
  }
}

const { serverProcess, connect } = clientFixture('unstored-answer');

/**
 * Over real HTTP on 127.0.0.1, the SDK Client with our transport: a tool runs (one charge) and the log
 * refuses what it answered. The client is told outcome unknown (`answer_unstored`), never that the call
 * failed; and when the log refuses that answer too, it is stored again later, so the resumed stream gets
 * it instead of waiting for an answer nobody writes (found by the 2025 model world).
 */
describe('a tool answer the log refuses', () => {
  for (const failures of [1, 2]) {
    it(`${failures} refused write(s): outcome unknown (answer_unstored), one charge, no hang`, async () => {
      const log = new OutageLog();
      const metrics = new ContinuityMetrics();
      const p = await serverProcess({ eventLog: log, metrics });
      const { client } = await connect(p.url);
      log.failures = failures;
      const started = Date.now();
      const error = await client.callTool({ name: 'charge', arguments: { key: `card-${failures}` } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(JsonRpcCode.OUTCOME_UNKNOWN);
      expect((error as McpError).data).toMatchObject({ reason: OutcomeUnknownReason.answerUnstored });
      expect(log.refused).toBe(failures);
      expect(metrics.figures()['mcp_continuity.server.outcome_unknown{reason=answer_unstored}']).toBe(1);
      expect(p.world.effects.get(`card-${failures}`)).toBe(1);
      // Well before the SDK's 60 s request timeout: the second answer was stored within a retry or two.
      expect(Date.now() - started).toBeLessThan(20_000);
      // The session is still served.
      const echo = await client.callTool({ name: 'echo', arguments: { text: 'still here' } });
      expect(echo.content).toEqual([{ type: 'text', text: 'still here' }]);
    });
  }
});
