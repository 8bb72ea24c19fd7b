import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { JsonRpcCode, OutcomeUnknownReason } from '../../machines/codes.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { demoServer } from '../../src/demo/demo-server.js';
import { ContinuityMetrics, createContinuityServer } from '../../src/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { clientFixture } from '../support/client-fixture.js';
import { until } from '../support/until.js';

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

/**
 * A log that numbers appends in call order and whose appends the test holds back (a slow store), and
 * that counts the appends arriving after the session's keys were dropped or the log closed.
 */
class HeldLog extends MemoryEventLog {
  readonly ordersAppends = true;
  held = 0;
  late = 0;
  private over = false;
  private gate: Promise<void> | undefined;
  private open: (() => void) | undefined;

  hold(): void {
    this.gate = new Promise((r) => {
      this.open = r;
    });
  }

  release(): void {
    this.open?.();
    this.gate = undefined;
  }

  override async append(sessionId: string, stream: number, message: JsonRpcMessage) {
    if (this.gate) {
      this.held++;
      await this.gate;
    }
    if (this.over) this.late++;
    return super.append(sessionId, stream, message);
  }

  override async dropSession(sessionId: string) {
    this.over = true;
    return super.dropSession(sessionId);
  }

  override async close() {
    this.over = true;
    return super.close();
  }
}

/** A session on the fetch handler, over a log that numbers appends in call order. */
async function openSession(sse?: { paceBytes: number }) {
  const log = new HeldLog();
  const continuity = createContinuityServer({
    createMcpServer: () => demoServer({ charges: new Map() }),
    eventLog: log,
    heartbeatMs: 0,
    onError: () => undefined,
    ...(sse ? { sse } : {}),
  });
  const headers = {
    Accept: 'application/json, text/event-stream',
    'Content-Type': 'application/json',
    'MCP-Protocol-Version': '2025-11-25',
  };
  const send = (method: string, body: unknown, more: Record<string, string> = {}) =>
    continuity.fetch(
      new Request('http://localhost/mcp', {
        method,
        headers: { ...headers, ...more },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
  const init = await send('POST', {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
  });
  const session = { 'Mcp-Session-Id': init.headers.get('mcp-session-id') as string };
  await init.text();
  await (await send('POST', { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).text();
  const chatty = (id: number, count: number, intervalMs: number) =>
    send(
      'POST',
      {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'chatty', arguments: { count, intervalMs }, _meta: { progressToken: id } },
      },
      session,
    );
  return { log, continuity, send, session, chatty };
}

/** A session whose chatty call's first notification is being stored (held). */
async function heldCall(intervalMs: number) {
  const opened = await openSession();
  opened.log.hold();
  const call = await opened.chatty(2, 3, intervalMs);
  await until('the first notification being stored', () => opened.log.held > 0, 5_000);
  return { ...opened, body: call.text() };
}

describe('notifications stored behind the sender, when the call or the session is over', () => {
  it("a cancelled call's response ends after the notifications sent before the cancel", async () => {
    const { log, continuity, send, session, body } = await heldCall(200);
    let ended = false;
    void body.then(() => {
      ended = true;
    });
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2 } };
    await (await send('POST', cancel, session)).text();
    await new Promise((r) => setTimeout(r, 100));
    expect(ended).toBe(false);
    log.release();
    expect(await body).toContain('"progress":1');
    await continuity.close();
  });

  it('a session ended (DELETE) stores what is queued before its keys are dropped', async () => {
    const { log, continuity, send, session, body } = await heldCall(0);
    const deleted = send('DELETE', undefined, session);
    await new Promise((r) => setTimeout(r, 100));
    log.release();
    expect((await deleted).status).toBe(200);
    await body;
    expect(log.late).toBe(0);
    expect(log.stats().sessions).toBe(0);
    await continuity.close();
  });

  it('closing the server stores what is queued before the log is closed', async () => {
    const { log, continuity, body } = await heldCall(0);
    const closed = continuity.close();
    await new Promise((r) => setTimeout(r, 100));
    log.release();
    await closed;
    await body;
    expect(log.late).toBe(0);
  });

  it("a slow reader holds up its own call's sends, not another call's", async () => {
    const { continuity, chatty } = await openSession({ paceBytes: 1 });
    // Never read: its reader falls behind at the first notification.
    const slow = await chatty(2, 50, 0);
    await new Promise((r) => setTimeout(r, 100));
    const fast = await chatty(3, 3, 0);
    const text = await Promise.race([
      fast.text(),
      new Promise<string>((r) => setTimeout(() => r('held up'), 5_000)),
    ]);
    expect(text).toContain('sent 3');
    await slow.body?.cancel();
    await continuity.close();
  });
});
