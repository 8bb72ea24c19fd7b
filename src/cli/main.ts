#!/usr/bin/env node
import { createInspectorFeed } from '../inspect/feed.js';
import { type InspectorServer, startInspectorServer } from '../inspect/server.js';
import { ContinuityMetrics } from '../metrics/continuity-metrics.js';
import { loadOptional, MissingPeerError } from '../optional-peer.js';
import { type OptionValues, parseCommandLine } from './args.js';
import { PROGRAM } from './program.js';

/**
 * `mcp-continuity demo`: the design note's scenario, live (what `npm start` runs), fed to an inspector page.
 * `mcp-continuity inspect`: the inspector page alone, for your own clients and servers.
 * `mcp-continuity probe <url>`: a report card of any server's continuity (./probe/command.ts).
 * (`npm run verify`, the long property exploration, runs from a clone: properties/verify-cli.ts.)
 *
 * The command line itself needs nothing beyond Node (its arguments are parsed with `node:util`), so it runs
 * right after `npm install mcp-continuity`. The demo's and the inspector's packages (ws for the inspector;
 * zod and the official v2 SDK for the demo) are optional peer dependencies, loaded here: what is missing is
 * named with the command that installs it, and the demo runs the parts it can.
 */
async function main(argv: readonly string[]): Promise<void> {
  const parsed = parseCommandLine(PROGRAM, argv);
  if (parsed.kind === 'help') {
    console.log(parsed.text);
    return;
  }
  if (parsed.kind === 'error') {
    console.error(`${PROGRAM.name}: ${parsed.message}\n\n${parsed.usage}`);
    process.exitCode = 2;
    return;
  }
  if (parsed.command === 'demo') await demo(parsed.values);
  else if (parsed.command === 'probe') {
    // Loaded on use: the probe needs nothing the other commands load.
    const { probeCommand } = await import('./probe/command.js');
    process.exitCode = await probeCommand(parsed.values);
  } else if (parsed.command === 'explain' || parsed.command === 'replay') {
    const { replayOpen, traceCommand } = await import('./trace-command.js');
    const path = parsed.values.trace as string;
    process.exitCode =
      parsed.command === 'replay' && parsed.values.open
        ? await replayOpen(path, { port: parsed.values.port as number, until: untilSignal() })
        : traceCommand(parsed.command, path);
  } else await inspect(parsed.values);
}

async function demo(o: OptionValues): Promise<void> {
  const { runDemo, guaranteesHeld } = await loadOptional(() => import('../demo/run-demo.js'));
  const metrics = new ContinuityMetrics();
  const inspector = o['no-inspect'] ? undefined : await inspectorIfInstalled(o['inspect-port'] as number);
  const feed = inspector && createInspectorFeed({ url: inspector.feedUrl, name: 'npm start', metrics });
  if (inspector) {
    console.log(`inspector: ${inspector.url}  (the machines of this demo, live)\n`);
    if (o['wait-for-page'] || o.slow) await waitForPage(inspector);
  }
  let held = false;
  try {
    const s = await runDemo({
      idleTimeoutMs: o['idle-timeout'] as number,
      chargeMs: o['charge-ms'] as number,
      chattyCount: o.count as number,
      bufferSize: o.buffer as number,
      inspect: feed?.inspect,
      metrics,
      pauseMs: o.slow ? 2_000 : 0,
    });
    held = guaranteesHeld(s);
    if (!held) console.log('\nA guarantee was broken: see above.');
    else if (s.modern) console.log('\nAll guarantees held.');
    else
      console.log('\nAll guarantees of parts 1 and 2 held (part 3, MCP 2026-07-28, did not run: see above).');
  } finally {
    await feed?.close();
  }
  process.exitCode = held ? 0 : 1;
  if (inspector && o.hold) {
    console.log(`\ninspector still serving at ${inspector.url}; Ctrl-C to stop`);
    await untilSignal();
  }
  await inspector?.close();
}

/** The demo's inspector page, or none (said on one line) when its package is not installed: the demo runs. */
async function inspectorIfInstalled(port: number): Promise<InspectorServer | undefined> {
  try {
    return await startInspectorServer({ port });
  } catch (error) {
    if (!(error instanceof MissingPeerError)) throw error;
    console.log(`inspector: not served (${error.message})\n`);
    return undefined;
  }
}

async function inspect(o: OptionValues): Promise<void> {
  const inspector = await startInspectorServer({ port: o.port as number, host: o.host as string });
  console.log(`inspector page: ${inspector.url}`);
  console.log('feed it from your process, as the `inspect` option of ContinuityClientTransport and/or');
  console.log(`createContinuityServer: createInspectorFeed({ url: '${inspector.feedUrl}' }).inspect`);
  console.log(`(or @statelyai/inspect: createWebSocketInspector({ url: '${inspector.feedUrl}' }).inspect)`);
  await untilSignal();
  await inspector.close();
}

async function waitForPage(inspector: InspectorServer): Promise<void> {
  console.log('waiting for the inspector page to open (at most 60 s)…');
  if (!(await inspector.waitForViewer(60_000))) console.log('no page opened; running anyway');
}

/** Resolves on Ctrl-C or SIGTERM, so servers close cleanly instead of dying mid-write. */
function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

try {
  await main(process.argv.slice(2));
} catch (error) {
  if (!(error instanceof MissingPeerError)) throw error;
  console.error(`mcp-continuity: ${error.message}`);
  process.exitCode = 1;
}
