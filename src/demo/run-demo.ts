import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { InspectionEvent, Observer } from 'xstate';
import type { GapReport } from '../../machines/client/session.machine.js';
import { DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { ContinuityClientTransport } from '../client/transport.js';
import type { ContinuityMetrics } from '../metrics/continuity-metrics.js';
import { createContinuityServer } from '../server/handler.js';
import { createKeyedRequests } from '../server/keyed/index.js';
import { MemoryEventLog } from '../server/memory-event-log.js';
import { MemoryMemoStore } from '../server/memory-memo-store.js';
import { FaultProxy } from '../testing/fault-proxy.js';
import { type DemoLedger, demoServer } from './demo-server.js';
import { loadModernPart, MODERN_PART_INSTALL } from './load-part-modern.js';
import { CONTINUITY_KEY, OFFICIAL_KEY } from './modern-keys.js';
import type { ModernPartSummary } from './part-modern.js';

/**
 * The design note's scenario, live, in one process: server, load balancer (a fault proxy) and client on
 * loopback. Part 1: a slow charge through a balancer that cuts idle connections. Part 2: a chatty tool
 * through a buffer too small for a long disconnect. Part 3: part 1's charge again on MCP 2026-07-28 (the
 * same server and balancer), with the official v2 client alone and then with `continuityFetch()`. Every
 * step is printed as a timeline. Part 3 needs the official v2 SDK (optional peers): without it, parts 1
 * and 2 run and part 3 prints the command that installs it.
 */
export interface DemoOptions {
  /** Where timeline lines go. Default: stdout. */
  readonly log?: (line: string) => void;
  /** The balancer's idle timeout. */
  readonly idleTimeoutMs?: number;
  /** How long the slow charge takes (parts 1 and 3). Default 1.5 s: several idle cuts. */
  readonly chargeMs?: number;
  /** Notifications the chatty tool sends, and events the server keeps per stream. */
  readonly chattyCount?: number;
  readonly bufferSize?: number;
  /** How long the client is cut off in part 2 (longer than the chatty tool runs, so its buffer overflows). */
  readonly outageMs?: number;
  /** Called with the server's URL before the scenario starts (the inspector uses it). */
  readonly onReady?: (info: { serverUrl: string; proxyUrl: string }) => void;
  /** An XState inspector for the client's and the server's machines, both eras (`npm start` feeds its page). */
  readonly inspect?: Observer<InspectionEvent>;
  /** A pause before each part, so a person watching the inspector can follow. Default 0. */
  readonly pauseMs?: number;
  /** Records the client's and the server's figures (the inspector page shows them live). */
  readonly metrics?: ContinuityMetrics;
}

export interface DemoSummary {
  readonly charges: number;
  readonly chargeResult: string;
  readonly sessionsCreated: number;
  readonly sessionKept: boolean;
  readonly resumes: number;
  readonly cuts: number;
  readonly chattySent: number;
  readonly delivered: number;
  readonly duplicates: number;
  readonly lostFlagged: number;
  readonly lostSilently: number;
  readonly gaps: readonly GapReport[];
  /** Part 3, on 2026-07-28; undefined when it did not run (its optional peers are not installed). */
  readonly modern: ModernPartSummary | undefined;
}

/**
 * Our guarantees, all those of the parts that ran: what `npm start` exits 0 on. (Part 3 (a) is the spec's
 * behaviour, shown.)
 */
export function guaranteesHeld(s: DemoSummary): boolean {
  return (
    s.charges === 1 &&
    s.sessionKept &&
    s.lostSilently === 0 &&
    s.duplicates === 0 &&
    (s.modern === undefined ||
      (s.modern.continuity.charges === 1 &&
        s.modern.continuity.result === `charged ${CONTINUITY_KEY}` &&
        s.modern.continuity.keyChanges === 0))
  );
}

export async function runDemo(options: DemoOptions = {}): Promise<DemoSummary> {
  const log = options.log ?? ((line: string) => console.log(line));
  const idleTimeoutMs = options.idleTimeoutMs ?? 250;
  const chattyCount = options.chattyCount ?? 300;
  const bufferSize = options.bufferSize ?? 100;
  const chargeMs = options.chargeMs ?? 1_500;
  const start = Date.now();
  const say = (who: string, what: string) =>
    log(`${((Date.now() - start) / 1000).toFixed(3).padStart(7)}s  ${who.padEnd(8)} ${what}`);

  const ledger: DemoLedger = { charges: new Map() };
  const modernPart = await loadModernPart();
  const watch = modernPart?.modernChargeWatch(say);
  let sessionsCreated = 0;
  const continuity = createContinuityServer({
    createMcpServer: () => {
      sessionsCreated++;
      return demoServer(ledger);
    },
    eventLog: new MemoryEventLog({ maxEventsPerStream: bufferSize }),
    heartbeatMs: 0, // as in the incident: nothing keeps an idle connection busy
    retryMs: 50,
    inspect: options.inspect,
    metrics: options.metrics,
    // Part 3: 2026-07-28 on the same server, with the continuity extension (docs/continuity-extension.md).
    modern:
      modernPart && watch
        ? {
            createServer: () => modernPart.modernDemoServer(ledger, watch.events),
            keyed: createKeyedRequests({
              log: new MemoryEventLog(),
              memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
              inspect: options.inspect,
              metrics: options.metrics,
            }),
          }
        : undefined,
  });
  const server = http.createServer(continuity.nodeHandler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const proxy = await FaultProxy.start({
    target: { host: '127.0.0.1', port: (server.address() as AddressInfo).port },
    idleTimeoutMs,
  });
  options.onReady?.({
    serverUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    proxyUrl: proxy.url().href,
  });
  let cuts = 0;
  proxy.on('fault', (e) => {
    if (e.type === 'cut') {
      cuts++;
      say('balancer', `cut ${e.label} (${e.reason === 'idle' ? `idle for ${idleTimeoutMs} ms` : e.reason})`);
    }
    if (e.type === 'refused') say('balancer', `answered ${e.status} instead of forwarding`);
  });

  let resumes = 0;
  const gaps: GapReport[] = [];
  const observedFetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const headers = new Headers(init?.headers);
    const cursor = headers.get('last-event-id');
    if (init?.method === 'GET' && cursor) {
      resumes++;
      say('client', `resume: GET with Last-Event-ID ${cursor} (same session)`);
    } else if (init?.method === 'POST' && typeof init.body === 'string') {
      const body = JSON.parse(init.body) as { method?: string; params?: { name?: string } };
      if (body.method) say('client', `POST ${body.method}${body.params?.name ? ` ${body.params.name}` : ''}`);
    }
    const response = await fetch(url, init);
    if (response.status >= 400) say('client', `got HTTP ${response.status}`);
    return response;
  };
  const transport = new ContinuityClientTransport(proxy.url(), {
    fetch: observedFetch,
    reconnect: { initialDelayMs: 100, maxDelayMs: 1_000, factor: 2, maxRetries: 10, jitter: 'none' },
    inspect: options.inspect,
    metrics: options.metrics,
    onGap: (gap) => {
      gaps.push(gap);
      say(
        'client',
        `gap flagged: ${gap.lostCount} events lost (after ${gap.requestedId}, before ${gap.oldestId}); resuming at the oldest retained event`,
      );
    },
  });
  const client = new Client({ name: 'demo', version: '1.0.0' });
  try {
    say('client', 'connecting through a load balancer that cuts idle connections');
    await client.connect(transport);
    const session = transport.sessionId;
    say('client', `session ${session} (continuity: ${transport.continuity})`);

    await pause(options.pauseMs);
    log('\n-- part 1: a long charge through a balancer that cuts idle connections');
    const charge = await client.callTool({
      name: 'charge',
      arguments: { key: 'card-4242', ms: chargeMs },
    });
    const chargeResult = (charge.content as Array<{ text: string }>)[0]?.text ?? '';
    say('client', `result: ${chargeResult}`);

    await pause(options.pauseMs);
    log(
      `\n-- part 2: ${chattyCount} notifications through a ${bufferSize}-event buffer, and a long disconnect`,
    );
    const received: number[] = [];
    const chatty = client.callTool(
      { name: 'chatty', arguments: { count: chattyCount, intervalMs: 1 } },
      undefined,
      {
        onprogress: (p) => received.push(p.progress),
        timeout: 30_000,
      },
    );
    const deadline = Date.now() + 5_000;
    while (received.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1));
    const outageMs = options.outageMs ?? 1_000;
    say('balancer', `outage for ${outageMs} ms: connections reset and refused while the tool keeps talking`);
    proxy.outage(outageMs);
    const chattyResult = await chatty;
    say('client', `result: ${(chattyResult.content as Array<{ text: string }>)[0]?.text}`);

    const unique = new Set(received);
    const lostFlagged = gaps.reduce((sum, g) => sum + (g.lostCount ?? 0), 0);
    const sessionKept = transport.sessionId === session;
    // The 2025 client is done: closed, and its pooled connections left to the balancer, so that part 3's
    // traffic runs on connections of its own (the balancer names a connection by its first request).
    await client.close().catch(() => undefined);
    await drained(proxy, 3_000);
    const cutsIn2025 = cuts;

    await pause(options.pauseMs);
    let modern: ModernPartSummary | undefined;
    if (modernPart && watch) {
      modern = await modernPart.runModernPart({
        proxy,
        ledger,
        say,
        log,
        chargeMs,
        charged: watch.charged,
        inspect: options.inspect,
        metrics: options.metrics,
      });
    } else {
      log(
        '\n-- part 3: MCP 2026-07-28: not run (it needs the official v2 SDK, optional peers not installed here)',
      );
      log(`   to run it: ${MODERN_PART_INSTALL}`);
    }

    const summary: DemoSummary = {
      charges: ledger.charges.get('card-4242') ?? 0,
      chargeResult,
      sessionsCreated,
      sessionKept,
      resumes,
      cuts: cutsIn2025,
      chattySent: chattyCount,
      delivered: unique.size,
      duplicates: received.length - unique.size,
      lostFlagged,
      lostSilently: chattyCount - unique.size - lostFlagged,
      gaps,
      modern,
    };
    log('\n-- what happened');
    log(`  charges made for card-4242     ${summary.charges}   (the call was never sent twice)`);
    log(
      `  sessions created               ${summary.sessionsCreated}   (kept through ${cutsIn2025} cuts: ${summary.sessionKept})`,
    );
    log(`  resumes with Last-Event-ID     ${summary.resumes}`);
    log(
      `  notifications delivered        ${summary.delivered} of ${chattyCount}, ${summary.duplicates} duplicates`,
    );
    log(
      `  lost and flagged               ${summary.lostFlagged} (in ${gaps.length} gap${gaps.length === 1 ? '' : 's'})`,
    );
    log(`  lost silently                  ${summary.lostSilently}`);
    if (!modern) {
      log(`  2026-07-28                     not run (${MODERN_PART_INSTALL})`);
      return summary;
    }
    const { official: a, continuity: b } = modern;
    const row = (label: string, value: string) => log(`${`    ${label}`.padEnd(33)}${value}`);
    log('  2026-07-28, the official v2 client alone (the spec):');
    row(
      `charges made for ${OFFICIAL_KEY}`,
      `${a.charges}   (the caller got ${a.error ? `"${a.error}" after ${Math.round(a.endedAfterMs)} ms` : `a result: ${a.result}`})`,
    );
    log('  2026-07-28, with continuityFetch() and the continuity extension:');
    row(
      `charges made for ${CONTINUITY_KEY}`,
      `${b.charges}   (${b.reissues} re-issues, all with the same key; ${b.cuts} connections cut meanwhile)`,
    );
    row('result', `${b.result || `none: ${b.error}`} (after ${Math.round(b.endedAfterMs)} ms)`);
    return summary;
  } finally {
    await client.close().catch(() => undefined);
    await proxy.close();
    await continuity.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
}

/** Until the balancer holds no connection (idle ones are cut after its idle timeout), at most `ms`. */
async function drained(proxy: FaultProxy, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (proxy.connections.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

const pause = (ms = 0) => (ms > 0 ? new Promise<void>((r) => setTimeout(r, ms)) : Promise.resolve());
