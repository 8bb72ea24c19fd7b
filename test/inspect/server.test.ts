import { createWebSocketInspector } from '@statelyai/inspect';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createActor, createMachine } from 'xstate';
import { streamMachine } from '../../machines/client/stream.machine.js';
import { compact, DEFINITION_LIMITS } from '../../src/inspect/compact.js';
import { type InspectorServer, startInspectorServer } from '../../src/inspect/server.js';
import { open, until } from './ws-client.js';

/** `mcp-continuity inspect` over real HTTP and WebSockets on 127.0.0.1. */
let server: InspectorServer;
let origin: string;
let live: string;

beforeEach(async () => {
  server = await startInspectorServer({ maxMessageBytes: 64 * 1024 });
  origin = server.url.replace(/\/$/, '');
  live = `${origin.replace('http', 'ws')}/live`;
});
afterEach(() => server.close());

const viewer = () => open(live, { Origin: origin });
const streamActor = (sessionId: string, value: unknown = 'backoff') => ({
  type: '@xstate.actor',
  sessionId,
  definition: JSON.stringify(compact(streamMachine.config, DEFINITION_LIMITS)),
  snapshot: { value, status: 'active', context: { key: 'standalone', lastEventId: 'e-0-4' } },
});

describe('the inspector server', () => {
  it('serves the page, its script and style from the package, and nothing else', async () => {
    const page = await fetch(server.url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    expect(html).toContain('<script src="/inspector.js"></script>');
    expect(html).not.toMatch(/https?:\/\//); // no CDN: the page works offline
    const script = await (await fetch(`${origin}/inspector.js`)).text();
    expect(() => new Function(script)).not.toThrow(); // it parses
    expect((await fetch(`${origin}/inspector.css`)).status).toBe(200);
    expect((await fetch(`${origin}/nope`)).status).toBe(404);
    expect((await fetch(server.url, { method: 'POST', body: 'x' })).status).toBe(405);
  });

  it('answers 403 to a Host it does not serve (DNS rebinding)', async () => {
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(server.url);
      request({ host: url.hostname, port: url.port, path: '/', headers: { Host: 'evil.example' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(403);
  });

  it('fans a feed out to every page, and replays what it knows to a page that opens later', async () => {
    const early = await viewer();
    await until(() => early.messages.some((m) => m.kind === 'reset'));
    expect(await server.waitForViewer(1_000)).toBe(true);
    const feed = await open(server.feedUrl);
    feed.ws.send(
      JSON.stringify([{ type: 'mcpc.hello', name: 'test feed' }, streamActor('x:1', 'connecting')]),
    );
    feed.ws.send(
      JSON.stringify({
        type: '@xstate.snapshot',
        sessionId: 'x:1',
        snapshot: { value: 'backoff', status: 'active', context: {} },
      }),
    );
    const transition = await until(() =>
      early.messages.find((m) => m.kind === 'timeline' && m.entry.kind === 'transition'),
    );
    expect(transition).toMatchObject({ entry: { text: 'connecting → backoff' } });
    expect(early.messages.find((m) => m.kind === 'feed' && m.name === 'test feed')).toBeDefined();

    const late = await viewer();
    const actor = await until(() => late.messages.find((m) => m.kind === 'actor'));
    expect(actor).toMatchObject({ machine: 'stream', snapshot: { value: 'backoff' } });
    expect(server.viewers()).toBe(2);
    feed.ws.close();
    await until(() => late.messages.find((m) => m.kind === 'feed' && !m.connected));
    early.ws.close();
    late.ws.close();
  });

  it('closes a feed that sends what is not JSON, or too much; ignores well-formed nonsense; keeps serving', async () => {
    const page = await viewer();
    const nonsense = await open(server.feedUrl);
    nonsense.ws.send(
      JSON.stringify([null, 5, { type: '@xstate.actor' }, { type: 'mcpc.figures', figures: 'x' }]),
    );
    nonsense.ws.send(JSON.stringify(streamActor('x:7')));
    await until(() => page.messages.find((m) => m.kind === 'actor'));

    const notJson = await open(server.feedUrl);
    notJson.ws.send('{"type": "@xstate.actor", ');
    expect(await notJson.closed).toBe(1007);
    const binary = await open(server.feedUrl);
    (binary.ws as unknown as { send(data: Buffer): void }).send(Buffer.from([1, 2, 3]));
    expect(await binary.closed).toBe(1007);
    const huge = await open(server.feedUrl);
    huge.ws.send(JSON.stringify({ type: 'mcpc.hello', name: 'x'.repeat(100 * 1024) }));
    expect(await huge.closed).toBe(1009);

    // The feed that sent nonsense is still connected, and the server still serves.
    expect(nonsense.ws.readyState).toBe(1);
    expect((await fetch(server.url)).status).toBe(200);
    nonsense.ws.send(
      JSON.stringify({
        type: '@xstate.snapshot',
        sessionId: 'x:7',
        snapshot: { value: 'done', status: 'done' },
      }),
    );
    await until(() => page.messages.find((m) => m.kind === 'snapshot' && m.snapshot.status === 'done'));
    nonsense.ws.close();
    page.ws.close();
  });

  it('lets only its own page listen, and refuses unknown paths', async () => {
    await expect(open(live)).rejects.toThrow(/403/);
    await expect(open(live, { Origin: 'http://evil.example' })).rejects.toThrow(/403/);
    await expect(open(server.feedUrl, { Origin: 'http://evil.example' })).rejects.toThrow(/403/);
    await expect(open(`${origin.replace('http', 'ws')}/other`)).rejects.toThrow(/404/);
    // A local app's dev server may feed it (@statelyai/inspect in the browser).
    const local = await open(server.feedUrl, { Origin: 'http://localhost:5173' });
    local.ws.close();
  });

  it('accepts @statelyai/inspect as a feed: its WebSocket inspector, as it is', async () => {
    const page = await viewer();
    const inspector = createWebSocketInspector({ url: server.feedUrl });
    const machine = createMachine({
      id: 'toggle',
      initial: 'off',
      states: { off: { on: { flip: 'on' } }, on: {} },
    });
    const actor = createActor(machine, { inspect: inspector.inspect });
    actor.start();
    actor.send({ type: 'flip' });
    const drawn = await until(() => page.messages.find((m) => m.kind === 'actor' && m.machine === 'toggle'));
    expect(drawn).toMatchObject({ chart: { states: [{ key: 'off' }, { key: 'on' }] } });
    await until(() => page.messages.find((m) => m.kind === 'snapshot' && m.snapshot.value === 'on'));
    actor.stop();
    inspector.stop();
    page.ws.close();
  });

  it('waitForViewer gives up after its timeout', async () => {
    expect(await server.waitForViewer(50)).toBe(false);
  });
});
