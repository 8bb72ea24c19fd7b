import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway `redis-server` for tests: 127.0.0.1, a free port, a temporary directory, AOF on, RDB
 * snapshots off. `stop()` ends it gracefully; `start()` again brings it back on the same port and
 * directory, so what it persisted can be checked. Fails (never skips) when `redis-server` is missing.
 */
export interface RedisServer {
  readonly port: number;
  readonly dir: string;
  readonly url: string;
  /** The server's process id while it runs. */
  readonly pid: number | undefined;
  /** Starts the server again on the same port and directory (after `stop`, `shutdown` or `kill`). */
  start(): Promise<void>;
  /** `SHUTDOWN`: the server flushes and fsyncs the AOF, then exits. Resolves once it has exited. */
  shutdown(): Promise<void>;
  /** SIGKILL: the process dies on the spot, as in a crash. Resolves once it has exited. */
  kill(): Promise<void>;
  /** SIGTERM (a graceful shutdown, like SHUTDOWN), SIGKILL if it lingers. Idempotent. */
  stop(): Promise<void>;
  /** Stops the server and removes its directory. */
  dispose(): Promise<void>;
}

export interface RedisServerOptions {
  /** Defaults to `redis-server` on the PATH, or `$REDIS_SERVER`. */
  readonly command?: string;
  /** `appendfsync`: defaults to `everysec`, the Redis default. */
  readonly appendfsync?: 'always' | 'everysec' | 'no';
  readonly startTimeoutMs?: number;
}

const INSTALL_HINT =
  'redis-server is not installed; the Redis event log tests need a real server. ' +
  'Install it (Debian/Ubuntu: `apt-get install -y redis-server`) or set REDIS_SERVER to its path.';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Sends one inline command over a raw connection; the reply (if any) is ignored. */
function sendCommand(port: number, command: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => socket.end(`${command}\r\n`));
    socket.once('error', reject);
    socket.once('close', () => resolve());
    socket.resume();
  });
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const command = options.command ?? process.env.REDIS_SERVER ?? 'redis-server';
  const probe = spawnSync(command, ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `${INSTALL_HINT} (running \`${command} --version\` failed: ${probe.error?.message ?? probe.stderr})`,
    );
  }
  const dir = await mkdtemp(join(tmpdir(), 'mcpc-redis-'));
  const timeoutMs = options.startTimeoutMs ?? 10_000;
  let port = 0;
  let child: ChildProcess | undefined;
  const killOnExit = (): void => {
    child?.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  /** Spawns the server on `port`; resolves when it accepts connections, rejects if it exits first. */
  const launch = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const proc = spawn(
        command,
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--dir',
          dir,
          '--appendonly',
          'yes',
          '--appendfsync',
          options.appendfsync ?? 'everysec',
          '--save',
          '',
          '--daemonize',
          'no',
          '--logfile',
          '',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child = proc;
      let output = '';
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new Error(`redis-server did not start within ${timeoutMs} ms:\n${output}`));
      }, timeoutMs);
      const onData = (chunk: Buffer): void => {
        output += chunk.toString();
        if (/Ready to accept connections/.test(output)) {
          clearTimeout(timer);
          resolve();
        }
      };
      proc.stdout?.on('data', onData);
      proc.stderr?.on('data', onData);
      proc.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      proc.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited (${code ?? signal}) before it was ready:\n${output}`));
      });
    });

  const stop = async (): Promise<void> => {
    const proc = child;
    if (!proc) return;
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const lingering = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      await exited(proc);
      clearTimeout(lingering);
    }
    child = undefined;
  };

  // The port is free when chosen but could be taken before the server binds it: try a few.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await launch();
      break;
    } catch (error) {
      await stop();
      if (attempt >= 5) {
        await rm(dir, { recursive: true, force: true });
        process.removeListener('exit', killOnExit);
        throw error;
      }
    }
  }

  return {
    port,
    dir,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child?.pid;
    },
    async start() {
      if (child) throw new Error('redis-server is already running');
      await launch();
    },
    async shutdown() {
      const proc = child;
      if (!proc) return;
      await sendCommand(port, 'SHUTDOWN');
      await exited(proc);
      child = undefined;
    },
    async kill() {
      const proc = child;
      if (!proc) return;
      proc.kill('SIGKILL');
      await exited(proc);
      child = undefined;
    },
    stop,
    async dispose() {
      await stop();
      process.removeListener('exit', killOnExit);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
