/**
 * `npm run bench`: every comparison of issues 8, 25 and 29, run on this machine, one task per child process (fresh heap
 * and JIT; servers run in a process of their own, so client and server use both cores). Prints the tables
 * and writes them to docs/benchmarks.md. All traffic is on 127.0.0.1, every wait is bounded.
 *
 * Environment:
 *   BENCH_SCALE=0.1          multiplies every size (notifications, calls, sessions, runs); default 1
 *   BENCH_ROWS=1,3           runs only these rows (then docs/benchmarks.md is not written)
 *   BENCH_CROSS_CALLS=5000   calls for the cross stacks of row 2 (default 1000 × scale)
 *   BENCH_CALL_ROUNDS=5      runs of each main stack of row 2, alternating; the median counts (default 5)
 *   BENCH_EXPLORE_DEPTH=2    depth of the exhaustive explorer in row 5 (default 3)
 *   BENCH_PROF_DIR=/tmp/prof adds --cpu-prof to every bench process (summarize with bench/profile-summary.ts)
 *   BENCH_OUT=path           where to write the Markdown (default docs/benchmarks.md)
 *   BENCH_SESSION_AGE=10000  calls of row 6's session-age run (default 10,000 × scale)
 *   BENCH_MODERN_CALLS=1000  calls per run of each MCP 2026-07-28 stack of row 2 (default 1,000 × scale)
 *   BENCH_MODERN_ROUNDS=3    runs of each MCP 2026-07-28 stack of row 2, alternating (default 3)
 *   BENCH_STORE_ROUNDS=1     runs of each store per table of row 6, alternating (default 1)
 *   BENCH_COLD_ROUNDS=5      cold starts of each server in row 7, alternating (default 5)
 */
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { benchExecArgv } from './lib/remote.js';
import { bytes, fixed, int } from './lib/stats.js';
import type { CallsResult } from './rows/calls.js';
import type { ColdStartResult } from './rows/cold-start.js';
import type { MemoMemoryResult } from './rows/memo-memory.js';
import type {
  AppendCostResult,
  BreakdownResult,
  EventsMemoryResult,
  ManySessionsResult,
  SessionsMemoryResult,
} from './rows/memory.js';
import type { ResumeResult } from './rows/resume.js';
import type { RedisCost, SessionAgeResult, StoreCallsResult, StoreNotifyResult } from './rows/stores.js';
import type { ThroughputResult } from './rows/throughput.js';
import type { ExploreResult, PropertyRunsResult } from './rows/verification.js';

const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));

const envNumber = (name: string, fallback: number): number => {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${v}`);
  return n;
};
const SCALE = envNumber('BENCH_SCALE', 1);
const ROW_KEYS = ['1', '2', '3', '4', '5', '6', '7'];
const ROWS = new Set((process.env.BENCH_ROWS ?? ROW_KEYS.join(',')).split(',').map((s) => s.trim()));
const ALL_ROWS = ROW_KEYS.every((r) => ROWS.has(r));
const OUT = process.env.BENCH_OUT ?? (ALL_ROWS ? 'docs/benchmarks.md' : undefined);
const scaled = (n: number, min = 1) => Math.max(min, Math.round(n * SCALE));

/** The issue's sizes, times BENCH_SCALE. */
const SIZES = {
  notifications: scaled(100_000, 1_000),
  calls: scaled(5_000, 100),
  crossCalls: Math.round(envNumber('BENCH_CROSS_CALLS', scaled(1_000, 100))),
  /**
   * Row 2's two main stacks run this many times each, alternating; the median run is the result. Five:
   * single runs of the same stack varied by a fifth on this 2-core machine.
   */
  callRounds: Math.max(1, Math.round(envNumber('BENCH_CALL_ROUNDS', 5))),
  /** Calls per run of each MCP 2026-07-28 stack of row 2, and runs of each, alternating. */
  /** Row 2: the first calls of a fresh process, timed on their own (issue 25: 1,000). */
  freshCalls: scaled(1_000, 100),
  modernCalls: Math.round(envNumber('BENCH_MODERN_CALLS', scaled(1_000, 100))),
  modernRounds: Math.max(1, Math.round(envNumber('BENCH_MODERN_ROUNDS', 3))),
  concurrency: 50,
  resumeSizes: [1_000, 10_000],
  resumeRepetitions: Math.max(5, Math.round(30 * Math.min(1, SCALE))),
  sdkResumeRepetitions: Math.max(3, Math.round(10 * Math.min(1, SCALE))),
  idleSessions: scaled(1_000, 50),
  events: scaled(100_000, 1_000),
  appendCapacities: [1_000, 10_000, 20_000],
  manySessions: scaled(10_000, 100),
  /** Keyed calls of row 4's memo measurement (100,000 is stated from their cost per call). */
  memoCalls: scaled(4_000, 400),
  propertyRuns: scaled(1_000, 20),
  exploreDepth: Math.round(envNumber('BENCH_EXPLORE_DEPTH', 3)),
  storeCalls: scaled(1_000, 100),
  storeNotifications: scaled(10_000, 1_000),
  sessionAge: Math.round(envNumber('BENCH_SESSION_AGE', scaled(10_000, 1_000))),
  /** Row 6: keyed calls on SQLite while its memo fills (issue 29: to 10,000 entries). */
  memoFill: scaled(10_000, 1_000),
  /** Row 6: runs of each store per table, alternating (the median run counts). */
  /** Row 7: starts of each server, alternating. */
  coldRounds: Math.max(1, Math.round(envNumber('BENCH_COLD_ROUNDS', 5))),
  storeRounds: Math.max(1, Math.round(envNumber('BENCH_STORE_ROUNDS', 1))),
};

// ---------------------------------------------------------------------------------------------- tasks

interface TaskOutcome<T> {
  readonly ok: boolean;
  readonly result?: T;
  readonly error?: string;
  readonly ms: number;
  /** Process warnings the task printed (e.g. MaxListenersExceededWarning), counted by kind. */
  readonly warnings: Record<string, number>;
}

const TASK_TIMEOUT_MS = 240_000;

/**
 * Runs one task in a child process; bounded by TASK_TIMEOUT_MS, or by the task's own `timeoutMs` plus a
 * minute when it has one (then the child is killed by its pid).
 */
function runTask<T>(name: string, args: Record<string, unknown> = {}): Promise<TaskOutcome<T>> {
  const limitMs =
    typeof args.timeoutMs === 'number' ? Math.max(TASK_TIMEOUT_MS, args.timeoutMs + 60_000) : TASK_TIMEOUT_MS;
  const start = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...benchExecArgv(), CHILD, name, JSON.stringify(args)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => {
      stderr += `\nkilled after ${limitMs} ms`;
      if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
    }, limitMs);
    child.on('close', () => {
      clearTimeout(timer);
      const ms = performance.now() - start;
      const warnings: Record<string, number> = {};
      for (const m of stderr.matchAll(/\(node:\d+\) (\w+Warning)/g)) {
        const kind = m[1] as string;
        warnings[kind] = (warnings[kind] ?? 0) + 1;
      }
      const line = stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
      if (!line) {
        const tail = stderr.split('\n').filter(Boolean).slice(-8).join('\n');
        resolve({ ok: false, error: `no result; stderr:\n${tail}`, ms, warnings });
        return;
      }
      const parsed = JSON.parse(line.slice('BENCH_RESULT '.length)) as {
        ok: boolean;
        result?: T;
        error?: string;
        unhandled: string[];
      };
      if (parsed.unhandled.length > 0) warnings.unhandledRejection = parsed.unhandled.length;
      resolve({ ok: parsed.ok, result: parsed.result, error: parsed.error, ms, warnings });
    });
  });
}

const progress = (s: string) => process.stderr.write(`${s}\n`);

async function task<T>(label: string, name: string, args: Record<string, unknown> = {}) {
  progress(`  ${label} …`);
  const outcome = await runTask<T>(name, args);
  const warn = Object.entries(outcome.warnings)
    .map(([k, n]) => `${n} × ${k}`)
    .join(', ');
  progress(
    `  ${label}: ${outcome.ok ? 'done' : `FAILED: ${outcome.error?.split('\n')[0]}`} in ${fixed(outcome.ms / 1000)} s${warn ? ` (${warn})` : ''}`,
  );
  return outcome;
}

// --------------------------------------------------------------------------------------- formatting

const PASS = '✅ pass';
const MISS = '❌ miss';
const verdict = (ok: boolean | undefined) => (ok === undefined ? '—' : ok ? PASS : MISS);
const cell = (s: string | number) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
function table(head: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? '—' : `${fixed(a / b, 2)}×`;
const failed = (o: TaskOutcome<unknown>) => `failed: ${(o.error ?? '').split('\n')[0]}`;
const warningNote = (o: TaskOutcome<unknown>) => {
  const w = Object.entries(o.warnings);
  return w.length === 0 ? '' : ` (${w.map(([k, n]) => `${n} × ${k}`).join(', ')})`;
};

function gitDescription(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'machines'], { cwd: ROOT })
      .toString()
      .trim();
    return `${commit}${dirty ? ' with uncommitted changes in src/ or machines/' : ''}`;
  } catch {
    return 'unknown';
  }
}

function machine(): string[] {
  const cpus = os.cpus();
  const env = Object.entries(process.env)
    .filter(([k]) => k.startsWith('BENCH_'))
    .map(([k, v]) => `${k}=${v}`);
  return [
    `- Node ${process.version} (V8 ${process.versions.v8}), ${os.type()} ${os.release()} ${os.arch()}`,
    `- CPU: ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown'}; memory ${bytes(os.totalmem())}`,
    `- Command: \`${[...env, 'npm run bench'].join(' ')}\` (\`tsx bench/run.ts\`); scale ${SCALE}`,
    `- Code: commit ${gitDescription()}; run ${new Date().toISOString()}`,
    `- Load average (1, 5, 15 min) when the run started: ${loads(LOAD_AT_START)}; when it ended: ${loads(LOAD_AT_END)} (other work on the machine skews every number; on 2 cores, a load much above 2 means the run shared them)`,
  ];
}

// --------------------------------------------------------------------------------------------- rows

interface Section {
  readonly summary: string[][];
  readonly body: string;
  readonly notes: string[];
}

const V2_NOTIFY_LABEL = '(v) MCP 2026-07-28: official v2 server + v2 `Client` (pinned)';
const V2_CALLS_LABEL = 'MCP 2026-07-28: official v2 server + v2 `Client` (pinned)';
const OURS_MODERN_NOTIFY_LABEL =
  '(v′) MCP 2026-07-28: mcp-continuity server (continuity extension) + v2 `Client` with `continuityFetch()`';
const OURS_MODERN_CALLS_LABEL =
  'MCP 2026-07-28: mcp-continuity server + v2 `Client` with `continuityFetch()`';
const OURS_MODERN_UNKEYED_LABEL =
  'MCP 2026-07-28: mcp-continuity server + v2 `Client` with `continuityFetch()`, read-only `peek` (unkeyed)';

async function row1(): Promise<Section> {
  progress(`row 1: notification throughput (${int(SIZES.notifications)} notifications)`);
  const count = SIZES.notifications;
  // Every stack's reader is an SDK `Client`; (e) and (e′) put bare Node http behind the same two clients.
  const stacks = [
    {
      key: 'a',
      label: '(a) mcp-continuity server + ContinuityClientTransport',
      server: 'ours',
      client: 'ours',
    },
    {
      key: 'b',
      label: '(b) mcp-continuity server + SDK StreamableHTTPClientTransport',
      server: 'ours',
      client: 'sdk',
    },
    { key: 'c', label: '(c) SDK server, no event store + SDK client', server: 'sdk', client: 'sdk' },
    {
      key: 'd',
      label: '(d) SDK server + example InMemoryEventStore + SDK client',
      server: 'sdk-store',
      client: 'sdk',
    },
    {
      key: 'e',
      label: '(e) raw Node http + SDK client (the ceiling of b, c, d)',
      server: 'raw',
      client: 'sdk',
    },
    {
      key: 'e′',
      label: '(e′) raw Node http + ContinuityClientTransport (the ceiling of a)',
      server: 'raw',
      client: 'ours',
    },
  ] as const;
  const ceilingOf: Record<string, string> = { a: 'e′', b: 'e', c: 'e', d: 'e', e: 'e', 'e′': 'e′' };
  const outcomes = new Map<string, TaskOutcome<ThroughputResult>>();
  for (const s of stacks) {
    outcomes.set(
      s.key,
      await task<ThroughputResult>(s.label, 'notify', { server: s.server, client: s.client, count }),
    );
  }
  outcomes.set(
    'f',
    await task<ThroughputResult>(
      '(f) SDK Client alone, in-memory transport (reference)',
      'notify-client-only',
      {
        count,
      },
    ),
  );
  outcomes.set(
    'g',
    await task<ThroughputResult>(
      '(g) raw Node http SSE → fetch reader, no MCP client (reference)',
      'notify-raw',
      {
        count,
      },
    ),
  );
  // MCP 2026-07-28: the official v2 server and v2 `Client` (no sessions; the call's response is its stream).
  outcomes.set(
    'v',
    await task<ThroughputResult>(V2_NOTIFY_LABEL, 'notify-v2', {
      count,
    }),
  );
  outcomes.set(
    'v′',
    await task<ThroughputResult>(OURS_MODERN_NOTIFY_LABEL, 'notify-v2', { server: 'ours-2026', count }),
  );
  const rate = (k: string) => outcomes.get(k)?.result?.perSecond;
  const rows = [
    ...stacks,
    { key: 'v', label: V2_NOTIFY_LABEL },
    { key: 'v′', label: OURS_MODERN_NOTIFY_LABEL },
    { key: 'f', label: '(f) reference: SDK `Client` alone, in-memory transport, no HTTP' },
    { key: 'g', label: '(g) reference: raw Node http → fetch + eventsource-parser, no MCP client' },
  ].map((s) => {
    const o = outcomes.get(s.key) as TaskOutcome<ThroughputResult>;
    if (!o.ok || !o.result) return [s.label, failed(o), '', '', ''];
    const ceiling = ceilingOf[s.key];
    return [
      s.label,
      `${fixed(o.result.ms / 1000, 2)} s`,
      int(o.result.perSecond),
      ratio(o.result.perSecond, rate('c')),
      (ceiling === undefined ? '—' : `${ratio(o.result.perSecond, rate(ceiling))} (${ceiling})`) +
        warningNote(o),
    ];
  });
  const [a, b, c, e, e2] = [rate('a'), rate('b'), rate('c'), rate('e'), rate('e′')];
  const atLeast = (x: number | undefined, y: number | undefined, share = 1) =>
    x !== undefined && y !== undefined ? x >= y * share : undefined;
  const vsSdk = atLeast(a, c, 4);
  const [v, v2] = [rate('v'), rate('v′')];
  const modernVsOfficial = atLeast(v2, v, 1.25);
  const serverVsCeiling = atLeast(b, e, 0.5);
  const bothVsCeiling = atLeast(a, e2, 0.5);
  const vsCeiling =
    serverVsCeiling === undefined || bothVsCeiling === undefined
      ? undefined
      : serverVsCeiling && bothVsCeiling;
  const notes: string[] = [];
  if (vsSdk === false || vsCeiling === false) notes.push(NOTES.row1);
  if (modernVsOfficial === false) notes.push(NOTES.row1Modern);
  const limits = vsSdk === false || vsCeiling === false ? [] : ['', NOTES.row1];
  return {
    summary: [
      [
        '1',
        `2025 notifications/s, one session, ${int(count)} progress notifications to an SDK \`Client\`: ours (a)`,
        `${int(a ?? Number.NaN)}/s = ${ratio(a, c)} SDK (c) ${int(c ?? Number.NaN)}/s`,
        '≥ 4× SDK (c)',
        verdict(vsSdk),
      ],
      [
        '1',
        '…same, vs raw Node http writing the same frames to the same client',
        `our server (b) ${ratio(b, e)} of (e) ${int(e ?? Number.NaN)}/s; both ends ours (a) ${ratio(a, e2)} of (e′) ${int(e2 ?? Number.NaN)}/s`,
        '≥ 0.5 × ceiling',
        verdict(vsCeiling),
      ],
      [
        '1',
        `MCP 2026-07-28 notifications/s, ${int(count)} on one call: ours with the continuity extension (v′) vs the official v2 stack (v)`,
        `${int(v2 ?? Number.NaN)} vs ${int(v ?? Number.NaN)}/s (${ratio(v2, v)})`,
        '≥ 1.25× official v2',
        verdict(modernVsOfficial),
      ],
    ],
    body: [
      `### 1. Notification throughput on one session`,
      '',
      `One \`tools/call\` of \`stream {count: ${int(count)}}\`: the tool awaits \`sendNotification\` of a small \`notifications/progress\` ${int(count)} times, then answers. The reader is always an SDK \`Client\` counting \`onprogress\` (all must arrive, in order); timed from the call to its result, after a 2,000-notification warm-up call. Server and client run in separate processes. The ceiling, (e) and (e′), is bare \`node:http\` writing the same frames (\`id:\` + \`data:\` JSON, one \`res.write\` each, honouring backpressure) with just enough MCP for the client (initialize answered in JSON, 202 for notifications): no session state, no log, no McpServer, no validation. Each stack is compared with the ceiling that has the same client, so the ratio is what the server side costs. Two references are not stacks: (f) is the same call into an SDK \`Client\` whose transport hands it the messages as objects (100 per macrotask; no HTTP, no SSE, no JSON), the most any stack ending in an SDK \`Client\` can reach here; (g) is the frames read by \`fetch\` + \`eventsource-parser\` + \`JSON.parse\` with no MCP client, how fast this machine moves the bytes. (v) is MCP 2026-07-28 on the official v2 packages: the same tool on a v2 \`McpServer\` (\`createMcpHandler\`, defaults) streaming to a v2 \`Client\` pinned to 2026-07-28; there is no session, the call's response is its stream. No stack ending in an SDK \`Client\` comes near (g): the \`Client\` alone (f) is ${ratio(rate('f'), rate('g'))} of it in this run.`,
      '',
      table(['stack', 'time', 'notifications/s', 'vs SDK (c)', 'vs the ceiling with the same client'], rows),
      ...limits,
    ].join('\n'),
    notes,
  };
}

/** The run whose rate is the median of `outcomes` (a failed run, if any, instead). */
function medianRun<T extends { perSecond: number }>(
  outcomes: ReadonlyArray<TaskOutcome<T>>,
  by: (r: T) => number = (r) => r.perSecond,
): TaskOutcome<T> | undefined {
  const failedRun = outcomes.find((o) => !o.ok || !o.result);
  if (failedRun) return failedRun;
  const sorted = [...outcomes].sort((x, y) => by(x.result as T) - by(y.result as T));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/** The median of `by` over the runs that succeeded. */
const medianOf = <T>(outcomes: ReadonlyArray<TaskOutcome<T>>, by: (r: T) => number): number | undefined => {
  const xs = outcomes.flatMap((o) => (o.ok && o.result ? [by(o.result)] : [])).sort((x, y) => x - y);
  return xs.length === 0 ? undefined : (xs[Math.floor((xs.length - 1) / 2)] as number);
};

/**
 * Runs each stack `rounds` times, alternating (the order rotates every round), so a slow spell of this
 * shared machine does not land on one stack only.
 */
async function alternate<S, T>(
  stacks: readonly S[],
  rounds: number,
  run: (s: S, round: number) => Promise<TaskOutcome<T>>,
): Promise<Array<Array<TaskOutcome<T>>>> {
  const runs: Array<Array<TaskOutcome<T>>> = stacks.map(() => []);
  for (let round = 1; round <= rounds; round++) {
    for (let k = 0; k < stacks.length; k++) {
      const i = (k + round - 1) % stacks.length;
      runs[i]?.push(await run(stacks[i] as S, round));
    }
  }
  return runs;
}

async function row2(): Promise<Section> {
  progress(`row 2: tool calls/s (${int(SIZES.calls)} calls, ${SIZES.concurrency} concurrent)`);
  type Stack = {
    label: string;
    server: string;
    client: string;
    total: number;
    rounds: number;
    tool?: 'peek';
  };
  const main: Stack[] = [
    {
      label: 'mcp-continuity both ends',
      server: 'ours',
      client: 'ours',
      total: SIZES.calls,
      rounds: SIZES.callRounds,
    },
    { label: 'SDK both ends', server: 'sdk', client: 'sdk', total: SIZES.calls, rounds: SIZES.callRounds },
  ];
  const cross: Stack[] = [
    {
      label: 'cross: our server + SDK client',
      server: 'ours',
      client: 'sdk',
      total: SIZES.crossCalls,
      rounds: 1,
    },
    {
      label: 'cross: SDK server + our client',
      server: 'sdk',
      client: 'ours',
      total: SIZES.crossCalls,
      rounds: 1,
    },
  ];
  // MCP 2026-07-28: every call is its own HTTP request. The three alternate like the main pair.
  const m = { total: SIZES.modernCalls, rounds: SIZES.modernRounds, client: 'v2' };
  const modern: Stack[] = [
    { label: V2_CALLS_LABEL, server: 'v2', ...m },
    { label: OURS_MODERN_CALLS_LABEL, server: 'ours-2026', ...m },
    { label: OURS_MODERN_UNKEYED_LABEL, server: 'ours-2026', tool: 'peek', ...m },
  ];
  const run = (s: Stack, round: number) =>
    task<CallsResult>(
      `${s.label} (${int(s.total)} calls${s.rounds === 1 ? '' : `, run ${round} of ${s.rounds}`})`,
      s.server === 'v2' || s.server === 'ours-2026' ? 'calls-v2' : 'calls',
      {
        server: s.server,
        client: s.client,
        total: s.total,
        concurrency: SIZES.concurrency,
        fresh: SIZES.freshCalls,
        ...(s.tool ? { tool: s.tool } : {}),
      },
    );
  const mainRuns = await alternate(main, SIZES.callRounds, run);
  const crossRuns = await alternate(cross, 1, run);
  const modernRuns = await alternate(modern, SIZES.modernRounds, run);
  const all = [
    ...main.map((stack, i) => ({ stack, runs: mainRuns[i] ?? [] })),
    ...cross.map((stack, i) => ({ stack, runs: crossRuns[i] ?? [] })),
    ...modern.map((stack, i) => ({ stack, runs: modernRuns[i] ?? [] })),
  ];
  const rows = all.map(({ stack: s, runs }) => {
    const o = medianRun(runs);
    if (!o?.ok || !o.result)
      return [s.label, int(s.total), o ? failed(o) : 'not run', '', '', '', '', '', ''];
    const r = o.result;
    return [
      s.label,
      int(r.total),
      `${fixed(r.ms / 1000, 1)} s`,
      int(r.perSecond),
      runs.map((x) => (x.result ? int(x.result.perSecond) : 'failed')).join(', '),
      int(medianOf(runs, (x) => x.freshPerSecond) ?? Number.NaN),
      r.windowsPerSecond.map((w) => int(w)).join(' → '),
      `${fixed(r.latencyMs.median, 1)} / ${fixed(r.latencyMs.p99, 1)} ms`,
      (r.errors.length > 0 ? `${r.errors.length} errors: ${r.errors[0]}` : '') + warningNote(o),
    ];
  });
  const rate = (runs: Array<TaskOutcome<CallsResult>> | undefined) =>
    runs === undefined ? undefined : medianOf(runs, (r) => r.perSecond);
  const fresh = (runs: Array<TaskOutcome<CallsResult>> | undefined) =>
    runs === undefined ? undefined : medianOf(runs, (r) => r.freshPerSecond);
  const atLeast = (x: number | undefined, y: number | undefined, share: number) =>
    x !== undefined && y !== undefined ? x >= y * share : undefined;
  const [ours, sdk] = [rate(mainRuns[0]), rate(mainRuns[1])];
  const [oursFresh, sdkFresh] = [fresh(mainRuns[0]), fresh(mainRuns[1])];
  const perRound = (
    a: Array<TaskOutcome<CallsResult>> | undefined,
    b: Array<TaskOutcome<CallsResult>> | undefined,
    by: (r: CallsResult) => number,
  ) =>
    (a ?? [])
      .map((x, i) =>
        ratio(
          x.result ? by(x.result) : undefined,
          b?.[i]?.result ? by(b[i]?.result as CallsResult) : undefined,
        ),
      )
      .join(', ');
  const [official, keyed, unkeyed] = [rate(modernRuns[0]), rate(modernRuns[1]), rate(modernRuns[2])];
  const ok = atLeast(ours, sdk, 1.25);
  const freshOk = atLeast(oursFresh, sdkFresh, 1.25);
  const keyedOk = atLeast(keyed, official, 1.0);
  const unkeyedOk = atLeast(unkeyed, official, 1.1);
  const outcomes = [...mainRuns, ...crossRuns, ...modernRuns].flat();
  const rounds = (n: number) => (n === 1 ? 'one run' : `median of ${n} runs, alternating`);
  return {
    summary: [
      [
        '2',
        `2025 tool calls/s, both ends ours vs both ends SDK: ${int(SIZES.calls)} \`echo\` calls, ${SIZES.concurrency} concurrent, one session (${rounds(SIZES.callRounds)})`,
        `${int(ours ?? Number.NaN)} vs ${int(sdk ?? Number.NaN)}/s (${ratio(ours, sdk)}); each round ${perRound(mainRuns[0], mainRuns[1], (r) => r.perSecond)}`,
        '≥ 1.25× SDK',
        verdict(ok),
      ],
      [
        '2',
        `…the first ${int(SIZES.freshCalls)} calls of a fresh process (client and server just started; ${rounds(SIZES.callRounds)})`,
        `${int(oursFresh ?? Number.NaN)} vs ${int(sdkFresh ?? Number.NaN)}/s (${ratio(oursFresh, sdkFresh)}); each round ${perRound(mainRuns[0], mainRuns[1], (r) => r.freshPerSecond)}`,
        '≥ 1.25× SDK',
        verdict(freshOk),
      ],
      [
        '2',
        `MCP 2026-07-28 keyed calls/s (the continuity extension on, ${SIZES.concurrency} concurrent) vs the official v2 stack's unkeyed calls (${int(SIZES.modernCalls)} calls, ${rounds(SIZES.modernRounds)})`,
        `${int(keyed ?? Number.NaN)} vs ${int(official ?? Number.NaN)}/s (${ratio(keyed, official)})`,
        '≥ 1.0× official v2',
        verdict(keyedOk),
      ],
      [
        '2',
        'MCP 2026-07-28 unkeyed calls/s (read-only `peek`) through our endpoint vs the official v2 stack',
        `${int(unkeyed ?? Number.NaN)} vs ${int(official ?? Number.NaN)}/s (${ratio(unkeyed, official)})`,
        '≥ 1.1× official v2',
        verdict(unkeyedOk),
      ],
    ],
    body: [
      `### 2. Tool calls per second`,
      '',
      `${SIZES.concurrency} callers share one \`Client\` and call \`echo {text}\` until the total is reached. The first ${int(SIZES.freshCalls)} calls of every run are timed on their own ("first ${int(SIZES.freshCalls)}": client and server processes just started, nothing compiled yet) and are the warm-up of the timed run. Server in its own process. 2025: one SDK \`Client\`, one session. MCP 2026-07-28: the official v2 server (\`createMcpHandler\` defaults: a fresh \`McpServer\` per request) or ours with the continuity extension, and a v2 \`Client\` pinned to 2026-07-28 (every call its own HTTP request; ours with \`continuityFetch()\`, which keys every call to a tool not marked read-only, so \`echo\` is keyed and \`peek\` is not). The 2025 main pair runs ${SIZES.callRounds} times each and the three 2026-07-28 stacks ${SIZES.modernRounds} times each, alternating (the order rotates every round); a row shows its median run, "every run" lists them all, and the summary's ratios are of the medians (each round's own ratio beside them). "Per 1,000 calls" is the rate over each consecutive 1,000 completions of the timed run.${SIZES.crossCalls !== SIZES.calls ? ` The cross stacks run once and make ${int(SIZES.crossCalls)} calls (BENCH_CROSS_CALLS; scaled down to fit the time budget).` : ''}`,
      '',
      table(
        [
          'stack',
          'calls',
          'time',
          'calls/s',
          'every run, calls/s',
          `first ${int(SIZES.freshCalls)} of a fresh process, calls/s`,
          'per 1,000 calls, calls/s',
          'latency median / p99',
          'notes',
        ],
        rows,
      ),
      ...(ok === false || freshOk === false ? [] : ['', NOTES.row2]),
    ].join('\n'),
    notes: [
      ...(ok === false || freshOk === false ? [NOTES.row2] : []),
      ...(keyedOk === false || unkeyedOk === false ? [NOTES.row2Modern] : []),
      ...(outcomes.some((o) => (o.warnings.MaxListenersExceededWarning ?? 0) > 0) ? [NOTES.sdkWarnings] : []),
    ],
  };
}

async function row3(): Promise<Section> {
  progress('row 3: resume latency');
  const ours = await task<ResumeResult[]>('mcp-continuity, MemoryEventLog', 'resume', {
    server: 'ours',
    sizes: SIZES.resumeSizes,
    repetitions: SIZES.resumeRepetitions,
  });
  const sdk = await task<ResumeResult[]>('SDK + example InMemoryEventStore (comparison)', 'resume', {
    server: 'sdk-store',
    sizes: SIZES.resumeSizes,
    repetitions: SIZES.sdkResumeRepetitions,
  });
  const modern = await task<ResumeResult[]>(
    'MCP 2026-07-28: mcp-continuity, a keyed re-issue (lastEventId null)',
    'resume-2026',
    { sizes: SIZES.resumeSizes, repetitions: SIZES.resumeRepetitions },
  );
  const rows: Array<Array<string | number>> = [];
  for (const [label, o] of [
    ['mcp-continuity (MemoryEventLog, maxEventsPerStream 10,010)', ours],
    ['SDK server + example InMemoryEventStore', sdk],
    [
      'MCP 2026-07-28: mcp-continuity, the continuity extension: a re-issue with the same key and `lastEventId: null` (POST, no `Last-Event-ID`)',
      modern,
    ],
  ] as const) {
    if (!o.ok || !o.result) {
      rows.push([label, '', failed(o), '', '', '']);
      continue;
    }
    for (const r of o.result) {
      rows.push([
        label,
        int(r.events),
        r.repetitions,
        `${fixed(r.medianMs, 1)} / ${fixed(r.p99Ms, 1)} ms`,
        `${fixed(r.minMs, 1)} – ${fixed(r.maxMs, 1)} ms`,
        `${int(r.delivered)} of ${int(r.events + 1)}; ${int(r.outOfOrder)} out of order${warningNote(o)}`,
      ]);
    }
  }
  // MCP 2026-07-28 has no Last-Event-ID and no sessions: with the official v2 packages a broken stream
  // cancels its request, so there is nothing to resume (what that costs: docs/compare.md, 2026-07-28).
  rows.push([
    'MCP 2026-07-28: official v2 server + v2 `Client`',
    '—',
    '—',
    'no resume',
    '—',
    'the revision has no `Last-Event-ID`; a broken stream cancels its request',
  ]);
  const tenK = ours.result?.find((r) => r.events === 10_000);
  const ok = tenK ? tenK.medianMs < 15 : undefined;
  const modernTenK = modern.result?.find((r) => r.events === 10_000);
  const modernOk = modernTenK ? modernTenK.medianMs < 20 : undefined;
  return {
    summary: [
      [
        '3',
        '2025 resume from the start of a 10,000-event stream (GET + Last-Event-ID), ours',
        tenK ? `median ${fixed(tenK.medianMs, 1)} ms, p99 ${fixed(tenK.p99Ms, 1)} ms` : failed(ours),
        '< 15 ms (median)',
        verdict(ok),
      ],
      [
        '3',
        'MCP 2026-07-28: a keyed re-issue getting all 10,000 events and the result, ours (the official v2 packages: no resume)',
        modernTenK
          ? `median ${fixed(modernTenK.medianMs, 1)} ms, p99 ${fixed(modernTenK.p99Ms, 1)} ms`
          : failed(modern),
        '< 20 ms (median)',
        verdict(modernOk),
      ],
    ],
    body: [
      `### 3. Resume latency`,
      '',
      `A \`stream {count}\` call leaves count notifications + its result on one request stream; then GET with \`Last-Event-ID\` = the stream's priming id, read by raw \`fetch\` + \`eventsource-parser\` (each data line JSON-parsed), timed until every replayed message is in. Ours ends a finished stream's response after its replay and must deliver exactly count + 1 messages in order. The SDK keeps a resumed stream open, so its time is taken at its last message (the replay ends after 250 ms of silence); its delivered and out-of-order counts are what its example store replayed. On 2026-07-28 there is no \`Last-Event-ID\`: with the continuity extension a re-issue of the keyed call (a new id, the same key, \`lastEventId: null\`) is answered from the key's log, timed from its POST to the end of its response (count + 1 messages in order). After 3 warm-up resumes.`,
      '',
      table(['server', 'retained events', 'repetitions', 'median / p99', 'min – max', 'delivered'], rows),
    ].join('\n'),
    notes: ok === false || modernOk === false ? [NOTES.row3] : [],
  };
}

async function row4(): Promise<Section> {
  progress('row 4: memory');
  const n = SIZES.idleSessions;
  const ours = await task<SessionsMemoryResult>(`ours: ${int(n)} idle sessions`, 'memory-sessions', {
    server: 'ours',
    mcp: 'bench',
    n,
  });
  const sdk = await task<SessionsMemoryResult>(`SDK: ${int(n)} idle sessions`, 'memory-sessions', {
    server: 'sdk',
    mcp: 'bench',
    n,
  });
  const parts = await task<BreakdownResult>('breakdown: McpServer and session actor', 'memory-breakdown', {
    count: 1_000,
  });
  const events = await task<EventsMemoryResult>(`${int(SIZES.events)} retained events`, 'memory-events', {
    events: SIZES.events,
  });
  const appends: Array<TaskOutcome<AppendCostResult>> = [];
  for (const capacity of SIZES.appendCapacities) {
    appends.push(
      await task<AppendCostResult>(`append cost, capacity ${int(capacity)}`, 'append-cost', { capacity }),
    );
  }
  const many = await task<ManySessionsResult>(
    `${int(SIZES.manySessions)} concurrent idle sessions`,
    'many-sessions',
    {
      n: SIZES.manySessions,
    },
  );
  const memo = await task<MemoMemoryResult>(
    `MCP 2026-07-28: ${int(SIZES.memoCalls)} keyed calls held in one memo window`,
    'memo-memory',
    { calls: SIZES.memoCalls },
  );

  const mcp = parts.result?.mcpServerBench;
  const oursExLog = ours.result?.bytesPerSessionExcludingLog;
  const oursOwn = oursExLog !== undefined && mcp !== undefined ? oursExLog - mcp : undefined;
  const sdkOwn = sdk.result && mcp !== undefined ? sdk.result.bytesPerSession - mcp : undefined;
  const ok = oursOwn !== undefined ? oursOwn <= 2048 : undefined;
  const mm = memo.result;
  const memoEntry =
    mm && events.result ? mm.bytesPerCall - mm.eventsPerCall * events.result.bytesPerEvent : undefined;
  const memoFlat = mm ? mm.bytesPerCallSecondHalf <= 1.25 * mm.bytesPerCallFirstHalf : undefined;

  const sessionRows = [
    ours.ok && ours.result
      ? [
          'mcp-continuity server',
          int(n),
          bytes(ours.result.bytesPerSession),
          bytes(ours.result.bytesPerSessionExcludingLog ?? Number.NaN),
          oursOwn === undefined ? '—' : bytes(oursOwn),
          `${fixed(ours.result.createMs / 1000, 1)} s${warningNote(ours)}`,
        ]
      : ['mcp-continuity server', int(n), failed(ours), '', '', ''],
    sdk.ok && sdk.result
      ? [
          'SDK server, no event store',
          int(n),
          bytes(sdk.result.bytesPerSession),
          '(no log)',
          sdkOwn === undefined ? '—' : bytes(sdkOwn),
          `${fixed(sdk.result.createMs / 1000, 1)} s${warningNote(sdk)}`,
        ]
      : ['SDK server, no event store', int(n), failed(sdk), '', '', ''],
  ];
  const p = parts.result;
  const e = events.result;
  const m = many.result;
  const appendRows = appends.map((o, i) =>
    o.ok && o.result
      ? [int(o.result.capacity), `${fixed(o.result.ms, 0)} ms`, `${fixed(o.result.microsPerAppend, 1)} µs`]
      : [int(SIZES.appendCapacities[i] as number), failed(o), ''],
  );
  const lines = [
    `### 4. Memory`,
    '',
    `Idle sessions: raw \`fetch\` initialize (answer read to its end) + \`notifications/initialized\`, 20 at a time, no GET stream; each session gets an SDK \`McpServer\` with the bench's two tools. Both stacks then sit idle for 2.5 s before the heap is read: ours lets a session idle for a sweep (1 s) sleep, its machine kept as a JSON snapshot (a few hundred bytes) instead of a running actor (~5 KiB), woken by its next request. Heap = \`heapUsed\` after repeated \`gc()\` in the server's own process, before and after; "excluding log" is read again after the MemoryEventLog dropped every session's events (each idle session holds its initialize answer). "Transport's own" subtracts the cost of the McpServer alone (${mcp === undefined ? '—' : bytes(mcp)}, measured below), which the application creates per session on either stack.`,
    '',
    table(
      [
        'server',
        'sessions',
        'heap per idle session',
        'excluding its log',
        "transport's own (minus McpServer)",
        'time to open',
      ],
      sessionRows,
    ),
    '',
    p
      ? `What one session is made of (1,000 of each, heap delta in one process): SDK \`McpServer\` with the two bench tools, connected to a no-op transport: ${bytes(p.mcpServerBench)}; without tools: ${bytes(p.mcpServerBare)}; our \`serverSessionMachine\` actor, started: ${bytes(p.sessionActor)}.`
      : `Breakdown: ${failed(parts)}`,
    '',
    e
      ? `Retained events: ${int(e.events)} \`notifications/progress\` appended to one MemoryEventLog (default policy, ${int(e.streams)} streams × 1,000, nothing evicted; one stream of capacity ${int(e.events)} is not feasible in the time budget, see the append table) in ${fixed(e.appendMs, 0)} ms: ${fixed(e.bytesPerEvent, 1)} B per event, of which the message object itself is ${fixed(e.bytesPerMessageObject, 1)} B (the same objects in a plain array), so the log's own overhead is ${fixed(e.bytesPerEvent - e.bytesPerMessageObject, 1)} B per event.`
      : `Retained events: ${failed(events)}`,
    '',
    'Appending to one stream of growing capacity (`maxEventsPerStream`): an append should cost the same at every capacity.',
    '',
    table(['stream capacity = events appended', 'time', 'per append'], appendRows),
    '',
    m
      ? `${int(m.sessions)} concurrent idle sessions on one server (${m.concurrency} opened at a time): opened in ${fixed(m.createMs / 1000, 1)} s (${int(m.sessionsPerSecond)}/s), heap +${bytes(m.heapBytes)} (${bytes(m.bytesPerSession)} per session, logs and McpServers included). Afterwards an \`echo\` call on the first session took ${fixed(m.oldSessionCallMs, 1)} ms, and a new session plus a call ${fixed(m.newSessionCallMs, 1)} ms: still serving.${warningNote(many)}`
      : `${int(SIZES.manySessions)} sessions: ${failed(many)}`,
    '',
    memo.result
      ? `MCP 2026-07-28 keyed calls: our server (memory stores, memo window 10 min) took ${int(memo.result.calls)} keyed \`echo\` calls from the v2 \`Client\` with \`continuityFetch()\`, 50 at a time, after 200 warm-up calls, in ${fixed(memo.result.ms / 1000, 1)} s; its heap (after gc, in its own process) grew ${bytes(memo.result.bytesPerCall)} per call (${bytes(memo.result.bytesPerCallFirstHalf)} over the first half, ${bytes(memo.result.bytesPerCallSecondHalf)} over the second), with ${fixed(memo.result.entriesPerCall, 2)} memo entries and ${fixed(memo.result.eventsPerCall, 2)} retained events per call (the memo's and the log's own counts). The memo entry alone is estimated as the call's cost minus its retained events at the MemoryEventLog's cost per event above. 100,000 keyed calls inside one window are stated from the cost per call.${warningNote(memo)}`
      : `Keyed calls' memory: ${failed(memo)}`,
  ];
  const notes: string[] = [];
  if (ok === false) notes.push(NOTES.row4Session);
  const big = appends.at(-1)?.result;
  const small = appends[0]?.result;
  if (big && small && big.microsPerAppend > 3 * small.microsPerAppend) notes.push(NOTES.row4Append);
  return {
    summary: [
      [
        '4',
        'memory per idle session, excluding its log and the application’s McpServer (ours)',
        `${oursOwn === undefined ? '—' : bytes(oursOwn)} (SDK transport: ${sdkOwn === undefined ? '—' : bytes(sdkOwn)}; with McpServer: ${oursExLog === undefined ? '—' : bytes(oursExLog)})`,
        '≤ 2 KiB',
        verdict(ok),
      ],
      [
        '4',
        'memory per retained event (MemoryEventLog)',
        e
          ? `${fixed(e.bytesPerEvent, 0)} B (message ${fixed(e.bytesPerMessageObject, 0)} B + log ${fixed(e.bytesPerEvent - e.bytesPerMessageObject, 0)} B)`
          : failed(events),
        'stated',
        verdict(e ? Number.isFinite(e.bytesPerEvent) : false),
      ],
      [
        '4',
        'MCP 2026-07-28: memory per keyed call while its memo window is open (memo entry + retained events)',
        mm
          ? `${bytes(mm.bytesPerCall)} per call = ${fixed(mm.entriesPerCall, 2)} memo entry + ${fixed(mm.eventsPerCall, 2)} retained event; the entry alone ≈ ${memoEntry === undefined ? '—' : bytes(memoEntry)}`
          : failed(memo),
        'stated',
        verdict(mm ? Number.isFinite(mm.bytesPerCall) : false),
      ],
      [
        '4',
        'MCP 2026-07-28: 100,000 keyed calls inside one memo window',
        mm
          ? `${bytes(100_000 * mm.bytesPerCall)} of heap (from ${int(mm.calls)} calls: ${bytes(mm.bytesPerCallFirstHalf)} per call over the first half, ${bytes(mm.bytesPerCallSecondHalf)} over the second)`
          : failed(memo),
        'stated; per call flat as the memo fills (2nd half ≤ 1.25× 1st)',
        verdict(memoFlat),
      ],
      [
        '4',
        `${int(SIZES.manySessions)} concurrent idle sessions`,
        m
          ? `${fixed(m.createMs / 1000, 1)} s to open, ${bytes(m.heapBytes)} heap, call afterwards ${fixed(m.oldSessionCallMs, 0)} ms`
          : '—',
        'still serving',
        m ? PASS : MISS,
      ],
    ],
    body: lines.join('\n'),
    notes,
  };
}

async function row5(): Promise<Section> {
  progress('row 5: verification speed');
  const runs = await task<PropertyRunsResult>(`${int(SIZES.propertyRuns)} property runs`, 'property-runs', {
    runs: SIZES.propertyRuns,
    seed: 42,
  });
  const exp = await task<ExploreResult>(`explore(${SIZES.exploreDepth})`, 'explore', {
    depth: SIZES.exploreDepth,
  });
  const r = runs.result;
  const x = exp.result;
  return {
    summary: [
      [
        '5',
        'model checking: property runs/s; exhaustive schedules/s',
        `${r ? fixed(r.perSecond, 0) : '—'} runs/s; ${x ? fixed(x.perSecond, 0) : '—'} schedules/s`,
        '—',
        '—',
      ],
    ],
    body: [
      '### 5. Verification speed',
      '',
      table(
        ['what', 'count', 'time', 'per second', 'violations'],
        [
          r
            ? [
                `property runs: \`runSchedule\` + all ${5} CHECKS over \`fc.sample(scenarioArb)\`, seed ${r.seed} (sampling not timed)`,
                int(r.runs),
                `${fixed(r.ms / 1000, 1)} s`,
                fixed(r.perSecond, 0),
                r.violations,
              ]
            : ['property runs', '', failed(runs), '', ''],
          x
            ? [
                `exhaustive explorer \`explore(${x.depth})\` (properties/exhaustive.ts, heartbeat on): ${int(x.distinctStates)} distinct states`,
                int(x.schedules),
                `${fixed(x.ms / 1000, 1)} s`,
                fixed(x.perSecond, 0),
                x.violations,
              ]
            : ['explorer', '', failed(exp), '', ''],
        ],
      ),
    ].join('\n'),
    notes: [],
  };
}

/** Redis traffic per unit as a table cell: commands (round trips) and bytes sent. */
const redisCell = (c: RedisCost | undefined): string =>
  c === undefined ? '—' : `${fixed(c.commands, 1)} commands, ${bytes(c.bytesSent)} sent`;

/** Row 6's columns for a calls table (2025 and 2026 alike). */
const CALL_COLUMNS = [
  'store',
  'calls/s',
  'vs memory',
  'latency median / p99',
  'per 1,000 calls, calls/s',
  'Redis per call, loaded',
  'Redis round trips per call, one in flight (commands)',
];

async function row6(): Promise<Section> {
  progress(`row 6: stores (memory, SQLite, Redis; ${int(SIZES.storeCalls)} calls)`);
  type Outcome<T> = TaskOutcome<T>;
  type Run = { key: string; label: string; args: Record<string, unknown> };
  const base = { total: SIZES.storeCalls, concurrency: SIZES.concurrency };
  // Each group alternates (BENCH_STORE_ROUNDS runs of each; the median run counts), its ratios side by side.
  const group = async <T>(name: string, runs: Run[]): Promise<Record<string, Outcome<T>>> => {
    const out = await alternate(runs, SIZES.storeRounds, (r, round) =>
      task<T>(
        `${r.label}${SIZES.storeRounds > 1 ? `, run ${round} of ${SIZES.storeRounds}` : ''}`,
        name,
        r.args,
      ),
    );
    return Object.fromEntries(
      runs.map((r, i) => [
        r.key,
        medianRun(out[i] as Array<Outcome<T & { perSecond: number }>>) as Outcome<T>,
      ]),
    );
  };
  const calls = await group<StoreCallsResult>('store-calls', [
    { key: 'memory', label: '2025 calls, memory', args: { store: 'memory', ...base } },
    { key: 'sqlite', label: '2025 calls, SQLite', args: { store: 'sqlite', ...base } },
    { key: 'redis', label: '2025 calls, Redis', args: { store: 'redis', ...base } },
    // One and two instances behind the same round-robin balancer: the ratio is what a second instance costs.
    {
      key: 'redis-1',
      label: '2025 calls, Redis, 1 instance behind the balancer',
      args: { store: 'redis', instances: 1, proxy: true, ...base },
    },
    {
      key: 'redis-2',
      label: '2025 calls, Redis, 2 instances round-robin',
      args: { store: 'redis', instances: 2, ...base },
    },
  ]);
  const notify = await group<StoreNotifyResult>(
    'store-notify',
    (['memory', 'sqlite', 'redis'] as const).map((store) => ({
      key: store,
      label: `2025 notifications, ${store}`,
      args: { store, count: SIZES.storeNotifications },
    })),
  );
  const keyedBase = { total: SIZES.storeCalls, concurrency: 20 };
  const keyed = await group<StoreCallsResult>('store-keyed', [
    { key: 'memory', label: '2026 keyed calls, memory', args: { store: 'memory', ...keyedBase } },
    { key: 'sqlite', label: '2026 keyed calls, SQLite', args: { store: 'sqlite', ...keyedBase } },
    { key: 'redis', label: '2026 keyed calls, Redis', args: { store: 'redis', ...keyedBase } },
    {
      key: 'redis-2',
      label: '2026 keyed calls, Redis, 2 instances round-robin',
      args: { store: 'redis', instances: 2, ...keyedBase },
    },
  ]);
  const fillWindow = Math.max(1, Math.round(SIZES.memoFill / 10));
  const fill = await task<StoreCallsResult>(
    `2026 keyed calls, SQLite, the memo filling to ${int(SIZES.memoFill)} entries`,
    'store-keyed',
    // 10,000 calls at the 55 calls/s issue 29 saw on a full SQLite memo take three minutes.
    { store: 'sqlite', ...keyedBase, total: SIZES.memoFill, window: fillWindow, timeoutMs: 400_000 },
  );
  const marks = [100, 1_000, 10_000].filter((m) => m <= SIZES.sessionAge);
  if (!marks.includes(SIZES.sessionAge)) marks.push(SIZES.sessionAge);
  const age = await task<SessionAgeResult>(
    `one 2025 session on Redis, ${int(SIZES.sessionAge)} calls`,
    'store-age',
    {
      calls: SIZES.sessionAge,
      marks,
    },
  );

  const rate = (o: Outcome<{ perSecond: number }> | undefined) => (o?.ok ? o.result?.perSecond : undefined);
  const callRow = (label: string, o: Outcome<StoreCallsResult> | undefined, base: number | undefined) => {
    if (!o?.ok || !o.result) return [label, o ? failed(o) : 'not run', '', '', '', '', ''];
    const r = o.result;
    return [
      label,
      int(r.perSecond),
      ratio(r.perSecond, base),
      `${fixed(r.latencyMs.median, 1)} / ${fixed(r.latencyMs.p99, 1)} ms`,
      r.windowsPerSecond.map((w) => int(w)).join(' → ') || '—',
      redisCell(r.loaded),
      r.sequential ? `${fixed(r.sequential.writes, 1)} (${r.sequential.byName})` : '—',
    ];
  };
  const memoryCalls = rate(calls.memory);
  const memoryKeyed = rate(keyed.memory);
  const memoryNotify = rate(notify.memory);
  const callRows = [
    callRow('memory', calls.memory, memoryCalls),
    callRow('SQLite', calls.sqlite, memoryCalls),
    callRow('Redis, 1 instance', calls.redis, memoryCalls),
    callRow('Redis, 1 instance behind the round-robin balancer', calls['redis-1'], memoryCalls),
    callRow('Redis, 2 instances, round-robin', calls['redis-2'], memoryCalls),
  ];
  const keyedRows = [
    callRow('memory', keyed.memory, memoryKeyed),
    callRow('SQLite', keyed.sqlite, memoryKeyed),
    callRow('Redis, 1 instance', keyed.redis, memoryKeyed),
    callRow('Redis, 2 instances, round-robin', keyed['redis-2'], memoryKeyed),
  ];
  const notifyRows = (['memory', 'sqlite', 'redis'] as const).map((store) => {
    const o = notify[store];
    if (!o?.ok || !o.result) return [store, o ? failed(o) : 'not run', '', '', ''];
    const r = o.result;
    return [
      store,
      int(r.perSecond),
      ratio(r.perSecond, memoryNotify),
      r.cost ? `${fixed(r.cost.commands, 2)} commands, ${fixed(r.cost.writes, 2)} round trips` : '—',
      r.cost ? `${bytes(r.cost.bytesSent)} sent, ${bytes(r.cost.bytesReceived)} received` : '—',
    ];
  });
  const ageRows =
    age.ok && age.result
      ? age.result.marks.map((m) => [
          `${int(m.from)}–${int(m.to)}`,
          int(m.perSecond),
          fixed(m.cost.commands, 2),
          fixed(m.cost.writes, 2),
          bytes(m.cost.bytesSent),
          bytes(m.cost.bytesReceived),
          m.cost.byName,
        ])
      : [[failed(age), '', '', '', '', '', '']];
  const ageMarks = age.result?.marks ?? [];
  const first = ageMarks[0]?.cost;
  const flat =
    first === undefined
      ? undefined
      : ageMarks.every(
          (m) => m.cost.bytesSent <= first.bytesSent * 1.25 && m.cost.commands <= first.commands * 1.25,
        );
  const fillWindows = fill.ok ? (fill.result?.windowsPerSecond ?? []) : [];
  const fillFirst = fillWindows[0];
  const fillLast = fillWindows.at(-1);
  const atLeast = (x: number | undefined, y: number | undefined, share: number) =>
    x !== undefined && y !== undefined ? x >= y * share : undefined;
  const vs = (x: number | undefined, y: number | undefined) =>
    `${int(x ?? Number.NaN)} vs ${int(y ?? Number.NaN)}/s (${ratio(x, y)})`;
  const one = calls['redis-1']?.result;
  const two = calls['redis-2']?.result;
  const p99ok = one && two ? two.latencyMs.p99 <= 2 * one.latencyMs.p99 : undefined;
  const roundTrips = calls.redis?.result?.sequential?.writes;
  const keyedTrips = keyed.redis?.result?.sequential?.writes;
  const outcomes = [...Object.values(calls), ...Object.values(notify), ...Object.values(keyed), fill, age];
  const s = (label: string, result: string, target: string, ok: boolean | undefined) => [
    '6',
    label,
    result,
    target,
    verdict(ok),
  ];
  /** A row whose target is `x` ≥ `min` × `y`. */
  const atLeastRow = (label: string, x: number | undefined, y: number | undefined, min: number, of: string) =>
    s(label, vs(x, y), `≥ ${min}× ${of}`, atLeast(x, y, min));
  return {
    summary: [
      atLeastRow(
        'Redis: 2025 calls/s, 1 instance vs the memory store',
        rate(calls.redis),
        memoryCalls,
        0.7,
        'memory',
      ),
      atLeastRow(
        'Redis: 2025 calls/s, 2 instances round-robin vs the memory store (the balancer’s relay included)',
        rate(calls['redis-2']),
        memoryCalls,
        0.7,
        'memory',
      ),
      atLeastRow(
        'Redis: 2025 calls/s, 2 instances round-robin vs 1 behind the same balancer',
        two?.perSecond,
        one?.perSecond,
        0.9,
        'one instance',
      ),
      s(
        'Redis: p99 latency of a 2025 call, 2 instances vs 1 behind the same balancer',
        one && two
          ? `${fixed(two.latencyMs.p99, 0)} vs ${fixed(one.latencyMs.p99, 0)} ms (${ratio(two.latencyMs.p99, one.latencyMs.p99)})`
          : '—',
        '≤ 2× one instance',
        p99ok,
      ),
      atLeastRow(
        `Redis: 2025 notifications/s (${int(SIZES.storeNotifications)} on one call) vs the memory store`,
        rate(notify.redis),
        memoryNotify,
        0.5,
        'memory',
      ),
      atLeastRow(
        'Redis: 2026 keyed calls/s, 1 instance vs the memory store',
        rate(keyed.redis),
        memoryKeyed,
        0.7,
        'memory',
      ),
      atLeastRow(
        'Redis: 2026 keyed calls/s, 2 instances round-robin vs the memory store',
        rate(keyed['redis-2']),
        memoryKeyed,
        0.7,
        'memory',
      ),
      s(
        'Redis round trips per 2025 call (one call in flight)',
        fixed(roundTrips ?? Number.NaN, 2),
        '≤ 2',
        roundTrips === undefined ? undefined : roundTrips <= 2,
      ),
      s(
        'Redis round trips per 2026 keyed call (one call in flight)',
        fixed(keyedTrips ?? Number.NaN, 2),
        '≤ 3',
        keyedTrips === undefined ? undefined : keyedTrips <= 3,
      ),
      s(
        `Redis bytes sent and commands per 2025 call over the 100 calls ending at ${ageMarks.map((m) => int(m.to)).join(', ') || '—'} of one session`,
        ageMarks.map((m) => `${bytes(m.cost.bytesSent)} / ${fixed(m.cost.commands, 2)}`).join(' → ') ||
          failed(age),
        'flat (each ≤ 1.25× the first)',
        flat,
      ),
      atLeastRow('SQLite: 2025 calls/s vs the memory store', rate(calls.sqlite), memoryCalls, 0.7, 'memory'),
      atLeastRow(
        'SQLite: 2025 notifications/s vs the memory store',
        rate(notify.sqlite),
        memoryNotify,
        0.5,
        'memory',
      ),
      atLeastRow(
        'SQLite: 2026 keyed calls/s vs the memory store',
        rate(keyed.sqlite),
        memoryKeyed,
        0.7,
        'memory',
      ),
      s(
        `SQLite: 2026 keyed calls/s as the memo fills to ${int(SIZES.memoFill)} entries, the last ${int(fillWindow)} vs the first ${int(fillWindow)}`,
        fill.ok
          ? `${int(fillLast ?? Number.NaN)} vs ${int(fillFirst ?? Number.NaN)}/s (${ratio(fillLast, fillFirst)})`
          : failed(fill),
        'flat (≥ 0.8× the first)',
        atLeast(fillLast, fillFirst, 0.8),
      ),
    ],
    body: [
      '### 6. Stores: memory, SQLite, Redis',
      '',
      `Our server with its event log (and, on 2026-07-28, its memo) in memory, in a SQLite file, or in a real \`redis-server\` the bench starts (AOF on, \`appendfsync everysec\`, as the tests run it). Each instance runs in a process of its own; two instances share one Redis behind a round-robin balancer (a relay in the client's process, test/support/round-robin-proxy.ts); Redis traffic passes a counting relay (bench/lib/redis-meter.ts) that parses the commands the instances send. "Round trips" are the batches the instances flushed with one call in flight (100 calls after the timed run), the commands each batch held in brackets. ${int(SIZES.storeCalls)} calls after a 200-call warm-up; the stores of each table run one after the other${SIZES.storeRounds > 1 ? `, ${SIZES.storeRounds} times each, alternating (the median run counts)` : ''}, ratios to the memory store in the same run.`,
      '',
      '**2025 tool calls** (`echo`, one session, 50 concurrent, our client transport)',
      '',
      table(CALL_COLUMNS, callRows),
      '',
      `**2025 notifications** (one \`stream {${int(SIZES.storeNotifications)}}\` call, one instance)`,
      '',
      table(
        ['store', 'notifications/s', 'vs memory', 'Redis per notification', 'bytes per notification'],
        notifyRows,
      ),
      '',
      '**2026-07-28 keyed calls** (the official v2 `Client` with `continuityFetch()`, 20 concurrent: every call keyed)',
      '',
      table(CALL_COLUMNS, keyedRows),
      '',
      `**The SQLite memo filling** (${int(SIZES.memoFill)} keyed calls as above on one SQLite file, after the warm-up; calls/s per ${int(fillWindow)} calls): ${fill.ok ? fillWindows.map((w) => int(w)).join(' → ') : failed(fill)}${warningNote(fill)}`,
      '',
      `**One 2025 session's age** (Redis, ${int(SIZES.sessionAge)} calls): per call over the calls named, made one at a time (the calls between them 50 at a time)`,
      '',
      table(
        ['calls', 'calls/s', 'commands', 'round trips', 'bytes sent', 'bytes received', 'commands by name'],
        ageRows,
      ),
    ].join('\n'),
    notes: outcomes.some((o) => o?.warnings.unhandledRejection)
      ? ['Row 6: a task reported unhandled rejections.']
      : [],
  };
}

async function row7(): Promise<Section> {
  progress(`row 7: cold start (${SIZES.coldRounds} starts of each server)`);
  const o = await task<ColdStartResult>('cold start, ours and the SDK alternating', 'cold-start', {
    rounds: SIZES.coldRounds,
  });
  const r = o.result;
  const ok = r ? r.ours.firstCallMs <= 1.1 * r.sdk.firstCallMs : undefined;
  const line = (label: string, x: ColdStartResult['ours']) => [
    label,
    `${fixed(x.readyMs, 0)} ms`,
    `${fixed(x.firstCallMs, 0)} ms`,
    x.all.map((ms) => int(ms)).join(', '),
  ];
  return {
    summary: [
      [
        '7',
        `cold start: process start → first answered 2025 call, ours vs the SDK server (median of ${SIZES.coldRounds}, alternating)`,
        r
          ? `${fixed(r.ours.firstCallMs, 0)} vs ${fixed(r.sdk.firstCallMs, 0)} ms (${ratio(r.ours.firstCallMs, r.sdk.firstCallMs)})`
          : failed(o),
        '≤ 1.1× SDK',
        verdict(ok),
      ],
    ],
    body: [
      '### 7. Cold start',
      '',
      `A server process started from nothing, timed from \`spawn\` to the answer of its first tool call: initialize, \`notifications/initialized\` and an \`echo\` call on a new session, read by raw \`fetch\` from the (warm) bench process. Each server's entry (bench/cold/ours.ts: \`createContinuityServer\` with library defaults; bench/cold/sdk.ts: the SDK's \`simpleStreamableHttp\` wiring, no event store; both with the bench's \`McpServer\`) is bundled once with esbuild, every package left external, and run by plain \`node\`: no TypeScript loader in the timed process, \`node_modules\` loaded as an application's would be. One unmeasured start of each first; then ${SIZES.coldRounds} of each, alternating.`,
      '',
      r
        ? table(
            ['server', 'listening (median)', 'first call answered (median)', 'every start, ms'],
            [line('mcp-continuity server', r.ours), line('SDK server', r.sdk)],
          )
        : failed(o),
    ].join('\n'),
    notes: ok === false ? [NOTES.row7] : [],
  };
}

/**
 * Why a target is missed, from profiles taken when the miss was diagnosed (bench/profile-summary.ts on
 * `node --cpu-prof`). Printed only while the row misses; re-profile after changes (BENCH_PROF_DIR).
 */
const NOTES = {
  row1: [
    '**Row 1 (profiled on commit d013473).** Neither process of (a) is saturated (100k notifications: our',
    'client ~60 % busy, our server ~40 %). In the client, garbage collection is 17 % of its time, the SDK `Client`’s',
    'zod validation of every notification ~10 %, then `JSON.parse` and SSE parsing; the client machines take a',
    'parsed chunk (often hundreds of events) as one `sse.events` event, decided by `absorbEvents`',
    '(machines/client/absorb.ts). Before commit c0804a8 they took one machine event per SSE event and one per',
    'message in the session machine, ~34 µs each: (a) then ran at ~12k notifications/s, 0.05× of what the bare',
    'frames reach with a parser and no MCP client (g). No stack that ends in an SDK `Client` comes near (g): the',
    '`Client` alone, fed objects with no HTTP (f), is under a third of it. The SDK server (c, d) is slow for a',
    'reason of its own: 66 % of its process is Node’s web-stream `dequeueValue` (an `Array.shift` in',
    '`node:internal/webstreams`) when the tool outruns the socket (profiled on commit 212131c). Ours reads its',
    'body at once and lets Node’s socket buffer hold what the reader has not taken, up to `SSE_MAX_BUFFERED_BYTES`',
    '(16 MiB, src/server/http.ts); a tool that awaits its sends, as this one does, waits while its reader is',
    'more than 1 MiB behind (`SSE_PACE_BYTES`, src/server/web-sink.ts), so its reader is never cut.',
  ].join(' '),
  row1Modern: [
    '**Row 1, MCP 2026-07-28 notifications.** Not profiled yet in this shape: (v′) and (v) share the v2 `Client`',
    '(every notification validated by it) and differ in the server; profile both servers with',
    '`BENCH_PROF_DIR=/tmp/prof BENCH_ROWS=1` and `bench/profile-summary.ts` before drawing conclusions.',
  ].join(' '),
  row2: [
    '**Row 2 (profiled on commit 49a4927).** The client is the limit on both stacks (~85 % busy; the servers',
    'about half idle). With the server fixed, the two clients are level once warm (our server, 5,000 calls,',
    'two runs each: ours 1,008 and 945/s, the SDK’s 984 and 1,061/s); so are the two servers with the SDK’s',
    'client. What ours loses is the first ~1,500 calls of a fresh process: the client machines alone take',
    '~400 µs per call for the first 500 calls and ~80 µs once compiled (in-process harness, 50 in flight),',
    'and a client call is ~1.3 ms in all, most of it `fetch` (undici builds a web stream for every request',
    'body and response) and the SDK `Client`. Per call the client machines see 3 stream events',
    '(`stream.reuse`, `http.stream`, one `sse.events` carrying the priming event and the answer) and 2 session',
    'events (`app.send`, `stream.answered`), and write one cursor record. Fixed in this issue: a stream',
    'context had 21 keys, and XState’s `Object.assign` copy of an object with 20 or more keys is a V8',
    'hash-table (dictionary-mode) object, ~45 µs per call; a request body is no longer turned into a Web',
    '`Request` on the server (~120 µs of server CPU per call). Tried and not kept: the exchange as entry/exit',
    'actions instead of an invoked actor (~15 µs per call in a micro-benchmark, within the noise here).',
  ].join(' '),
  row2Modern: [
    '**Row 2, MCP 2026-07-28 (profiled on commit 9fa4bc7 with `bench/profile-modern-keyed.ts`: CPU µs per call,',
    'client and server in one process; its `plain` mode is our server under the official client).** Fixed in',
    'issue 25: the client built a new call machine for every call (`modernCallMachine.provide` builds every',
    'state node again, ~150 µs of CPU), now provided once, each call’s I/O found by its actor system',
    '(src/client/modern/call-machine-io.ts); a stopped attempt and a keyed body’s reading were aborted without',
    'a reason (a `DOMException` and its stack per call); the endpoint built a Web `Request` (a web stream for',
    'its body) for keyed calls that never read it, and relayed each keyed response through one more stream.',
    'On a loaded machine (load average ~20) CPU per call against the official stack went from 1.8–1.9× to',
    '1.3× (keyed) and from 1.5× to 1.3× (unkeyed). `plain` costs about what unkeyed does, so what is left is',
    'the server’s: with the extension an unkeyed call streams (SSE with keep-alives) where the official server',
    'answers JSON, and the official client parses SSE through web streams. A keyed re-issue enqueues one chunk',
    'per drain of the keyed runtime (at most 64 KiB) instead of one per event (10,000 events: 557 → 196 ms',
    'median at that load).',
  ].join(' '),
  row7: [
    '**Row 7, cold start.** Not profiled yet: `node --cpu-prof node_modules/.cache/mcpc-bench-cold/ours.mjs`',
    '(the bundle the row builds) shows what a start loads and compiles before the first call.',
  ].join(' '),
  row3: [
    '**Row 3 (profiled on commit 680a8b4, fixed since).** The replay is bound by our server’s CPU (the raw reader',
    'was 65 % idle). It used to write each replayed event on its own (`TextEncoder.encode`, a web-stream enqueue',
    'and a `res.write` per event, ~5.5 µs each); a replay is now written in strings of up to 64 KiB',
    '(`Attachment.writeAll`), which halved the 10,000-event median (58 → 28 ms) and p99 (99 → 56 ms) on this',
    'machine. What is left per event is `JSON.stringify` of the stored message (`eventFrame`); the slow',
    'outliers (p99) coincide with GC.',
  ].join(' '),
  row4Session: [
    '**Row 4, per idle session (diagnosed on commit 212131c).** Most of an idle session is the SDK `McpServer` the',
    'application creates for it (22–29 KiB, the same on the SDK stack). Of ours, the started `serverSessionMachine`',
    'XState actor alone is ~5 KiB (snapshot, context objects, the idle-TTL delayed event and its timer, actor',
    'system); the rest is `RuntimeSession`, `SessionTransport`, the per-session `headers` object, maps and the',
    'session’s entry in the handler. The SDK’s transport costs ~3.4 KiB for the same session. Under 2 KiB needs an',
    'idle session without a running actor (a plain record, and the actor created when a request arrives), or a',
    'much smaller one.',
  ].join(' '),
  row4Append: [
    '**Row 4, append cost (diagnosed on commit 680a8b4, where it was fixed by acc60db: if it shows again, re-profile).** `appendToWindow` (machines/server/retention.ts) copies the window’s `appendedAt`',
    'array on every append (`[...w.appendedAt, at]`) and `evictWindow` slices it on every count eviction, so an',
    'append costs O(retained events): filling one stream of capacity 100,000 took 98 s in a separate measurement',
    '(978 µs per append; 30,000: 8.3 s), and past ~16k events the copies land in V8’s large-object space, hence the',
    'jump. It is also 38 % of our server’s CPU per notification in row 1 at the default capacity of 1,000. A',
    'mutable ring buffer (or an index of the oldest slot) in MemoryEventLog makes it O(1).',
  ].join(' '),
  row6: [
    '**Row 6, before and after issue 29 (counted on the wire, so they do not depend on the load).** Before (commit',
    '37894a8, two runs on 2026-12-03): a 2025 call on Redis sent 6 commands in 6 round trips (3 scripts, a',
    'version check, a change-feed `XADD`, and the instance’s own `XREAD` of it), and the bytes it sent grew with',
    'the session: 7.7 KiB per call over calls 1–100, 116 KiB at 901–1,000, 239 KiB at 1,901–2,000 (the whole',
    'session record, every request id in it, rewritten per call); two instances 9.5 commands and 111 KiB per',
    'call; a notification 3 commands in 3 round trips; a 2026 keyed call 15.5 commands in 15.4 round trips. After:',
    'a 2025 call sends 4 scripts in 4 round trips and ~1.8 KiB at every age (1.87, 1.83, 1.85 KiB per call at',
    'calls 1–100, 901–1,000 and 9,901–10,000 of one 10,000-call session): the record is a core plus one entry per',
    'stream (machines/server/shared-record.ts), a catch-up is one script answering “unchanged” or only what',
    'changed; a notification is 1 script (append, eviction and report together; reports go only to the other',
    'live instances’ inboxes, so one instance sends and reads none); a keyed call 11–12 round trips. Still over',
    'the targets: the 2025 call’s 4 round trips are the session runtime’s sequence (catch up, commit the',
    'admission, open the stream, store the answer; src/server/session.ts awaits each), the keyed call’s are the',
    'keyed runtime’s (src/server/keyed); two instances still take turns on one record version per session',
    '(commands per call 6.8: each instance catches up on the other’s decisions), and calls/s on this shared',
    '2-core machine moved by up to 2× between runs of the same code, so the calls/s verdicts are read as noise',
    'unless they repeat.',
  ].join(' '),
  sdkWarnings: [
    '`MaxListenersExceededWarning` on the SDK client: `StreamableHTTPClientTransport` passes one `AbortSignal` to',
    'every `fetch`, and undici keeps an abort listener per `Request` until it is garbage-collected (stack:',
    '`transport.ts:113` → `new Request` → `addAbortListener`). Not ours; our transport uses one controller per exchange.',
  ].join(' '),
};

// ------------------------------------------------------------------------------------------- main

const loads = (l: readonly number[]) => l.map((x) => fixed(x, 2)).join(', ');
const LOAD_AT_START = os.loadavg();
const started = performance.now();
progress(`bench: scale ${SCALE}, rows ${[...ROWS].join(',')}; load average ${loads(LOAD_AT_START)}`);
const sections: Section[] = [];
const runners: Record<string, () => Promise<Section>> = {
  '1': row1,
  '2': row2,
  '3': row3,
  '4': row4,
  '5': row5,
  '6': row6,
  '7': row7,
};
for (const key of ROW_KEYS) {
  if (ROWS.has(key)) sections.push(await (runners[key] as () => Promise<Section>)());
}
const totalS = (performance.now() - started) / 1000;
const LOAD_AT_END = os.loadavg();
progress(`bench: done in ${fixed(totalS, 0)} s; load average ${loads(LOAD_AT_END)}`);
const summary = table(
  ['row', 'measurement', 'result', 'target', 'verdict'],
  sections.flatMap((s) => s.summary),
);
const notes = sections.flatMap((s) => s.notes);
const doc = [
  '# Benchmarks',
  '',
  'Generated by `npm run bench` (`bench/run.ts`); do not edit by hand. Every number is measured when the script runs, on the machine below, over 127.0.0.1.',
  '',
  ...machine(),
  `- Total time: ${fixed(totalS, 0)} s`,
  '',
  summary,
  '',
  ...(notes.length > 0
    ? [
        summary.includes(MISS) ? '## Why targets are missed, and other notes' : '## Notes',
        '',
        ...notes.flatMap((n) => [n, '']),
      ]
    : []),
  '## Details',
  '',
  ...sections.flatMap((s) => [s.body, '']),
  '## Method',
  '',
  '- Each measurement runs in a fresh Node process (`bench/child.ts`); each server runs in a process of its own (`bench/serve.ts`), so client and server each have a core. Servers use library defaults (heartbeats every 15 s on both stacks; our MemoryEventLog keeps 1,000 events per stream unless stated). The SDK server is wired as its `simpleStreamableHttp` example (one `StreamableHTTPServerTransport` + `McpServer` per session); its event store, where used, is the SDK’s own example `InMemoryEventStore`.',
  '- Sizes are the issue’s; `BENCH_SCALE` multiplies them. The cross stacks of row 2 make fewer calls by default (set `BENCH_CROSS_CALLS`), to keep the whole run under about 8 minutes on 2 cores.',
  '- The calls/s rows of row 2 alternate their stacks and take the median run (row 6 too with `BENCH_STORE_ROUNDS`); other numbers are single runs. On this shared 2-core machine they varied by up to 2× between runs (the raw ceiling most), so compare rows of the same run, not rows of different runs.',
  "- To see where time goes: `BENCH_PROF_DIR=/tmp/prof BENCH_ROWS=1 npm run bench`, then `npx tsx bench/profile-summary.ts /tmp/prof/<file>.cpuprofile 30 src/` (add `--callers=<function>` for the call chains under a hot function). One task by hand: `node --expose-gc --import tsx bench/child.ts <task> '<json>'` (tasks in bench/tasks.ts).",
  '',
].join('\n');
console.log(doc);
if (OUT) {
  writeFileSync(OUT, doc);
  progress(`wrote ${OUT} (${fixed(totalS, 0)} s)`);
} else progress(`not all rows ran: ${OUT ?? 'docs/benchmarks.md'} left as it was (set BENCH_OUT to write)`);
