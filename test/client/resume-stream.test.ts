/**
 * The SDK transport's `resumeStream(lastEventId, { onresumptiontoken })` and `send`'s `onresumptiontoken` on
 * `ContinuityClientTransport`, against the official SDK server over real HTTP on 127.0.0.1: an application
 * that kept its resumption tokens (as it did with the SDK's transport) picks a call's stream up again.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { ContinuityClientTransport } from '../../src/index.js';
import { isToolCall, type SdkWorld, startSdkServer, until, Wire } from './sdk-server-harness.js';

const worlds: SdkWorld[] = [];
const transports: ContinuityClientTransport[] = [];
afterEach(async () => {
  for (const t of transports.splice(0)) await t.close();
  for (const w of worlds.splice(0)) await w.close();
});

const progressOf = (m: JSONRPCMessage) =>
  'method' in m && m.method === 'notifications/progress' ? (m.params?.progress as number) : undefined;

describe('resumeStream', () => {
  it("a call's stream cut when its process ends: another transport resumes it from the last token, the rest arrives once", async () => {
    const w = await startSdkServer();
    worlds.push(w);
    // Process A: calls `chatty` (6 progress notifications, then the result), keeping each resumption token.
    const first = new ContinuityClientTransport(new URL(w.url), { deleteOnClose: false });
    const client = new Client({ name: 'a', version: '1' });
    await client.connect(first);
    const sessionId = first.sessionId as string;
    const tokensA: string[] = [];
    const progressA: number[] = [];
    const call = client
      .callTool({ name: 'chatty', arguments: { count: 6, intervalMs: 300 } }, undefined, {
        onprogress: (p) => progressA.push(p.progress),
        onresumptiontoken: (token) => tokensA.push(token),
        timeout: 30_000,
      })
      .catch((e: unknown) => e);
    await until('two progress notifications', () => progressA.length >= 2, 20_000);
    // The process ends mid-call: its stream is cut, the session stays on the server.
    await first.close();
    expect(await call).toBeInstanceOf(Error);
    const lastToken = tokensA.at(-1) as string;
    const store = w.created[0]?.store;
    const streamId = (await store?.getStreamIdForEventId(lastToken)) as string;
    expect(streamId).toBeDefined();
    // Each token A heard is an event id of the call's stream, in order, up to where A stopped; every
    // message's id among them. (The priming event, which carries no message, is reported only when it
    // arrives in a read of its own; one read later its id is superseded by the message's.)
    const stored = () => store?.idsOf(streamId) ?? [];
    const heardByA = stored().slice(0, stored().indexOf(lastToken) + 1);
    expect(heardByA.filter((id) => tokensA.includes(id))).toEqual(tokensA);
    expect(tokensA.slice(-progressA.length)).toEqual(heardByA.slice(-progressA.length));

    // Process B joins the session and resumes from the last token, at the transport level.
    const second = new ContinuityClientTransport(new URL(w.url), { sessionId });
    transports.push(second);
    const received: JSONRPCMessage[] = [];
    const errors: Error[] = [];
    second.onmessage = (m) => received.push(m);
    second.onerror = (e) => errors.push(e);
    await second.start();
    const tokensB: string[] = [];
    await second.resumeStream(lastToken, { onresumptiontoken: (t) => tokensB.push(t) });
    await until('the answer', () => received.some((m) => 'result' in m), 20_000);

    const answers = received.filter((m) => 'result' in m || 'error' in m);
    expect(answers).toHaveLength(1);
    // The answer carries the id the application's request had (A's SDK Client numbered it), not a tag.
    expect(typeof (answers[0] as { id: unknown }).id).toBe('number');
    expect(JSON.stringify(answers[0])).toContain('sent 6');
    const progressB = received.map(progressOf).filter((p) => p !== undefined);
    // Every notification exactly once across both processes: nothing lost, nothing replayed twice.
    expect([...progressA, ...progressB]).toEqual([1, 2, 3, 4, 5, 6]);
    // B heard the id of every event after the token it resumed from, once each.
    expect(tokensB).toEqual(stored().slice(stored().indexOf(lastToken) + 1));
    expect(errors).toEqual([]);
  }, 60_000);

  it("send with the SDK's resumptionToken: the request is not POSTed again; the resumed stream's answer answers it", async () => {
    const w = await startSdkServer();
    worlds.push(w);
    const first = new ContinuityClientTransport(new URL(w.url), { deleteOnClose: false });
    const a = new Client({ name: 'a', version: '1' });
    await a.connect(first);
    const sessionId = first.sessionId as string;
    const tokensA: string[] = [];
    let progressA = 0;
    const call = a
      .callTool({ name: 'chatty', arguments: { count: 4, intervalMs: 300 } }, undefined, {
        onprogress: () => progressA++,
        onresumptiontoken: (token) => tokensA.push(token),
        timeout: 30_000,
      })
      .catch((e: unknown) => e);
    await until('a progress notification', () => progressA >= 1, 20_000);
    await first.close();
    expect(await call).toBeInstanceOf(Error);

    // Process B: the same call again, with the last token, through the SDK Client as an SDK app does it.
    const wire = new Wire();
    const second = new ContinuityClientTransport(new URL(w.url), {
      sessionId,
      fetch: wire.fetch,
      // A's progress notifications replayed here are another process's: not B's call's.
      onOrphanResult: () => undefined,
    });
    transports.push(second);
    const b = new Client({ name: 'b', version: '1' });
    await b.connect(second);
    const tokensB: string[] = [];
    const lastToken = tokensA.at(-1) as string;
    const result = await b.callTool({ name: 'chatty', arguments: { count: 4, intervalMs: 300 } }, undefined, {
      resumptionToken: lastToken,
      onresumptiontoken: (token) => tokensB.push(token),
      timeout: 30_000,
    });
    expect(JSON.stringify(result)).toContain('sent 4');
    // Ran once: B resumed A's stream (GET, Last-Event-ID), it never POSTed the call.
    expect(w.invocations.get('chatty')).toBe(1);
    expect(wire.filter(isToolCall('chatty'))).toHaveLength(0);
    // Resumed from A's last token (the server answers 409 while it still holds A's cut connection: retried).
    const resumes = wire.filter((x) => x.requestHeaders.has('last-event-id'));
    expect(resumes.every((x) => x.requestHeaders.get('last-event-id') === lastToken)).toBe(true);
    expect(resumes.filter((x) => x.status === 200)).toHaveLength(1);
    const store = w.created[0]?.store;
    const ids = store?.idsOf((await store.getStreamIdForEventId(lastToken)) as string) ?? [];
    expect(tokensB).toEqual(ids.slice(ids.indexOf(lastToken) + 1));
  }, 60_000);

  it('an event id the server does not know: refused like every other resume, reported, the session kept', async () => {
    const w = await startSdkServer();
    worlds.push(w);
    const transport = new ContinuityClientTransport(new URL(w.url));
    transports.push(transport);
    const client = new Client({ name: 'a', version: '1' });
    await client.connect(transport);
    const errors: Error[] = [];
    transport.onerror = (e) => errors.push(e);
    await transport.resumeStream('no-such-event');
    await until('the refusal reported', () => errors.length > 0, 20_000);
    expect(errors.map((e) => e.message).join('\n')).toContain('resume:1');
    const answer = await client.callTool({ name: 'echo', arguments: { text: 'still here' } });
    expect(JSON.stringify(answer)).toContain('still here');
    expect(w.created).toHaveLength(1);
  }, 30_000);

  it('before the session is established: nothing is sent, the application hears why', async () => {
    const w = await startSdkServer();
    worlds.push(w);
    const transport = new ContinuityClientTransport(new URL(w.url));
    transports.push(transport);
    const errors: Error[] = [];
    transport.onerror = (e) => errors.push(e);
    await transport.start();
    await transport.resumeStream('x');
    expect(errors.map((e) => e.message)).toEqual(['resumeStream: no active session to resume resume:1 in']);
  });

  it('a resumptionToken while the session is being established: the request fails, nothing is sent for it', async () => {
    const w = await startSdkServer();
    worlds.push(w);
    const wire = new Wire();
    const transport = new ContinuityClientTransport(new URL(w.url), { fetch: wire.fetch });
    transports.push(transport);
    const received: JSONRPCMessage[] = [];
    transport.onmessage = (m) => received.push(m);
    await transport.start();
    await transport.send({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'a', version: '1' } },
    });
    await transport.send(
      { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
      { resumptionToken: 'some-event' },
    );
    await until('both answers', () => received.length >= 2, 20_000);
    const refused = received.find((m) => 'id' in m && m.id === 1);
    expect(refused && 'error' in refused ? refused.error.message : undefined).toContain('resumptionToken');
    expect(
      wire.filter((x) => x.requestHeaders.has('last-event-id') || (x.body ?? '').includes('tools/list')),
    ).toHaveLength(0);
  }, 30_000);
});
