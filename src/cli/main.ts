#!/usr/bin/env node
import { createInspectorFeed } from '../inspect/feed.js';
import { type InspectorServer, startInspectorServer } from '../inspect/server.js';
import { ContinuityMetrics } from '../metrics/continuity-metrics.js';
import { loadOptional, MissingPeerError } from '../optional-peer.js';

/**
 * `mcp-continuity demo`: the design note's scenario, live (what `npm start` runs), fed to an inspector page.
 * `mcp-continuity inspect`: the inspector page alone, for your own clients and servers.
 * (`npm run verify`, the long property exploration, runs from a clone: properties/verify-cli.ts.)
 *
 * Its packages (commander; ws for the inspector; zod for the demo) are optional peer dependencies, loaded
 * here, so that installing the transport alone does not pull them in. A missing one ends the command with
 * a line saying which to install.
 */
async function main(argv: string[]): Promise<void> {
  const { Command, InvalidArgumentError } = await loadOptional(() => import('commander'));
  const int = (name: string) => (value: string) => {
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a whole number`);
    return n;
  };

  const program = new Command()
    .name('mcp-continuity')
    .description('MCP Streamable HTTP that never confuses a dropped connection with a lost session');

  program
    .command('demo')
    .description(
      'run the design note scenario: a long charge through a balancer that cuts idle connections, then a chatty tool through a too-small buffer, then the charge again on MCP 2026-07-28',
    )
    .option('--idle-timeout <ms>', "the balancer's idle timeout", int('--idle-timeout'), 250)
    .option('--charge-ms <ms>', 'how long the charge takes', int('--charge-ms'), 1_500)
    .option('--count <n>', 'notifications the chatty tool sends', int('--count'), 300)
    .option('--buffer <n>', 'events the server keeps per stream', int('--buffer'), 100)
    .option('--no-inspect', 'do not serve the inspector page')
    .option('--inspect-port <n>', 'port of the inspector page; 0: any free port', int('--inspect-port'), 0)
    .option('--wait-for-page', 'start the scenario once an inspector page is open (waits at most 60 s)')
    .option('--slow', 'wait for the inspector page, and pause 2 s before each part, to watch it live')
    .option('--hold', 'keep the inspector page serving after the demo ends, until Ctrl-C')
    .action(async (o: DemoFlags) => {
      const { runDemo, guaranteesHeld } = await loadOptional(() => import('../demo/run-demo.js'));
      const metrics = new ContinuityMetrics();
      const inspector = o.inspect ? await startInspectorServer({ port: o.inspectPort }) : undefined;
      const feed = inspector && createInspectorFeed({ url: inspector.feedUrl, name: 'npm start', metrics });
      if (inspector) {
        console.log(`inspector: ${inspector.url}  (the machines of this demo, live)\n`);
        if (o.waitForPage || o.slow) await waitForPage(inspector);
      }
      let held = false;
      try {
        const s = await runDemo({
          idleTimeoutMs: o.idleTimeout,
          chargeMs: o.chargeMs,
          chattyCount: o.count,
          bufferSize: o.buffer,
          inspect: feed?.inspect,
          metrics,
          pauseMs: o.slow ? 2_000 : 0,
        });
        held = guaranteesHeld(s);
        console.log(held ? '\nAll guarantees held.' : '\nA guarantee was broken: see above.');
      } finally {
        await feed?.close();
      }
      process.exitCode = held ? 0 : 1;
      if (inspector && o.hold) {
        console.log(`\ninspector still serving at ${inspector.url}; Ctrl-C to stop`);
        await untilSignal();
      }
      await inspector?.close();
    });

  program
    .command('inspect')
    .description(
      'serve the live inspector page: the statecharts, cursors, gaps, outcome-unknown calls and metrics of running clients and servers',
    )
    .option('--port <n>', 'port to listen on', int('--port'), 4477)
    .option('--host <host>', 'address to bind (loopback keeps it to this machine)', '127.0.0.1')
    .action(async (o: { port: number; host: string }) => {
      const inspector = await startInspectorServer({ port: o.port, host: o.host });
      console.log(`inspector page: ${inspector.url}`);
      console.log('feed it from your process, as the `inspect` option of ContinuityClientTransport and/or');
      console.log(`createContinuityServer: createInspectorFeed({ url: '${inspector.feedUrl}' }).inspect`);
      console.log(
        `(or @statelyai/inspect: createWebSocketInspector({ url: '${inspector.feedUrl}' }).inspect)`,
      );
      await untilSignal();
      await inspector.close();
    });

  await program.parseAsync(argv);
}

interface DemoFlags {
  idleTimeout: number;
  chargeMs: number;
  count: number;
  buffer: number;
  inspect: boolean;
  inspectPort: number;
  waitForPage?: boolean;
  slow?: boolean;
  hold?: boolean;
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
  await main(process.argv);
} catch (error) {
  if (!(error instanceof MissingPeerError)) throw error;
  console.error(`mcp-continuity: ${error.message}`);
  process.exitCode = 1;
}
