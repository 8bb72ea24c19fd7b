import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ServeOptions, ServeRequest } from '../serve.js';
import type { ServerKind } from './stacks.js';

const SERVE = fileURLToPath(new URL('../serve.ts', import.meta.url));

/** A benchmark server running in its own process (bench/serve.ts), driven over IPC. */
export interface RemoteServer {
  readonly url: string;
  readonly pid: number;
  /** heapUsed after gc in the server process, and its live session count. */
  heap(): Promise<{ heapUsed: number; sessions: number }>;
  /** Ours only: forgets every session's events in the MemoryEventLog (to measure sessions without logs). */
  dropLogs(): Promise<void>;
  stats(): Promise<{
    log?: { sessions: number; streams: number; events: number };
    /** `ours-2026` on the memory store: the memo's entries. */
    memo?: { entries: number; principals: number; timers: number };
    errors: string[];
    sessions: number;
  }>;
  close(): Promise<void>;
}

/** Node flags for bench processes: gc for heap readings; `--cpu-prof` when BENCH_PROF_DIR is set. */
export function benchExecArgv(): string[] {
  const prof = process.env.BENCH_PROF_DIR;
  return ['--expose-gc', '--import', 'tsx', ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [])];
}

export async function startRemote(
  kind: ServerKind | 'raw' | 'v2' | 'ours-2026',
  options: ServeOptions = {},
  startTimeoutMs = 20_000,
): Promise<RemoteServer> {
  const child: ChildProcess = fork(SERVE, [kind, JSON.stringify(options)], {
    execArgv: benchExecArgv(),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, (m: Record<string, unknown>) => void>();
  let seq = 0;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const ready = new Promise<{ url: string; pid: number }>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server ${kind}: not ready in ${startTimeoutMs} ms`)),
      startTimeoutMs,
    );
    child.once('exit', (code) => reject(new Error(`server ${kind} exited with ${code} before it was ready`)));
    child.on('message', (m: Record<string, unknown>) => {
      if (m.type === 'ready') {
        clearTimeout(timer);
        resolve(m as { url: string; pid: number });
        return;
      }
      const answer = pending.get(m.seq as number);
      pending.delete(m.seq as number);
      answer?.(m);
    });
  });
  let info: { url: string; pid: number };
  try {
    info = await ready;
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const ask = (type: ServeRequest['type'], timeoutMs = 60_000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const n = ++seq;
      const timer = setTimeout(() => {
        pending.delete(n);
        reject(new Error(`server ${kind}: no answer to ${type} in ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(n, (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      child.send({ seq: n, type } satisfies ServeRequest);
    });
  return {
    url: info.url,
    pid: info.pid,
    heap: async () => {
      const m = await ask('heap');
      return { heapUsed: m.heapUsed as number, sessions: m.sessions as number };
    },
    dropLogs: async () => {
      await ask('drop-logs');
    },
    stats: async () => (await ask('stats')) as Awaited<ReturnType<RemoteServer['stats']>>,
    close: async () => {
      if (child.exitCode !== null) return;
      await ask('exit', 10_000).catch(() => undefined);
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
