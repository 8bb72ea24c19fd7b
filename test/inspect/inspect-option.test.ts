import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createActor, type InspectionEvent } from 'xstate';
import { clientSessionMachine } from '../../machines/client/session.machine.js';
import { ContinuityClientTransport } from '../../src/client/transport.js';
import { createInspectorFeed, type InspectorFeed } from '../../src/inspect/feed.js';
import { type InspectorServer, startInspectorServer } from '../../src/inspect/server.js';
import { startServer } from '../server/harness.js';
import { open, until } from './ws-client.js';

/** The `inspect` option of the server and the client, and the feed that carries it to the inspector. */
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function connectedClient(url: string, inspect?: InspectorFeed['inspect']) {
  const transport = new ContinuityClientTransport(new URL(url), { inspect });
  const client = new Client({ name: 'inspect-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

describe('createContinuityServer({ inspect })', () => {
  it("hands every session machine's inspection events to a custom observer", async () => {
    const events: InspectionEvent[] = [];
    const world = await startServer({ inspect: (e) => events.push(e) });
    cleanups.push(() => world.close());
    const { client, transport } = await connectedClient(world.url);
    cleanups.push(() => client.close());
    await client.callTool({ name: 'echo', arguments: { text: 'hi' } });

    const registered = events.find((e) => e.type === '@xstate.actor');
    const ref = registered?.actorRef as unknown as { logic: { config: { id: string } } } | undefined;
    expect(ref?.logic.config.id).toBe('serverSession');
    const received = events.filter((e) => e.type === '@xstate.event' && e.event.type === 'request.received');
    expect(received.length).toBeGreaterThanOrEqual(2); // initialize, then the call
    const snapshots = events.flatMap((e) =>
      e.type === '@xstate.snapshot'
        ? [e.snapshot as unknown as { value: unknown; context: { sessionId: string } }]
        : [],
    );
    const snapshot = snapshots.find((s) => JSON.stringify(s.value) === '{"live":"busy"}');
    expect(snapshot).toBeDefined();
    expect(snapshot?.context.sessionId).toBe(transport.sessionId);
  });
});

describe('createInspectorFeed', () => {
  async function inspector(port = 0): Promise<InspectorServer> {
    const server = await startInspectorServer({ port });
    cleanups.push(() => server.close());
    return server;
  }

  it('carries a real client and server to the page: both machines of one session, compact context, figures', async () => {
    const insp = await inspector();
    const page = await open(`${insp.url.replace('http', 'ws')}live`, { Origin: insp.url.replace(/\/$/, '') });
    cleanups.push(() => page.ws.close());
    const feed = createInspectorFeed({
      url: insp.feedUrl,
      name: 'e2e',
      metrics: { figures: () => ({ 'mcp_continuity.client.gaps': 0 }) },
      figuresIntervalMs: 20,
    });
    cleanups.push(() => feed.close());
    const world = await startServer({ inspect: feed.inspect });
    cleanups.push(() => world.close());
    const { client, transport } = await connectedClient(world.url, feed.inspect);
    await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    const sessionId = transport.sessionId;
    await client.close();
    await feed.close();

    const actors = page.messages.flatMap((m) => (m.kind === 'actor' ? [m] : []));
    expect(new Set(actors.map((a) => a.machine))).toEqual(new Set(['client', 'stream', 'serverSession']));
    const server = actors.find((a) => a.machine === 'serverSession');
    const clientActor = actors.find((a) => a.machine === 'client');
    const streams = actors.filter((a) => a.machine === 'stream');
    expect(streams.every((s) => s.parentId === clientActor?.id)).toBe(true);
    // The exchange callback actors have no states: not sent.
    expect(actors.every((a) => a.chart.states.length > 0)).toBe(true);

    const latest = (id: string | undefined) =>
      page.messages.flatMap((m) => (m.kind === 'snapshot' && m.id === id ? [m.snapshot] : [])).at(-1);
    expect(latest(server?.id)?.context).toMatchObject({ sessionId });
    expect(latest(clientActor?.id)).toMatchObject({ value: 'closed', status: 'done' });
    // Child actor refs in the client's context travel as references, not as the whole actor system.
    const active = page.messages.find(
      (m) => m.kind === 'snapshot' && m.id === clientActor?.id && m.snapshot.value === 'active',
    );
    const entry = Object.values(
      (active as { snapshot: { context: { streams: object } } }).snapshot.context.streams,
    )[0];
    expect((entry as { ref: unknown }).ref).toMatchObject({ $actor: expect.any(String) });
    expect(page.messages.find((m) => m.kind === 'figures' && m.name === 'e2e')).toBeDefined();
  });

  it('re-registers its live actors when the inspector comes back', async () => {
    const first = await startInspectorServer();
    const port = Number(new URL(first.url).port);
    const feed = createInspectorFeed({ url: first.feedUrl, flushIntervalMs: 5 });
    cleanups.push(() => feed.close());
    const actor = createActor(clientSessionMachine, { input: {}, inspect: feed.inspect });
    actor.start();
    cleanups.push(() => actor.stop());
    // The machines an inspector knows; none while it cannot be reached (a pooled connection to the
    // first server on this port fails once).
    const machines = async (server: InspectorServer) => {
      try {
        const state = (await (await fetch(`${server.url}state.json`)).json()) as {
          kind: string;
          machine?: string;
        }[];
        return state.filter((m) => m.kind === 'actor').map((m) => m.machine);
      } catch {
        return [];
      }
    };
    await until(async () => (await machines(first)).includes('client'));
    await first.close();
    // The same port, as after a restart of `mcp-continuity inspect`: the feed reconnects by itself.
    const second = await inspector(port);
    await until(async () => (await machines(second)).includes('client'), 10_000);
  });

  it('never throws into the machine while the inspector is unreachable, and keeps a bounded queue', async () => {
    const feed = createInspectorFeed({ url: 'ws://127.0.0.1:9/feed', maxQueued: 10 });
    const actor = createActor(clientSessionMachine, { input: {}, inspect: feed.inspect });
    actor.start();
    for (let i = 0; i < 20; i++) actor.send({ type: 'app.protocolVersion', version: `v${i}` });
    expect(feed.dropped).toBeGreaterThan(0);
    actor.stop();
    const started = Date.now();
    await feed.close();
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
