import { createServer } from 'node:http';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CONTINUITY_EXTENSION,
  DEFAULT_CONTINUITY_SETTINGS,
  ListenMeta,
} from '../../machines/continuity-extension.js';
import { createInspectorFeed } from '../../src/inspect/feed.js';
import { startInspectorServer } from '../../src/inspect/server.js';
import type { PageMessage } from '../../src/inspect/wire.js';
import { createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { listenOnLoopback } from '../support/listen.js';
import { listenRequestInit } from '../support/listen-request.js';
import { launchChromium } from './chromium.js';

/**
 * Issue 28: the server's listen log on the inspector (`modern.inspect`). Over real HTTP on 127.0.0.1, raw
 * `subscriptions/listen` POSTs that declare the extension: a first listen, changes published, a re-open
 * the log vouches for (exact), then more changes than it keeps and a re-open it cannot (unknown). The
 * inspector server is fed by `createInspectorFeed`; what it tells a page (`/state.json`) is checked.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const declared = {
  'io.modelcontextprotocol/clientCapabilities': { extensions: { [CONTINUITY_EXTENSION]: {} } },
};

/** The acknowledgement of one listen POST (its first SSE message); the stream is closed after it. */
async function acknowledge(url: URL, id: string, meta: Record<string, unknown>) {
  const abort = new AbortController();
  const response = await fetch(url, listenRequestInit(id, meta, abort.signal));
  expect(response.status).toBe(200);
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (let i = 0; i < 100; i++) {
      const data = buffer
        .split('\n\n')
        .slice(0, -1)
        .flatMap((e) => e.split('\n'))
        .find((l) => l.startsWith('data:'));
      if (data) return JSON.parse(data.slice(5)) as { params: { _meta: Record<string, unknown> } };
      const chunk = await Promise.race([
        reader.read(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no ack in 10 s')), 10_000)),
      ]);
      if (chunk.done) throw new Error('the stream ended');
      buffer += decoder.decode(chunk.value, { stream: true });
    }
    throw new Error('too many frames');
  } finally {
    abort.abort();
  }
}

/** The listen log's actor as the inspector tells a page, once it has seen `reopens` re-opens (10 s at most). */
async function logOnPage(pageUrl: string, reopens: number): Promise<Record<string, unknown>> {
  let context: Record<string, unknown> | undefined;
  for (let i = 0; i < 200; i++) {
    const messages = (await (await fetch(`${pageUrl}state.json`)).json()) as PageMessage[];
    const actor = messages.find((m) => m.kind === 'actor' && m.machine === 'listenLog');
    context = actor?.kind === 'actor' ? (actor.snapshot.context as Record<string, unknown>) : undefined;
    if (context?.reopens === reopens) return context;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the page never showed ${reopens} re-open(s): ${JSON.stringify(context)}`);
}

describe('modern.inspect: the listen log on the inspector page', () => {
  it("shows the log's head, what it holds against its retention, and each re-open's gap (exact, unknown)", async () => {
    const inspector = await startInspectorServer();
    cleanups.push(() => inspector.close());
    const feed = createInspectorFeed({ url: inspector.feedUrl, name: 'listen', flushIntervalMs: 10 });
    cleanups.push(() => feed.close());
    const continuity = createContinuityServer({
      createMcpServer: () => new McpServerV1({ name: 'legacy', version: '1.0.0' }),
      heartbeatMs: 0,
      modern: {
        createServer: () => {
          const server = new McpServer({ name: 'listen-log', version: '1.0.0' });
          server.registerTool('echo', { description: 'echo' }, async () => ({ content: [] }));
          return server;
        },
        keyed: createKeyedRequests({
          log: new MemoryEventLog(),
          memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
        }),
        listenLog: { maxChanges: 2, retentionMs: 60_000 },
        inspect: feed.inspect,
      },
    });
    const http = createServer((req, res) => continuity.nodeHandler(req, res));
    const url = new URL(`http://127.0.0.1:${await listenOnLoopback(http)}/mcp`);
    cleanups.push(async () => {
      await continuity.close();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    });

    const first = await acknowledge(url, 'L1', declared);
    const position = first.params._meta[ListenMeta.position] as string;
    expect(position).toMatch(/\.0$/);
    continuity.notifyModern.toolsChanged();
    const exact = await acknowledge(url, 'L2', { ...declared, [ListenMeta.lastPosition]: position });
    expect(exact.params._meta[ListenMeta.missed]).toMatchObject({ count: 1 });
    const shown = await logOnPage(inspector.url, 1);
    expect(shown).toMatchObject({
      head: 1,
      oldest: 1,
      retentionMs: 60_000,
      maxChanges: 2,
      listens: 2,
      exactGaps: 1,
      missedChanges: 1,
      unknownGaps: 0,
      lastReopen: 'exact: 1 missed',
    });
    expect(shown.epoch).toBe(position.slice(0, position.lastIndexOf('.')));

    // Three more than the log keeps since the first position: it cannot vouch, the page says unknown.
    for (let i = 0; i < 3; i++) continuity.notifyModern.toolsChanged();
    const unknown = await acknowledge(url, 'L3', { ...declared, [ListenMeta.lastPosition]: position });
    expect(unknown.params._meta[ListenMeta.missed]).toBeUndefined();
    const after = await logOnPage(inspector.url, 2);
    expect(after).toMatchObject({
      head: 4,
      oldest: 3,
      listens: 3,
      exactGaps: 1,
      unknownGaps: 1,
      lastReopen: 'unknown (not vouched for)',
    });

    // The page draws it on the server's side, in its own group, with these facts.
    const browser = await launchChromium();
    cleanups.push(browser.close);
    const page = await browser.context.newPage();
    await page.goto(inspector.url);
    const card = page.locator('.servers .actor[data-machine="listenLog"]');
    await card.waitFor({ timeout: 15_000 });
    const facts = await card.evaluate((el) =>
      Object.fromEntries(
        [...el.querySelectorAll('dl.facts dt')].map((dt) => [
          dt.textContent,
          dt.nextElementSibling?.textContent,
        ]),
      ),
    );
    expect(facts).toMatchObject({
      'head (position)': '4',
      held: '3..4 (2)',
      retention: '60000 ms, at most 2 changes',
      're-opens': '2',
      'exact gaps': '1 (1 changes missed)',
      'unknown gaps': '1',
      'last re-open': 'unknown (not vouched for)',
    });
  });
});
