/**
 * `npm run compare`: the design note's incidents, measured at run time on real stacks over loopback, all
 * through the same fault proxy. Two eras, each its own section of docs/compare.md:
 *
 * 2025-11-25 (`--era 2025`):
 *   (A) official SDK: Client + StreamableHTTPClientTransport → McpServer + StreamableHTTPServerTransport
 *   (B) mcp-continuity: Client + ContinuityClientTransport → createContinuityServer + McpServer
 * 2026-07-28 (`--era 2026`): the stacks of `MODERN_STACKS` (scripts/compare/modern-stacks.ts), the official
 *   v2 client and server first, on the faults of scripts/compare/modern-incidents.ts.
 *
 * `npm run compare` runs both; `npm run compare -- --era 2026` runs one and rewrites only its section.
 * Prints Markdown and writes docs/compare.md.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { HANG_MS, incident1, incident2, incident3, type Row } from './compare/incidents.js';
import {
  CHARGE_MS,
  IDLE_CUT_MS,
  MODERN_INCIDENTS,
  type ModernRow,
  RESTART_AFTER_MS,
} from './compare/modern-incidents.js';
import { MODERN_STACKS, PROTOCOL_2026 } from './compare/modern-stacks.js';
import type { StackKind } from './compare/stacks.js';

const OUT = fileURLToPath(new URL('../docs/compare.md', import.meta.url));
type Era = '2025' | '2026';

function erasFromArgs(argv: readonly string[]): Era[] {
  const i = argv.indexOf('--era');
  const value = i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith('--era='))?.slice(6);
  if (value === undefined || value === 'all') return ['2025', '2026'];
  if (value === '2025' || value === '2026') return [value];
  throw new Error(`--era must be 2025, 2026 or all, got ${value}`);
}
const STACKS: readonly StackKind[] = ['sdk', 'ours'];
const INCIDENTS = [incident1, incident2, incident3];

const unhandled: string[] = [];
process.on('unhandledRejection', (reason) => {
  unhandled.push(reason instanceof Error ? reason.message : String(reason));
});

const cell = (s: string | number) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');

function table(rows: readonly Row[]): string {
  const head = [
    'incident',
    'stack',
    'side effects',
    'events delivered',
    'lost silently',
    'gaps flagged',
    'duplicates',
    'outcome',
    'hangs',
  ];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows) {
    lines.push(
      `| ${[r.incident, r.stack, r.sideEffects, r.delivered, r.lostSilently, r.gapsFlagged, r.duplicates, r.outcome, r.hangs].map(cell).join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

function notes(rows: ReadonlyArray<Pick<Row, 'incident' | 'stack' | 'notes'>>): string {
  const lines: string[] = [];
  for (const r of rows) {
    lines.push(`- **${r.incident}, ${r.stack}**`);
    for (const n of r.notes) lines.push(`  - ${n}`);
  }
  return lines.join('\n');
}

function machine(command: string): string {
  const cpus = os.cpus();
  return `Machine: Node ${process.version}, ${os.type()} ${os.release()} (${os.arch()}), ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown CPU'}. Command: \`${command}\`.`;
}

const SETUP = `Both stacks run over loopback through the same \`FaultProxy\`, with identical tools (\`charge {key, ms}\`
counts its side effect outside the server, then answers after \`ms\`; \`chatty {count, intervalMs}\` sends
numbered \`notifications/progress\`). Server heartbeats are off on both sides (SDK \`keepAliveMs: 0\`, ours
\`heartbeatMs: 0\`). The SDK server is stateful (one transport per session in a map, unknown id → 404) with an
in-memory \`EventStore\` written for this comparison: the last N events per stream, ids \`<stream>_<seq>\`,
replay = every retained event after the cursor's sequence number, so an evicted cursor resumes silently at
the oldest retained event. Client reconnect settings are each library's defaults, except in incident 2
(a fixed 700 ms on both: SDK \`initialReconnectionDelay\`/\`maxReconnectionDelay\` 700, growth 1, 2 retries;
ours \`initialDelayMs\`/\`maxDelayMs\` 700, no jitter). Our server sends \`retry: 20\`.

1. LB idle timeout: the proxy cuts connections idle for 150 ms; \`charge\` answers after 600 ms.
2. Bounded buffer: 100 events per stream (SDK store / \`MemoryEventLog({ maxEventsPerStream: 100 })\`);
   \`chatty\` sends 150 notifications 1 ms apart; the call's POST connection is reset once 3 have arrived.
3. Restart: \`charge\` (500 ms) starts; 100 ms later the server process is replaced on the same port
   (in-memory sessions gone) and every connection is reset; then a follow-up \`echo\` call.

Every wait is bounded: no outcome within ${HANG_MS / 1000} s counts as a hang. "Lost silently" = notifications
the application never received and no gap report accounted for; "duplicates" = notifications or call
results received twice.`;

async function era2025(): Promise<string> {
  const started = performance.now();
  const rows: Row[] = [];
  for (const incident of INCIDENTS) {
    for (const kind of STACKS) {
      try {
        rows.push(await incident(kind));
      } catch (error) {
        rows.push({
          incident: incident.name,
          stack: kind,
          sideEffects: '?',
          delivered: '?',
          lostSilently: '?',
          gapsFlagged: '?',
          duplicates: '?',
          outcome: `harness failure: ${error instanceof Error ? error.message : String(error)}`,
          hangs: 0,
          notes: [],
        });
      }
    }
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  return [
    table(rows),
    '',
    '### Details',
    '',
    notes(rows),
    ...(unhandled.length ? ['', `Unhandled rejections during the run: ${unhandled.length}.`] : []),
    '',
    `${machine('npm run compare -- --era 2025')} Run time: ${seconds} s.`,
  ].join('\n');
}

const SETUP_MODERN = `Protocol ${PROTOCOL_2026}: no sessions, no \`Last-Event-ID\`; closing a response stream cancels its
request, and a client whose stream broke is told to re-issue it with a new id. The official v2 stack is
\`@modelcontextprotocol/client\` 2.4.0 (\`Client\` pinned with \`versionNegotiation: { mode: { pin: '${PROTOCOL_2026}' } }\`,
\`StreamableHTTPClientTransport\`, default \`fetch\`) against \`@modelcontextprotocol/server\` 2.4.0
(\`createMcpHandler\`, SSE keep-alive off) on \`node:http\` via \`@modelcontextprotocol/node\` 2.1.2. "App re-issues
(spec)" is the same stack with the application re-issuing a call whose stream broke, up to 3 attempts. The tool
\`charge {key, ms, progress}\` makes its side effect first (counted outside the server), optionally sends one
progress notification, and answers after \`ms\`; it does not stop on its abort signal (the side effect is made).

1. Idle cut: the proxy cuts connections idle for ${IDLE_CUT_MS} ms; \`charge\` answers after ${CHARGE_MS} ms.
2. The same, \`charge\` sending one progress notification first (the stream has carried bytes when it is cut).
3. Restart: ${RESTART_AFTER_MS} ms into a ${CHARGE_MS} ms \`charge\` the server process is replaced on the same
   port and every connection is reset; then a follow-up \`echo\` call on the same client.

Every wait is bounded: no outcome within ${HANG_MS / 1000} s counts as a hang (the client's own request timeout
is 60 s). "Time" is from the call to its outcome, and from the fault (the proxy's last cut before the outcome, or the
restart) to the outcome. mcp-continuity is the same v2 \`Client\` with \`fetch: continuityFetch()\` (the one line an application
changes) against \`createContinuityServer\` serving 2026-07-28 with the continuity extension (\`MemoryEventLog\`,
\`MemoryMemoStore\`, heartbeats off); "memory only" restarts with an empty log and memo, "store kept" keeps them
(what a durable SQLite or Redis store gives).`;

function tableModern(rows: readonly ModernRow[]): string {
  const head = ['incident', 'stack', 'side effects', 'what the caller got', 'time', 'hangs'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows)
    lines.push(`| ${[r.incident, r.stack, r.charges, r.got, r.time, r.hangs].map(cell).join(' | ')} |`);
  return lines.join('\n');
}

async function eraModern(): Promise<string> {
  const started = performance.now();
  const rows: ModernRow[] = [];
  for (const incident of MODERN_INCIDENTS) {
    for (const stack of MODERN_STACKS) {
      try {
        rows.push(await incident(stack));
      } catch (error) {
        rows.push({
          incident: incident.name,
          stack: stack.name,
          charges: '?',
          got: `harness failure: ${error instanceof Error ? error.message : String(error)}`,
          time: '?',
          hangs: 0,
          notes: [],
        });
      }
    }
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  return [
    tableModern(rows),
    '',
    '### Details',
    '',
    notes(rows),
    ...(unhandled.length ? ['', `Unhandled rejections during the run: ${unhandled.length}.`] : []),
    '',
    `${machine('npm run compare -- --era 2026')} Run time: ${seconds} s.`,
  ].join('\n');
}

const TITLES: Record<Era, string> = {
  '2025': '## MCP 2025-11-25 (sessions)',
  '2026': `## MCP ${PROTOCOL_2026} (stateless requests)`,
};
const SETUPS: Record<Era, string> = { '2025': SETUP, '2026': SETUP_MODERN };
const marker = (era: Era | 'tasks') => [`<!-- era ${era} -->`, `<!-- /era ${era} -->`] as const;

/**
 * The era's section of the existing docs/compare.md, kept when only the other era runs. The `tasks`
 * section is measured by test/tasks/ext-tasks-dispatcher.test.ts, not by this script: always kept.
 */
function previousSection(doc: string, era: Era | 'tasks'): string | undefined {
  const [open, close] = marker(era);
  const a = doc.indexOf(open);
  const b = doc.indexOf(close);
  return a >= 0 && b > a ? doc.slice(a, b + close.length) : undefined;
}

async function main(): Promise<void> {
  const eras = erasFromArgs(process.argv.slice(2));
  const previous = existsSync(OUT) ? readFileSync(OUT, 'utf8') : '';
  const sections: string[] = [];
  for (const era of ['2025', '2026'] as const) {
    if (!eras.includes(era)) {
      const kept = previousSection(previous, era);
      if (kept) sections.push(kept);
      continue;
    }
    const body = era === '2025' ? await era2025() : await eraModern();
    process.stdout.write(`${body}\n\n`);
    const [open, close] = marker(era);
    sections.push([open, TITLES[era], '', SETUPS[era], '', body, close].join('\n'));
  }
  const doc = [
    '# mcp-continuity and the official SDK under the design note’s incidents',
    '',
    'Generated by `npm run compare` (`scripts/compare.ts`); do not edit by hand. The numbers are measured when',
    'the script runs, so timings differ from run to run. `npm run compare -- --era 2025` (or `2026`) reruns one',
    'section and keeps the other. The last section (tasks) is measured by `test/tasks/ext-tasks-dispatcher.test.ts`',
    'and kept as it is.',
    '',
    [...sections, previousSection(previous, 'tasks') ?? ''].filter(Boolean).join('\n\n'),
    '',
  ].join('\n');
  writeFileSync(OUT, doc);
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
